#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "bootstrap/config_store.hpp"
#include "bootstrap/wire.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace shmoe::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::Status;

constexpr std::int64_t kForeverMs = std::int64_t{365} * 24 * 3600 * 1000;

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

std::string describe(const Hello& h) {
  return fmt::format("PE {} (pid {} on {})", h.rank, h.pid, h.host);
}

struct Conn {
  std::uint64_t id = 0;
  int fd = -1;
  std::string peer;
  std::string in;
  std::size_t in_off = 0;  // consumed prefix of `in`, erased in batches
  std::string out;
  std::size_t out_off = 0;
  bool greeted = false;
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
};

}  // namespace

struct ConfigStoreServer::Impl {
  explicit Impl(Options o) : opt(std::move(o)) {}

  Options opt;
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
  std::vector<std::uint64_t> runnable;
  std::int32_t job_size = 0;
  std::string job_size_source;
  std::set<std::int32_t> arrived;
  std::set<std::int32_t> departed;
  std::unordered_map<std::int32_t, std::uint64_t> live_pe;
  bool accept_failing = false;

  void open_listener();
  void run();
  void accept_all();
  void read_from(Conn& c);
  void process_frames(Conn& c);
  void handle(Conn& c, std::uint8_t code, std::string_view payload);
  void on_hello(Conn& c, const Hello& h, std::uint16_t version);
  void reply(Conn& c, wire::Writer& w);
  void reply_status(Conn& c, Status s);
  void refuse(Conn& c, const std::string& reason);
  void bad_request(Conn& c, const std::string& why);
  void flush(Conn& c);
  void publish(const std::string& key, std::string value);
  void publish_abort(const std::string& message);
  void wake(const std::string& key);
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
  // A parked connection may keep pipelined frames, but not without bound.
  const std::size_t max_buffered = opt.max_frame + wire::kHeaderSize + (1u << 16);
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
      short events = POLLIN;
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
      if (fds[i].revents & POLLOUT) flush(c);
      if (!c.dead && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) read_from(c);
      if (!c.dead && c.in.size() - c.in_off > max_buffered) {
        bad_request(c, "too many requests queued behind a pending GET");
      }
    }
    if (fds[1].revents != 0) accept_all();
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
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log::warn("config store: accept failed: {}", errno_text(errno));
        accept_failing = true;
      }
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::uint64_t id = next_id++;
    Conn& c = conns[id];
    c.id = id;
    c.fd = fd;
    c.peer = sockaddr_text(ss);
  }
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
  while (!c.dead && !c.parked) {
    std::size_t avail = c.in.size() - c.in_off;
    if (avail < wire::kHeaderSize) break;
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(c.in.data() + c.in_off);
    wire::FrameHeader h;
    try {
      h = wire::parse_header(bytes, opt.max_frame);
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
  if (code < static_cast<std::uint8_t>(Op::kHello) || code > static_cast<std::uint8_t>(Op::kBye)) {
    throw wire::WireError(fmt::format("unknown opcode {}", code));
  }
  Op op = static_cast<Op>(code);
  wire::Reader r(payload);
  if (op != Op::kHello && !c.greeted) {
    refuse(c, "the connection must say hello before any other request");
    return;
  }
  switch (op) {
    case Op::kHello: {
      std::uint16_t version = r.u16();
      std::uint8_t role = r.u8();
      Hello h;
      h.rank = r.i32();
      h.size = r.i32();
      h.pid = r.i32();
      h.host = std::string(r.str());
      r.expect_end();
      if (role < static_cast<std::uint8_t>(PeerRole::kPe) ||
          role > static_cast<std::uint8_t>(PeerRole::kTool)) {
        refuse(c, fmt::format("unknown peer role {}", role));
        return;
      }
      h.role = static_cast<PeerRole>(role);
      on_hello(c, h, version);
      return;
    }
    case Op::kSet: {
      std::string key(r.str());
      std::string value(r.str());
      r.expect_end();
      // The first abort explains the failure; later ones are mostly its consequences.
      if (key != kAbortKey || !kv.contains(key)) publish(key, std::move(value));
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
      publish(key, std::to_string(result));
      wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
      w.i64(result);
      reply(c, w);
      return;
    }
    case Op::kAppend: {
      std::string key(r.str());
      std::string_view value = r.str();
      r.expect_end();
      std::string& slot = kv[key];
      slot.append(value);
      wake(key);
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
      wire::Writer w(static_cast<std::uint8_t>(match ? Status::kOk : Status::kCasFailed));
      w.u8(present ? 1 : 0).str(present ? std::string_view(it->second) : std::string_view());
      if (match) publish(key, std::string(desired));
      reply(c, w);
      return;
    }
    case Op::kRemove: {
      std::string key(r.str());
      r.expect_end();
      reply_status(c, kv.erase(key) > 0 ? Status::kOk : Status::kNotFound);
      return;
    }
    case Op::kStatus: {
      r.expect_end();
      wire::Writer w(static_cast<std::uint8_t>(Status::kOk));
      w.i32(job_size).u32(static_cast<std::uint32_t>(arrived.size()));
      for (auto rank : arrived) w.i32(rank);
      w.u32(static_cast<std::uint32_t>(departed.size()));
      for (auto rank : departed) w.i32(rank);
      reply(c, w);
      return;
    }
    case Op::kBye: {
      r.expect_end();
      if (c.hello.role == PeerRole::kPe && !c.said_bye) {
        c.said_bye = true;
        departed.insert(c.hello.rank);
        if (job_size > 0 && departed.size() == static_cast<std::size_t>(job_size) &&
            !kv.contains(std::string(kFinalizedKey))) {
          publish(std::string(kFinalizedKey), "1");
        }
      }
      reply_status(c, Status::kOk);
      return;
    }
  }
}

void ConfigStoreServer::Impl::on_hello(Conn& c, const Hello& h, std::uint16_t version) {
  if (c.greeted) {
    refuse(c, "this connection already said hello");
    return;
  }
  if (version != wire::kProtocolVersion) {
    refuse(c, fmt::format("protocol version {} is not supported (this config store speaks "
                          "version {}; are two shmoe installations mixed?)",
                          version, wire::kProtocolVersion));
    return;
  }
  if (h.role == PeerRole::kPe) {
    std::string who = describe(h);
    auto refuse_and_abort = [&](const std::string& message) {
      // The refused PE hears first; publishing then lets the PEs that already wait learn why
      // the job cannot start.
      refuse(c, message);
      publish_abort(message);
    };
    if (h.size <= 0) {
      refuse_and_abort(fmt::format("{} says the job has {} PEs", who, h.size));
      return;
    }
    if (job_size > 0 && h.size != job_size) {
      refuse_and_abort(fmt::format("job size mismatch: {} says the job has {} PEs, but {} says {}",
                                   who, h.size, job_size_source, job_size));
      return;
    }
    if (h.rank < 0 || h.rank >= h.size) {
      refuse_and_abort(fmt::format("{} has a rank outside the job of {} PEs (valid: 0..{})", who,
                                   h.size, h.size - 1));
      return;
    }
    if (auto it = live_pe.find(h.rank); it != live_pe.end()) {
      const Conn& other = conns.at(it->second);
      refuse_and_abort(fmt::format(
          "two processes claim PE rank {}: pid {} on {} (connected first) and pid {} on {}", h.rank,
          other.hello.pid, other.hello.host, h.pid, h.host));
      return;
    }
    if (job_size == 0) {
      job_size = h.size;
      job_size_source = fmt::format("the first PE to connect ({})", who);
    }
    arrived.insert(h.rank);
    live_pe[h.rank] = c.id;
  }
  c.greeted = true;
  c.hello = h;
  reply_status(c, Status::kOk);
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

void ConfigStoreServer::Impl::bad_request(Conn& c, const std::string& why) {
  log::warn("config store: closing the connection from {}: malformed request: {}", c.peer, why);
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

void ConfigStoreServer::Impl::publish(const std::string& key, std::string value) {
  kv[key] = std::move(value);
  wake(key);
}

void ConfigStoreServer::Impl::publish_abort(const std::string& message) {
  if (kv.contains(std::string(kAbortKey))) return;
  publish(std::string(kAbortKey), message);
}

void ConfigStoreServer::Impl::wake(const std::string& key) {
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
    if (auto lit = live_pe.find(c.hello.rank); lit != live_pe.end() && lit->second == id) {
      live_pe.erase(lit);
    }
    if (!c.said_bye) {
      publish_abort(c.kill_reason.empty()
                        ? fmt::format("{} disconnected without finalizing: it exited or was killed",
                                      describe(c.hello))
                        : fmt::format("{} {}", describe(c.hello), c.kill_reason));
      if (opt.on_pe_lost) opt.on_pe_lost(c.hello);
    }
  }
}

ConfigStoreServer::ConfigStoreServer(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->opt.job_size < 0) {
    throw make_error("config store: job size {} is negative", impl_->opt.job_size);
  }
  if (impl_->opt.job_size > 0) {
    impl_->job_size = impl_->opt.job_size;
    impl_->job_size_source = "the launcher";
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

void ConfigStoreServer::start() {
  std::lock_guard lock(impl_->lifecycle_mu);
  if (impl_->stopped) throw Error("config store: start() after stop()");
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
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
