#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "bootstrap/config_store.hpp"
#include "bootstrap/job_liveness.hpp"
#include "bootstrap/store_auth.hpp"
#include "bootstrap/wire.hpp"
#include "common/settings.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace shmoe::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::Status;

constexpr std::int64_t kForeverMs = std::int64_t{365} * 24 * 3600 * 1000;
// Before a connection has proved the job key it may send one small frame (its hello) and must do
// so promptly: a stranger can hold neither much memory nor a descriptor for long.
constexpr std::size_t kHelloFrameLimit = 16u << 10;
constexpr auto kHelloDeadline = std::chrono::seconds(15);
// Room in a frame beyond its value: the opcode's other fields and the key.
constexpr std::size_t kFrameOverhead = 64u << 10;
// Counted per entry on top of its key and value: the hash node and the strings' own size.
constexpr std::size_t kEntryOverhead = 64;
// A connection whose replies pile up unread is not served (nor read) until they drain.
constexpr std::size_t kOutBacklogLimit = 1u << 20;
// While the job is still starting, a store that cannot accept connections for this long gives
// up and says why, rather than leaving the PEs to wait for SHMOE_INIT_TIMEOUT.
constexpr auto kAcceptGiveUp = std::chrono::seconds(5);
// A PE watches two keys (abort, hang); watches are not counted in the store's size, so a
// connection may hold only a few.
constexpr std::size_t kMaxWatchesPerConnection = 16;
// Refused strangers are logged, but only the first few: a flood must not flood the log too.
constexpr int kLoggedRefusals = 10;

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string sockaddr_text(const sockaddr_storage& ss) {
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sizeof(ss), host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return ss.ss_family == AF_INET6 ? fmt::format("[{}]:{}", host, port)
                                  : fmt::format("{}:{}", host, port);
}

// Text from a client as a message may show it: it may be long, binary, or made to forge lines
// in the launcher's log.
std::string printable(std::string_view text) {
  std::string out;
  for (char ch : text.substr(0, 64)) out.push_back(ch >= ' ' && ch < 0x7f ? ch : '?');
  if (text.size() > 64) out += "...";
  return out;
}

// Who an unproven hello claims to be.
std::string describe_claim(const Hello& h) {
  const std::string host = printable(h.host);
  switch (h.role) {
    case PeerRole::kPe:
      return fmt::format("PE {} (pid {} on {})", h.rank, h.pid, host);
    case PeerRole::kMonitor:
      return fmt::format("the monitor of PE {} (pid {} on {})", h.rank, h.pid, host);
    case PeerRole::kTool:
      break;
  }
  return fmt::format("a tool (pid {} on {})", h.pid, host);
}

std::size_t entry_bytes(std::size_t key_size, std::size_t value_size) {
  return key_size + value_size + kEntryOverhead;
}

struct Conn {
  std::uint64_t id = 0;
  int fd = -1;
  std::string peer;
  std::string in;
  std::size_t in_off = 0;  // consumed prefix of `in`, erased in batches
  std::string out;
  std::size_t out_off = 0;
  std::string nonce;  // the challenge sent on accept; the hello must sign it
  std::optional<Clock::time_point> hello_deadline;
  bool greeted = false;  // the hello proved the job key and was accepted
  Hello hello;
  bool said_bye = false;
  bool dead = false;
  // Why the server (not the peer) ended the connection; empty when the peer went away.
  std::string kill_reason;
  // A GET that waits for its key. While parked, further frames stay buffered so that replies
  // keep the order of the requests.
  bool parked = false;
  std::string parked_key;
  std::optional<Clock::time_point> deadline;
  std::size_t pending_watches = 0;  // kWatch requests not yet answered by their event
};

}  // namespace

struct ConfigStoreServer::Impl {
  explicit Impl(Options o)
      : opt(std::move(o)),
        job_id(opt.job_key.job_id()),
        max_frame(opt.limits.max_value + kFrameOverhead),
        job(opt.job_size) {}

  Options opt;
  const std::string job_id;
  const std::size_t max_frame;
  std::atomic<std::size_t> usage_bytes{0};
  std::atomic<std::size_t> usage_keys{0};
  int listen_fd = -1;
  int wake_rd = -1;
  int wake_wr = -1;
  std::uint16_t bound_port = 0;

  std::mutex lifecycle_mu;
  std::thread thread;
  std::atomic<bool> stop_requested{false};
  bool started = false;
  bool stopped = false;

  // Everything below belongs to the service thread.
  std::unordered_map<std::uint64_t, Conn> conns;
  std::uint64_t next_id = 1;
  std::unordered_map<std::string, std::string> kv;
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters;
  // Connections that asked (kWatch) to be told once each of these keys has a value.
  std::unordered_map<std::string, std::vector<std::uint64_t>> watchers;
  std::vector<std::uint64_t> runnable;
  JobLiveness job;
  std::size_t stored_bytes = 0;
  int refusals_logged = 0;
  bool accept_failing = false;
  // Since when accept() has failed for lack of descriptors; what the server says about it.
  std::optional<Clock::time_point> accept_failing_since;
  bool accept_trouble_logged = false;
  std::string store_trouble;

  void open_listener();
  void run();
  void accept_all();
  void welcome(int fd, const sockaddr_storage& ss);
  void on_accept_failure(int err);
  std::string descriptor_shortage(int err) const;
  void read_from(Conn& c);
  void process_frames(Conn& c);
  void handle(Conn& c, std::uint8_t code, std::string_view payload);
  void on_hello(Conn& c, wire::Reader& r, std::string_view payload);
  void admit_pe(Conn& c, const Hello& h, const std::string& proof);
  void reply(Conn& c, wire::Writer& w);
  void reply_status(Conn& c, Status s);
  void refuse(Conn& c, const std::string& reason);
  void refuse_and_drop(Conn& c, const std::string& reason);
  void bad_request(Conn& c, const std::string& why);
  void log_stranger(const Conn& c, const std::string& what);
  bool within_limits(Conn& c, std::string_view op, const std::string& key,
                     std::size_t new_value_size);
  void flush(Conn& c);
  static bool backlogged(const Conn& c) { return c.out.size() - c.out_off > kOutBacklogLimit; }
  void note_usage();
  void publish(const std::string& key, std::string value);
  void append(const std::string& key, std::string_view value);
  bool erase(const std::string& key);
  void publish_abort(const std::string& message);
  void wake(const std::string& key);
  void push_event(Conn& c, const std::string& key, const std::string& value);
  void unpark(Conn& c);
  void expire_deadlines();
  int poll_timeout_ms() const;
  void settle();
  void close_conn(std::uint64_t id);
};

void ConfigStoreServer::Impl::open_listener() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(opt.port);
  const char* node = opt.bind_host.empty() ? nullptr : opt.bind_host.c_str();
  int rc = ::getaddrinfo(node, port_text.c_str(), &hints, &res);
  if (rc != 0) {
    throw make_error("config store: cannot resolve bind address '{}': {}", opt.bind_host,
                     ::gai_strerror(rc));
  }
  std::string last_error = "no usable address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = errno_text(errno);
      continue;
    }
    int one = 1;
    // A restarted launcher must be able to reuse the port while old connections sit in TIME_WAIT.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = errno_text(errno);
      ::close(fd);
      continue;
    }
    listen_fd = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (listen_fd < 0) {
    throw make_error("config store: cannot listen on {}:{}: {}", opt.bind_host, opt.port,
                     last_error);
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
    int err = errno;
    ::close(listen_fd);
    listen_fd = -1;
    throw make_error("config store: cannot create a pipe: {}", errno_text(err));
  }
  wake_rd = p[0];
  wake_wr = p[1];
}

void ConfigStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (!stop_requested.load(std::memory_order_acquire)) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_rd, POLLIN, 0});
    // While accept() fails for lack of descriptors the listener stays readable; leave it out of
    // one short poll so the loop does not spin.
    bool retry_accept_soon = accept_failing;
    accept_failing = false;
    fds.push_back({listen_fd, static_cast<short>(retry_accept_soon ? 0 : POLLIN), 0});
    for (auto& [id, c] : conns) {
      // Unread replies hold back the connection's further requests (see kOutBacklogLimit).
      short events = backlogged(c) ? 0 : POLLIN;
      if (c.out_off < c.out.size()) events |= POLLOUT;
      fds.push_back({c.fd, events, 0});
      ids.push_back(id);
    }
    int timeout = poll_timeout_ms();
    if (retry_accept_soon && (timeout < 0 || timeout > 100)) timeout = 100;
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::error("config store: poll failed: {}", errno_text(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (fds[0].revents != 0) {
      char buf[64];
      while (::read(wake_rd, buf, sizeof(buf)) > 0) {
      }
      if (stop_requested.load(std::memory_order_acquire)) break;
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = conns.find(ids[i - 2]);
      if (it == conns.end() || it->second.dead) continue;
      Conn& c = it->second;
      if (fds[i].revents & POLLOUT) {
        flush(c);
        // Requests held back behind the backlog may go on now.
        if (!c.dead && c.in.size() > c.in_off) runnable.push_back(c.id);
      }
      if (!c.dead && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) read_from(c);
      // A parked connection may keep pipelined frames, but not without bound.
      const std::size_t limit =
          (c.greeted ? max_frame : kHelloFrameLimit) + wire::kHeaderSize + (1u << 16);
      if (!c.dead && c.in.size() - c.in_off > limit) {
        bad_request(c, "too many requests queued behind a pending GET");
      }
    }
    if (fds[1].revents != 0 || retry_accept_soon) accept_all();
    expire_deadlines();
    settle();
  }
  for (auto& [id, c] : conns) ::close(c.fd);
  conns.clear();
}

void ConfigStoreServer::Impl::accept_all() {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd =
        ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) on_accept_failure(errno);
      return;
    }
    if (accept_failing_since) {
      log::info("config store: accepting connections again");
      accept_failing_since.reset();
      accept_trouble_logged = false;  // once per episode
      store_trouble.clear();
    }
    welcome(fd, ss);
  }
}

// The new connection gets its challenge at once; until it answers with a proven hello it may do
// nothing else.
void ConfigStoreServer::Impl::welcome(int fd, const sockaddr_storage& ss) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string nonce;
  try {
    nonce = auth::random_bytes(auth::kNonceBytes);
  } catch (const Error& e) {
    log::error("config store: refusing a connection: {}", e.what());
    ::close(fd);
    return;
  }
  std::uint64_t id = next_id++;
  Conn& c = conns[id];
  c.id = id;
  c.fd = fd;
  c.peer = sockaddr_text(ss);
  c.nonce = std::move(nonce);
  c.hello_deadline = Clock::now() + kHelloDeadline;
  wire::Writer w(static_cast<std::uint8_t>(Status::kChallenge));
  w.u16(wire::kProtocolVersion).str(c.nonce);
  reply(c, w);
}

// Out of descriptors, accept() fails again at every try while the connection waits in the
// backlog. Said once, with what would fix it; and while the job is still starting, the job
// ends with that message instead of waiting for SHMOE_INIT_TIMEOUT.
void ConfigStoreServer::Impl::on_accept_failure(int err) {
  accept_failing = true;
  const auto now = Clock::now();
  if (!accept_failing_since) accept_failing_since = now;
  store_trouble =
      err == EMFILE || err == ENFILE
          ? descriptor_shortage(err)
          : fmt::format("the config store cannot accept connections: {}", errno_text(err));
  if (!accept_trouble_logged) {
    accept_trouble_logged = true;
    log::error("{}", store_trouble);
  }
  if (now - *accept_failing_since >= kAcceptGiveUp && job.still_starting()) {
    publish_abort(store_trouble);
  }
}

std::string ConfigStoreServer::Impl::descriptor_shortage(int err) const {
  // How many store connections one PE opens: the most any rank has open now.
  std::unordered_map<std::int32_t, std::size_t> per_rank;
  std::size_t per_pe = 1;
  for (const auto& [id, c] : conns) {
    if (c.greeted && c.hello.role != PeerRole::kTool) {
      per_pe = std::max(per_pe, ++per_rank[c.hello.rank]);
    }
  }
  const std::int32_t job_size = job.size();
  const std::string arrivals = fmt::format("{} of {} PEs connected", job.arrived_count(),
                                           job_size > 0 ? std::to_string(job_size) : "?");
  if (err == ENFILE) {
    return fmt::format(
        "the config store cannot accept connections: the system's table of open files is full "
        "(ENFILE, see /proc/sys/fs/file-max); {}",
        arrivals);
  }
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const std::size_t limit = static_cast<std::size_t>(rl.rlim_cur);
  const std::size_t own = conns.size() + 3;  // connections, the listener, the wake-up pipe
  const std::size_t others = limit > own ? limit - own : 0;
  const std::string hard = rl.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_max);
  std::string need;
  if (job_size > 0) {
    const std::size_t pes = static_cast<std::size_t>(job_size);
    // Besides the PEs' connections: the launcher's own tool connections, and some room.
    const std::size_t needed = others + 3 + pes * per_pe + 8;
    need = fmt::format(
        "; a job of {} PEs needs about {} here ({} PEs x {} store connections each, as the PEs "
        "so far opened, plus the {} descriptors this process holds otherwise): raise the limit "
        "where the job is started, e.g. `ulimit -n {}`",
        pes, needed, pes, per_pe, others + 3, (needed + 255) / 256 * 256);
  }
  return fmt::format(
      "the config store cannot accept connections: this process has all {} file descriptors "
      "its RLIMIT_NOFILE allows in use ({} config store connections; hard limit {}); {}{}",
      limit, conns.size(), hard, arrivals, need);
}

void ConfigStoreServer::Impl::read_from(Conn& c) {
  char buf[64 * 1024];
  while (!c.dead) {
    ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<std::size_t>(n));
      process_frames(c);
      continue;
    }
    if (n == 0) {
      c.dead = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    return;
  }
}

void ConfigStoreServer::Impl::process_frames(Conn& c) {
  while (!c.dead && !c.parked && !backlogged(c)) {
    std::size_t avail = c.in.size() - c.in_off;
    if (avail < wire::kHeaderSize) break;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(c.in.data() + c.in_off);
    wire::FrameHeader h;
    try {
      h = wire::parse_header(bytes, c.greeted ? max_frame : kHelloFrameLimit);
    } catch (const wire::WireError& e) {
      bad_request(c, e.what());
      return;
    }
    if (avail - wire::kHeaderSize < h.length) break;
    std::string_view payload(c.in.data() + c.in_off + wire::kHeaderSize, h.length);
    c.in_off += wire::kHeaderSize + h.length;
    try {
      handle(c, h.code, payload);
    } catch (const wire::WireError& e) {
      bad_request(c, e.what());
      return;
    } catch (const std::exception& e) {
      // Anything else is a server bug or exhaustion; it must not take the whole job's store down.
      log::error("config store: dropping connection from {}: {}", c.peer, e.what());
      c.kill_reason = e.what();
      c.dead = true;
      return;
    }
  }
  if (c.in_off > 0 && (c.in_off == c.in.size() || c.in_off > (1u << 16))) {
    c.in.erase(0, c.in_off);
    c.in_off = 0;
  }
}

void ConfigStoreServer::Impl::handle(Conn& c, std::uint8_t code, std::string_view payload) {
  if (code < static_cast<std::uint8_t>(Op::kHello) ||
      code > static_cast<std::uint8_t>(Op::kWatch)) {
    throw wire::WireError(fmt::format("unknown opcode {}", code));
  }
  Op op = static_cast<Op>(code);
  wire::Reader r(payload);
  if (!c.greeted) {
    if (op == Op::kHello) {
      on_hello(c, r, payload);
    } else {
      refuse_and_drop(c, fmt::format("a request (opcode {}) before the hello that proves the "
                                     "job key: the connection must say hello first",
                                     code));
    }
    return;
  }
  switch (op) {
    case Op::kHello: {
      refuse(c, "this connection already said hello");
      return;
    }
    case Op::kSet: {
      std::string key(r.str());
      std::string_view value = r.str();
      r.expect_end();
      if (!within_limits(c, "SET", key, value.size())) return;
      // The first abort explains the failure; later ones are mostly its consequences.
      if (key != kAbortKey || !kv.contains(key)) publish(key, std::string(value));
      reply_status(c, Status::kOk);
      return;
    }
    case Op::kGet: {
      std::string key(r.str());
      std::int64_t timeout_ms = r.i64();
      r.expect_end();
      if (auto it = kv.find(key); it != kv.end()) {
        wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
        w.str(it->second);
        reply(c, w);
      } else if (timeout_ms == 0) {
        reply_status(c, Status::kTimeout);
      } else {
        c.parked = true;
        c.parked_key = key;
        c.deadline.reset();
        // Beyond a year is as good as forever, and Clock::now() + it could overflow.
        if (timeout_ms > 0 && timeout_ms < kForeverMs) {
          c.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        }
        waiters[key].push_back(c.id);
      }
      return;
    }
    case Op::kAdd: {
      std::string key(r.str());
      std::int64_t delta = r.i64();
      r.expect_end();
      std::int64_t current = 0;
      if (auto it = kv.find(key); it != kv.end()) {
        const std::string& v = it->second;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
        if (ec != std::errc() || end != v.data() + v.size()) {
          refuse(c, fmt::format("ADD on key '{}' whose value is not an integer", key));
          return;
        }
      }
      std::int64_t result = 0;
      if (__builtin_add_overflow(current, delta, &result)) {
        refuse(c, fmt::format("ADD of {} to key '{}' ({}) overflows", delta, key, current));
        return;
      }
      std::string text = std::to_string(result);
      if (!within_limits(c, "ADD", key, text.size())) return;
      publish(key, std::move(text));
      wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
      w.i64(result);
      reply(c, w);
      return;
    }
    case Op::kAppend: {
      std::string key(r.str());
      std::string_view value = r.str();
      r.expect_end();
      auto it = kv.find(key);
      const std::size_t before = it == kv.end() ? 0 : it->second.size();
      if (!within_limits(c, "APPEND", key, before + value.size())) return;
      append(key, value);
      reply_status(c, Status::kOk);
      return;
    }
    case Op::kCas: {
      std::string key(r.str());
      bool has_expected = r.u8() != 0;
      std::string_view expected = r.str();
      std::string_view desired = r.str();
      r.expect_end();
      auto it = kv.find(key);
      bool present = it != kv.end();
      bool match = has_expected ? (present && it->second == expected) : !present;
      if (match && !within_limits(c, "CAS", key, desired.size())) return;
      wire::Writer w(static_cast<std::uint8_t>(match ? Status::kOk : Status::kCasFailed));
      w.u8(present ? 1 : 0).str(present ? std::string_view(it->second) : std::string_view());
      if (match) publish(key, std::string(desired));
      reply(c, w);
      return;
    }
    case Op::kRemove: {
      std::string key(r.str());
      r.expect_end();
      reply_status(c, erase(key) ? Status::kOk : Status::kNotFound);
      return;
    }
    case Op::kStatus: {
      r.expect_end();
      const JobStatus s = job.status(store_trouble);
      wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
      w.i32(s.size).u32(static_cast<std::uint32_t>(s.arrived.size()));
      for (auto rank : s.arrived) w.i32(rank);
      w.u32(static_cast<std::uint32_t>(s.departed.size()));
      for (auto rank : s.departed) w.i32(rank);
      w.str(s.store_trouble);
      reply(c, w);
      return;
    }
    case Op::kBye: {
      r.expect_end();
      if (c.hello.role == PeerRole::kPe && !c.said_bye) {
        c.said_bye = true;
        if (job.depart(c.hello.rank) && !kv.contains(std::string(kFinalizedKey))) {
          publish(std::string(kFinalizedKey), "1");
        }
      }
      reply_status(c, Status::kOk);
      return;
    }
    case Op::kWatch: {
      std::string key(r.str());
      r.expect_end();
      if (!within_limits(c, "WATCH", key, 0)) return;
      if (c.pending_watches >= kMaxWatchesPerConnection) {
        refuse_and_drop(c, fmt::format("WATCH of a key beyond the {} pending watches a "
                                       "connection may hold",
                                       kMaxWatchesPerConnection));
        return;
      }
      reply_status(c, Status::kOk);
      if (auto it = kv.find(key); it != kv.end()) {
        push_event(c, key, it->second);
      } else {
        watchers[key].push_back(c.id);
        ++c.pending_watches;
      }
      return;
    }
  }
}

// The hello of a connection that has not proved anything yet. Nothing about the job is read or
// changed until its mac checks out: a refusal here closes the connection and leaves the job as
// it was.
void ConfigStoreServer::Impl::on_hello(Conn& c, wire::Reader& r, std::string_view payload) {
  const std::uint16_t version = r.u16();
  if (version != wire::kProtocolVersion) {
    refuse_and_drop(c, fmt::format("protocol version {} is not supported (this config store "
                                   "speaks version {}; are two shmoe installations mixed?)",
                                   version, wire::kProtocolVersion));
    return;
  }
  const std::uint8_t role = r.u8();
  Hello h;
  h.rank = r.i32();
  h.size = r.i32();
  h.pid = r.i32();
  h.host = std::string(r.str());
  const std::string_view claimed_job = r.str();
  const std::string_view client_nonce = r.str();
  const std::string_view signed_fields = payload.substr(0, r.offset());
  const std::string_view mac = r.str();
  r.expect_end();
  if (role < static_cast<std::uint8_t>(PeerRole::kPe) ||
      role > static_cast<std::uint8_t>(PeerRole::kTool)) {
    refuse_and_drop(c, fmt::format("unknown peer role {}", role));
    return;
  }
  h.role = static_cast<PeerRole>(role);
  if (client_nonce.size() != auth::kNonceBytes || mac.size() != auth::kMacBytes) {
    refuse_and_drop(c, fmt::format("malformed hello from {}: a nonce of {} bytes and a mac of {} "
                                   "(want {} and {})",
                                   describe_claim(h), client_nonce.size(), mac.size(),
                                   auth::kNonceBytes, auth::kMacBytes));
    return;
  }
  if (claimed_job != job_id) {
    refuse_and_drop(c, fmt::format("{} belongs to job {}, but this config store serves job {} "
                                   "(two jobs given one store address? each job needs its own "
                                   "port and its own SHMOE_JOB_KEY)",
                                   describe_claim(h), printable(claimed_job), job_id));
    return;
  }
  if (!auth::macs_equal(mac, auth::hello_mac(opt.job_key, c.nonce, signed_fields))) {
    refuse_and_drop(c, fmt::format("{} did not prove the key of job {}: its hello was made with "
                                   "another key, or for another connection",
                                   describe_claim(h), job_id));
    return;
  }
  // Proven: from here on the peer is one of the job's processes.
  c.hello_deadline.reset();
  const std::string proof = auth::store_proof(opt.job_key, mac);
  if (h.role == PeerRole::kPe) {
    admit_pe(c, h, proof);
    return;
  }
  c.greeted = true;
  c.hello = h;
  wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
  w.str(proof);
  reply(c, w);
}

// A PE of the job says which rank it is. Contradictions between processes that know the job key
// are the job's own misconfiguration: the job cannot run, and every PE hears why.
void ConfigStoreServer::Impl::admit_pe(Conn& c, const Hello& h, const std::string& proof) {
  if (std::string why = job.admit(h, c.id); !why.empty()) {
    // The refused PE hears first; publishing then lets the PEs that already wait learn why
    // the job cannot start.
    refuse(c, why);
    publish_abort(why);
    return;
  }
  c.greeted = true;
  c.hello = h;
  wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
  w.str(proof);
  reply(c, w);
}

void ConfigStoreServer::Impl::reply(Conn& c, wire::Writer& w) {
  if (c.dead) return;
  c.out.append(w.frame());
  flush(c);
}

void ConfigStoreServer::Impl::reply_status(Conn& c, Status s) {
  wire::Writer w(static_cast<std::uint8_t>(s));
  reply(c, w);
}

void ConfigStoreServer::Impl::refuse(Conn& c, const std::string& reason) {
  wire::Writer w(static_cast<std::uint8_t>(Status::kRefused));
  w.str(reason);
  reply(c, w);
}

// Refuses a connection that has not proved the job key (or broke a limit) and closes it.
void ConfigStoreServer::Impl::refuse_and_drop(Conn& c, const std::string& reason) {
  if (c.greeted) {
    log::warn("config store: closing the connection of {} from {}: {}", describe_claim(c.hello),
              c.peer, reason);
  } else {
    log_stranger(c, fmt::format("refused: {}", reason));
  }
  refuse(c, reason);
  c.kill_reason = fmt::format("was cut off by the config store: {}", reason);
  c.dead = true;
}

void ConfigStoreServer::Impl::log_stranger(const Conn& c, const std::string& what) {
  if (refusals_logged > kLoggedRefusals) return;
  if (++refusals_logged > kLoggedRefusals) {
    log::warn(
        "config store: more connections without the job key were refused; no longer "
        "logging them");
    return;
  }
  log::warn("config store: connection from {}: {}", c.peer, what);
}

// Whether `key` may hold a value of `new_value_size` bytes; if not, the request is refused and
// the connection dropped, with a message that names the sizes and the limit.
bool ConfigStoreServer::Impl::within_limits(Conn& c, std::string_view op, const std::string& key,
                                            std::size_t new_value_size) {
  const StoreLimits& limits = opt.limits;
  std::string why;
  if (key.size() > limits.max_value) {
    why = fmt::format(
        "{} with a key of {} bytes, over the limit of {} bytes per key or value "
        "(SHMOE_STORE_MAX_VALUE)",
        op, key.size(), limits.max_value);
  } else if (new_value_size > limits.max_value) {
    why = fmt::format(
        "{} would make the value of key '{}' {} bytes, over the limit of {} bytes "
        "per value (SHMOE_STORE_MAX_VALUE)",
        op, printable(key), new_value_size, limits.max_value);
  } else {
    auto it = kv.find(key);
    const std::size_t old = it == kv.end() ? 0 : entry_bytes(key.size(), it->second.size());
    const std::size_t total = stored_bytes - old + entry_bytes(key.size(), new_value_size);
    if (total > limits.max_total) {
      why = fmt::format(
          "{} of key '{}' ({} bytes) would make the store hold {} bytes, over its "
          "limit of {} bytes (SHMOE_STORE_MAX_TOTAL)",
          op, printable(key), new_value_size, total, limits.max_total);
    }
  }
  if (why.empty()) return true;
  refuse_and_drop(c, why);
  return false;
}

void ConfigStoreServer::Impl::bad_request(Conn& c, const std::string& why) {
  if (c.greeted) {
    log::warn("config store: closing the connection from {}: malformed request: {}", c.peer, why);
  } else {
    log_stranger(c, fmt::format("closed: malformed request: {}", why));
  }
  wire::Writer w(static_cast<std::uint8_t>(Status::kBadRequest));
  w.str(why);
  reply(c, w);
  c.kill_reason = fmt::format("sent a malformed request to the config store ({})", why);
  c.dead = true;
}

void ConfigStoreServer::Impl::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
  c.out.clear();
  c.out_off = 0;
}

void ConfigStoreServer::Impl::note_usage() {
  usage_bytes.store(stored_bytes, std::memory_order_relaxed);
  usage_keys.store(kv.size(), std::memory_order_relaxed);
}

void ConfigStoreServer::Impl::publish(const std::string& key, std::string value) {
  auto [it, fresh] = kv.try_emplace(key);
  stored_bytes -= fresh ? 0 : entry_bytes(key.size(), it->second.size());
  stored_bytes += entry_bytes(key.size(), value.size());
  it->second = std::move(value);
  note_usage();
  wake(key);
}

void ConfigStoreServer::Impl::append(const std::string& key, std::string_view value) {
  auto [it, fresh] = kv.try_emplace(key);
  stored_bytes += fresh ? entry_bytes(key.size(), value.size()) : value.size();
  it->second.append(value);
  note_usage();
  wake(key);
}

bool ConfigStoreServer::Impl::erase(const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) return false;
  stored_bytes -= entry_bytes(key.size(), it->second.size());
  kv.erase(it);
  note_usage();
  return true;
}

void ConfigStoreServer::Impl::publish_abort(const std::string& message) {
  if (kv.contains(std::string(kAbortKey))) return;
  publish(std::string(kAbortKey), message);
}

void ConfigStoreServer::Impl::push_event(Conn& c, const std::string& key,
                                         const std::string& value) {
  wire::Writer w(static_cast<std::uint8_t>(Status::kEvent));
  w.str(key).str(value);
  reply(c, w);
}

void ConfigStoreServer::Impl::wake(const std::string& key) {
  if (auto wit = watchers.find(key); wit != watchers.end()) {
    std::vector<std::uint64_t> ids = std::move(wit->second);
    watchers.erase(wit);
    const std::string& value = kv.at(key);
    for (std::uint64_t id : ids) {
      if (auto it = conns.find(id); it != conns.end()) {
        --it->second.pending_watches;
        push_event(it->second, key, value);
      }
    }
  }
  auto wit = waiters.find(key);
  if (wit == waiters.end()) return;
  std::vector<std::uint64_t> ids = std::move(wit->second);
  waiters.erase(wit);
  const std::string& value = kv.at(key);
  for (std::uint64_t id : ids) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    Conn& c = it->second;
    if (!c.parked || c.parked_key != key) continue;
    c.parked = false;
    c.deadline.reset();
    wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
    w.str(value);
    reply(c, w);
    runnable.push_back(id);
  }
}

void ConfigStoreServer::Impl::unpark(Conn& c) {
  if (!c.parked) return;
  c.parked = false;
  c.deadline.reset();
  if (auto wit = waiters.find(c.parked_key); wit != waiters.end()) {
    std::erase(wit->second, c.id);
    if (wit->second.empty()) waiters.erase(wit);
  }
}

void ConfigStoreServer::Impl::expire_deadlines() {
  auto now = Clock::now();
  for (auto& [id, c] : conns) {
    if (!c.dead && c.hello_deadline && *c.hello_deadline <= now) {
      log_stranger(c, fmt::format("closed: no hello within {} s", kHelloDeadline.count()));
      c.dead = true;
      continue;
    }
    if (c.dead || !c.parked || !c.deadline || *c.deadline > now) continue;
    unpark(c);
    reply_status(c, Status::kTimeout);
    runnable.push_back(id);
  }
}

int ConfigStoreServer::Impl::poll_timeout_ms() const {
  std::optional<Clock::time_point> earliest;
  for (const auto& [id, c] : conns) {
    if (c.parked && c.deadline && (!earliest || *c.deadline < *earliest)) earliest = c.deadline;
    if (c.hello_deadline && (!earliest || *c.hello_deadline < *earliest)) {
      earliest = c.hello_deadline;
    }
  }
  if (!earliest) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*earliest - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(left, 1 << 30));
}

void ConfigStoreServer::Impl::settle() {
  while (true) {
    while (!runnable.empty()) {
      std::uint64_t id = runnable.back();
      runnable.pop_back();
      auto it = conns.find(id);
      if (it != conns.end() && !it->second.dead) process_frames(it->second);
    }
    std::vector<std::uint64_t> dead;
    for (const auto& [id, c] : conns) {
      if (c.dead) dead.push_back(id);
    }
    if (dead.empty()) return;
    for (std::uint64_t id : dead) close_conn(id);
  }
}

void ConfigStoreServer::Impl::close_conn(std::uint64_t id) {
  auto it = conns.find(id);
  if (it == conns.end()) return;
  Conn c = std::move(it->second);
  conns.erase(it);
  unpark(c);
  for (auto wit = watchers.begin(); wit != watchers.end();) {
    std::erase(wit->second, id);
    wit = wit->second.empty() ? watchers.erase(wit) : std::next(wit);
  }
  if (!c.kill_reason.empty()) {
    // Ending our side first, and draining what the peer sent, lets the peer read our last
    // reply instead of a reset.
    ::shutdown(c.fd, SHUT_WR);
    char buf[4096];
    for (int i = 0; i < 64 && ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; ++i) {
    }
  }
  ::close(c.fd);
  if (c.greeted && c.hello.role == PeerRole::kPe) {
    if (auto abort = job.closed(c.hello, id, c.said_bye, c.kill_reason)) {
      publish_abort(*abort);
      if (opt.on_pe_lost) opt.on_pe_lost(c.hello);
    }
  }
}

StoreLimits StoreLimits::from_environment() {
  StoreLimits limits;
  limits.max_value = settings::store_max_value();
  limits.max_total = settings::store_max_total();
  constexpr std::size_t kMinValue = 4u << 10;
  constexpr std::size_t kMaxValue = std::size_t{1} << 31;  // what a client accepts in a reply
  if (limits.max_value < kMinValue || limits.max_value > kMaxValue) {
    throw make_error("SHMOE_STORE_MAX_VALUE={} is outside the allowed range {}..{} bytes",
                     limits.max_value, kMinValue, kMaxValue);
  }
  if (limits.max_total < limits.max_value) {
    throw make_error(
        "SHMOE_STORE_MAX_TOTAL={} is below SHMOE_STORE_MAX_VALUE={}: the store "
        "could not hold one value of the largest size",
        limits.max_total, limits.max_value);
  }
  return limits;
}

ConfigStoreServer::ConfigStoreServer(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->opt.job_key.empty()) {
    throw Error("config store: no job key: the store admits only processes that prove one");
  }
  if (impl_->opt.job_size < 0) {
    throw make_error("config store: job size {} is negative", impl_->opt.job_size);
  }
  impl_->open_listener();
}

ConfigStoreServer::~ConfigStoreServer() {
  stop();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  if (impl_->wake_rd >= 0) ::close(impl_->wake_rd);
  if (impl_->wake_wr >= 0) ::close(impl_->wake_wr);
}

std::uint16_t ConfigStoreServer::port() const {
  return impl_->bound_port;
}

StoreUsage ConfigStoreServer::usage() const {
  return {impl_->usage_bytes.load(std::memory_order_relaxed),
          impl_->usage_keys.load(std::memory_order_relaxed)};
}

void ConfigStoreServer::start() {
  std::lock_guard lock(impl_->lifecycle_mu);
  if (impl_->stopped) throw Error("config store: start() after stop()");
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  ::pthread_setname_np(impl_->thread.native_handle(), "shmoe-store");
}

void ConfigStoreServer::stop() {
  std::lock_guard lock(impl_->lifecycle_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stop_requested.store(true, std::memory_order_release);
  char byte = 1;
  ssize_t ignored = ::write(impl_->wake_wr, &byte, 1);
  (void)ignored;
  if (impl_->thread.joinable()) impl_->thread.join();
  // New clients must see a refused connection rather than an unanswered one.
  ::close(impl_->listen_fd);
  impl_->listen_fd = -1;
}

}  // namespace shmoe::bootstrap
