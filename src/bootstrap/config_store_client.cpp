#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "bootstrap/config_store.hpp"
#include "bootstrap/store_auth.hpp"
#include "bootstrap/wire.hpp"
#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Op;
using wire::Status;

// Replies carry whole allgather results, so they may be far larger than a request.
constexpr std::size_t kMaxReply = std::size_t{1} << 31;
// How much longer than the server's own deadline a GET may wait for its answer before the
// connection is presumed dead.
constexpr milliseconds kReplySlack{10'000};
// The least time a connection waits for the store's greeting, however short its timeout.
constexpr milliseconds kGreetingWait{1000};
// Longer timeouts mean "forever": adding a start time or slack to them could overflow.
constexpr milliseconds kForever = std::chrono::hours(24 * 365);

std::string errno_text(int err) {
  return std::strerror(err);
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

const char* op_name(Op op) {
  switch (op) {
    case Op::kHello:
      return "HELLO";
    case Op::kSet:
      return "SET";
    case Op::kGet:
      return "GET";
    case Op::kAdd:
      return "ADD";
    case Op::kAppend:
      return "APPEND";
    case Op::kCas:
      return "CAS";
    case Op::kRemove:
      return "REMOVE";
    case Op::kStatus:
      return "STATUS";
    case Op::kBye:
      return "BYE";
    case Op::kWatch:
      return "WATCH";
  }
  return "?";
}

// One connection attempt to every address of `address`, each bounded by `budget`. Returns the
// connected, blocking socket, or -1 with the reason in `error`.
int try_connect(const StoreAddress& address, milliseconds budget, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(address.port);
  int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    error = fmt::format("cannot resolve '{}': {}", address.host, ::gai_strerror(rc));
    return -1;
  }
  int result = -1;
  for (addrinfo* ai = res; ai != nullptr && result < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = errno_text(errno);
      continue;
    }
    // Non-blocking so that a black-holed address cannot hold us past the caller's timeout.
    int c = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    int err = c == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n;
      do {
        n = ::poll(&p, 1, static_cast<int>(budget.count()));
      } while (n < 0 && errno == EINTR);
      if (n == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      error = errno_text(err);
      ::close(fd);
      continue;
    }
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    result = fd;
  }
  ::freeaddrinfo(res);
  return result;
}

struct Reply {
  Status status = Status::kOk;
  std::string payload;
};

}  // namespace

// One connection carries requests from any thread (one at a time, under `mu`) and the events
// the store pushes for watched keys. Whoever holds `mu` reads the socket: a requester until its
// reply comes, queueing the events it meets; otherwise the thread in wait_for_events, which
// gives the socket up as soon as a requester wants it. `wake_fd` tells that thread to look
// again: events were queued, the socket is free, or the connection broke.
struct ConfigStoreClient::Impl {
  std::string where;
  int fd = -1;
  int wake_fd = -1;
  std::atomic<bool> shut{false};

  std::mutex mu;
  // Set once the byte stream can no longer be trusted (a reply that never came may still
  // arrive); every later request fails with this text. Guarded by mu.
  std::string broken;
  milliseconds rcvtimeo{0};  // guarded by mu
  std::atomic<int> waiting_requesters{0};
  std::atomic<bool> serving{false};  // a thread has called wait_for_events

  std::mutex events_mu;
  std::deque<StoreEvent> events;  // guarded by events_mu
  std::string broken_copy;        // `broken`, for the thread in wait_for_events; events_mu

  Impl() : wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_fd < 0) throw make_error("config store client: eventfd failed: {}", errno_text(errno));
  }
  // Here rather than in ~ConfigStoreClient so that a constructor that throws (refused hello)
  // does not leak the socket.
  ~Impl() {
    if (fd >= 0) ::close(fd);
    ::close(wake_fd);
  }

  void notify_event_waiter() {
    if (!serving.load()) return;
    const std::uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd, &one, sizeof(one));
    (void)ignored;
  }

  Error closed_error() const {
    if (shut.load())
      return make_error("the connection to the config store at {} was shut down", where);
    return make_error("config store at {} closed the connection", where);
  }

  // The store ended the connection (it may shed one that has not proved the key yet, in a
  // flood): the constructor then connects again.
  bool closed_by_store = false;
  [[noreturn]] void fail_closed() {
    closed_by_store = !shut.load();
    fail(closed_error());
  }

  [[noreturn]] void fail(Error e) {
    broken = e.what();
    {
      std::lock_guard lock(events_mu);
      broken_copy = broken;
    }
    throw e;
  }

  void set_rcvtimeo(milliseconds t) {
    if (t == rcvtimeo) return;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    rcvtimeo = t;
  }

  void send_all(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n >= 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET || shut.load()) fail_closed();
      fail(make_error("lost the connection to the config store at {}: {}", where,
                      errno_text(errno)));
    }
  }

  void recv_all(char* buf, std::size_t len) {
    while (len > 0) {
      ssize_t n = ::recv(fd, buf, len, 0);
      if (n > 0) {
        buf += n;
        len -= static_cast<std::size_t>(n);
        continue;
      }
      if (n == 0) fail_closed();
      if (errno == EINTR) continue;
      if (shut.load() || errno == ECONNRESET) fail_closed();
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        fail(make_error("config store at {} did not answer within {:.1f} s", where,
                        std::chrono::duration<double>(rcvtimeo).count()));
      }
      fail(make_error("lost the connection to the config store at {}: {}", where,
                      errno_text(errno)));
    }
  }

  // recv_timeout 0: wait as long as it takes.
  Reply request(wire::Writer& w, milliseconds recv_timeout = milliseconds{0}) {
    // Whatever happens, the thread in wait_for_events looks again once this request is done.
    struct NotifyWhenDone {
      Impl* impl;
      ~NotifyWhenDone() { impl->notify_event_waiter(); }
    } notify_when_done{this};
    waiting_requesters.fetch_add(1);
    notify_event_waiter();  // it may hold the socket in poll()
    std::unique_lock lock(mu);
    waiting_requesters.fetch_sub(1);
    if (shut.load()) throw closed_error();
    if (!broken.empty()) throw Error(broken);
    set_rcvtimeo(recv_timeout);
    send_all(w.frame());
    return receive();
  }

  // The frame the server sends unasked when the connection opens.
  Reply greeting(milliseconds timeout) {
    std::lock_guard lock(mu);
    pollfd p{fd, POLLIN, 0};
    int n;
    do {
      n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(timeout.count(), INT_MAX)));
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      fail(
          make_error("the config store at {} accepted the connection but sent no greeting "
                     "within {:.1f} s: it may be out of file descriptors (its log would say so), "
                     "or what listens there is not a config store of this shmoe version",
                     where, std::chrono::duration<double>(timeout).count()));
    }
    set_rcvtimeo(timeout);
    return receive();
  }

  // The next reply frame, queueing the events before it; the caller holds mu.
  Reply receive() {
    while (true) {
      if (std::optional<Reply> r = receive_frame()) return *std::move(r);
    }
  }

  // One frame: a reply, or nullopt for an event (queued). The caller holds mu.
  std::optional<Reply> receive_frame() {
    std::uint8_t header[wire::kHeaderSize];
    recv_all(reinterpret_cast<char*>(header), sizeof(header));
    wire::FrameHeader h;
    try {
      h = wire::parse_header(header, kMaxReply);
    } catch (const wire::WireError& e) {
      fail(
          make_error("config store at {} sent an invalid reply ({}); is something else listening "
                     "on that port?",
                     where, e.what()));
    }
    if (h.code > static_cast<std::uint8_t>(Status::kEvent)) {
      fail(make_error("config store at {} sent an unknown reply status {}", where, h.code));
    }
    Reply r;
    r.status = static_cast<Status>(h.code);
    r.payload.resize(h.length);
    recv_all(r.payload.data(), r.payload.size());
    if (r.status != Status::kEvent) return r;
    StoreEvent event;
    try {
      wire::Reader rd(r.payload);
      event.key = std::string(rd.str());
      event.value = std::string(rd.str());
      rd.expect_end();
    } catch (const wire::WireError& e) {
      fail(make_error("config store at {} pushed a malformed event: {}", where, e.what()));
    }
    {
      std::lock_guard lock(events_mu);
      events.push_back(std::move(event));
    }
    notify_event_waiter();
    return std::nullopt;
  }

  // A reply the operation does not expect: the server's reason when it gave one.
  [[noreturn]] void unexpected(Op op, const Reply& r) {
    if (r.status == Status::kRefused || r.status == Status::kBadRequest) {
      std::string reason = "(no reason given)";
      try {
        wire::Reader rd(r.payload);
        reason = std::string(rd.str());
      } catch (const wire::WireError&) {
      }
      throw make_error("config store at {} {} {}: {}", where,
                       r.status == Status::kRefused ? "refused" : "rejected as malformed",
                       op_name(op), reason);
    }
    throw make_error("config store at {} answered {} with unexpected status {}", where, op_name(op),
                     static_cast<int>(r.status));
  }

  // Runs `parse` over a reply payload, turning a malformed payload into a protocol error.
  template <typename F>
  auto parse(Op op, const Reply& r, F&& f) {
    try {
      wire::Reader rd(r.payload);
      auto v = f(rd);
      rd.expect_end();
      return v;
    } catch (const wire::WireError& e) {
      std::lock_guard lock(mu);
      fail(make_error("config store at {} sent a malformed {} reply: {}", where, op_name(op),
                      e.what()));
    }
  }

  void expect_ok(Op op, const Reply& r) {
    if (r.status != Status::kOk) unexpected(op, r);
    parse(op, r, [](wire::Reader&) { return 0; });
  }
};

ConfigStoreClient::ConfigStoreClient(const StoreAddress& address, const Hello& hello,
                                     milliseconds connect_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->where = address.str();
  const JobKey key =
      hello.job_key.empty() ? JobKey::from_environment().value_or(JobKey{}) : hello.job_key;
  if (key.empty()) {
    throw make_error(
        "cannot join the config store at {}: this process has no job key ({} is not set); the "
        "store admits only processes that prove the job's key",
        impl_->where, kJobKeyVariable);
  }
  connect_timeout = std::clamp(connect_timeout, milliseconds{0}, kForever);
  auto start = Clock::now();
  auto deadline = start + connect_timeout;
  milliseconds pause{20};
  std::string error;
  std::string mac;
  Reply r;
  while (true) {
    auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
    // Even a zero timeout gets one real attempt.
    impl_->fd = try_connect(address, std::max(left, milliseconds{10}), error);
    if (impl_->fd < 0) {
      auto now = Clock::now();
      if (now >= deadline) {
        throw make_error("cannot reach the config store at {} after {:.1f} s: {}", impl_->where,
                         seconds(now - start), error);
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, milliseconds{100});
      continue;
    }
    try {
      // A store greets at once when it accepts; one that cannot accept (out of descriptors)
      // leaves the connection in its backlog, unanswered.
      const std::string server_nonce = read_challenge(std::max(connect_timeout, kGreetingWait));
      wire::Writer w(static_cast<std::uint8_t>(Op::kHello));
      w.u16(wire::kProtocolVersion)
          .u8(static_cast<std::uint8_t>(hello.role))
          .i32(hello.rank)
          .i32(hello.size)
          .i32(hello.pid)
          .str(hello.host)
          .str(key.job_id())
          .str(auth::random_bytes(auth::kNonceBytes));
      mac =
          auth::hello_mac(key, server_nonce, std::string_view(w.frame()).substr(wire::kHeaderSize));
      w.str(mac);
      r = impl_->request(w, connect_timeout + kReplySlack);
      break;
    } catch (const Error&) {
      // Closed by the store before the hello was answered (shed in a flood of strangers'
      // connections): connect again while there is time.
      if (!impl_->closed_by_store || Clock::now() >= deadline) throw;
      impl_ = std::make_unique<Impl>();
      impl_->where = address.str();
      std::this_thread::sleep_for(pause);
    }
  }
  if (r.status == Status::kRefused) {
    std::string reason = "(no reason given)";
    try {
      wire::Reader rd(r.payload);
      reason = std::string(rd.str());
    } catch (const wire::WireError&) {
    }
    throw make_error("the config store at {} refused this process: {}", impl_->where, reason);
  }
  if (r.status != Status::kOk) impl_->unexpected(Op::kHello, r);
  const std::string proof =
      impl_->parse(Op::kHello, r, [](wire::Reader& rd) { return std::string(rd.str()); });
  if (!auth::macs_equal(proof, auth::store_proof(key, mac))) {
    throw make_error(
        "the config store at {} does not know the key of job {}: another job's store, or "
        "something else, listens there",
        impl_->where, key.job_id());
  }
}

std::string ConfigStoreClient::read_challenge(milliseconds timeout) {
  Reply r = impl_->greeting(timeout);
  if (r.status != Status::kChallenge) {
    throw make_error(
        "config store at {} opened with status {} instead of a challenge (is it an older shmoe "
        "without job keys?)",
        impl_->where, static_cast<int>(r.status));
  }
  return impl_->parse(Op::kHello, r, [this](wire::Reader& rd) {
    const std::uint16_t version = rd.u16();
    if (version != wire::kProtocolVersion) {
      throw make_error(
          "the config store at {} speaks protocol version {}, this process version {} (are two "
          "shmoe installations mixed?)",
          impl_->where, version, wire::kProtocolVersion);
    }
    std::string nonce(rd.str());
    if (nonce.size() != auth::kNonceBytes) {
      throw make_error("the config store at {} sent a challenge of {} bytes, not {}", impl_->where,
                       nonce.size(), auth::kNonceBytes);
    }
    return nonce;
  });
}

ConfigStoreClient::~ConfigStoreClient() = default;

void ConfigStoreClient::set(std::string_view key, std::string_view value) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kSet));
  w.str(key).str(value);
  impl_->expect_ok(Op::kSet, impl_->request(w));
}

std::optional<std::string> ConfigStoreClient::get(std::string_view key, milliseconds timeout) {
  bool forever = timeout.count() < 0 || timeout >= kForever;
  wire::Writer w(static_cast<std::uint8_t>(Op::kGet));
  w.str(key).i64(forever ? -1 : timeout.count());
  Reply r = impl_->request(w, forever ? milliseconds{0} : timeout + kReplySlack);
  if (r.status == Status::kTimeout) {
    impl_->parse(Op::kGet, r, [](wire::Reader&) { return 0; });
    return std::nullopt;
  }
  if (r.status != Status::kOk) impl_->unexpected(Op::kGet, r);
  return impl_->parse(Op::kGet, r, [](wire::Reader& rd) { return std::string(rd.str()); });
}

std::int64_t ConfigStoreClient::add(std::string_view key, std::int64_t delta) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kAdd));
  w.str(key).i64(delta);
  Reply r = impl_->request(w);
  if (r.status != Status::kOk) impl_->unexpected(Op::kAdd, r);
  return impl_->parse(Op::kAdd, r, [](wire::Reader& rd) { return rd.i64(); });
}

void ConfigStoreClient::append(std::string_view key, std::string_view value) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kAppend));
  w.str(key).str(value);
  impl_->expect_ok(Op::kAppend, impl_->request(w));
}

bool ConfigStoreClient::compare_and_swap(std::string_view key,
                                         std::optional<std::string_view> expected,
                                         std::string_view desired,
                                         std::optional<std::string>* current) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kCas));
  w.str(key).u8(expected ? 1 : 0).str(expected.value_or("")).str(desired);
  Reply r = impl_->request(w);
  if (r.status != Status::kOk && r.status != Status::kCasFailed) impl_->unexpected(Op::kCas, r);
  auto found = impl_->parse(Op::kCas, r, [](wire::Reader& rd) {
    bool present = rd.u8() != 0;
    std::string value(rd.str());
    return present ? std::optional<std::string>(std::move(value)) : std::nullopt;
  });
  if (current != nullptr) *current = std::move(found);
  return r.status == Status::kOk;
}

bool ConfigStoreClient::remove(std::string_view key) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kRemove));
  w.str(key);
  Reply r = impl_->request(w);
  if (r.status == Status::kNotFound) {
    impl_->parse(Op::kRemove, r, [](wire::Reader&) { return 0; });
    return false;
  }
  impl_->expect_ok(Op::kRemove, r);
  return true;
}

JobStatus ConfigStoreClient::job_status() {
  wire::Writer w(static_cast<std::uint8_t>(Op::kStatus));
  Reply r = impl_->request(w);
  if (r.status != Status::kOk) impl_->unexpected(Op::kStatus, r);
  return impl_->parse(Op::kStatus, r, [](wire::Reader& rd) {
    JobStatus s;
    s.size = rd.i32();
    // No reserve(n): n comes from the peer, and the Reader bounds the loop by the payload.
    auto read_ranks = [&rd](std::vector<std::int32_t>& out) {
      std::uint32_t n = rd.u32();
      for (std::uint32_t i = 0; i < n; ++i) out.push_back(rd.i32());
    };
    read_ranks(s.arrived);
    read_ranks(s.departed);
    s.store_trouble = std::string(rd.str());
    return s;
  });
}

void ConfigStoreClient::bye() {
  wire::Writer w(static_cast<std::uint8_t>(Op::kBye));
  impl_->expect_ok(Op::kBye, impl_->request(w));
}

void ConfigStoreClient::watch(std::string_view key) {
  wire::Writer w(static_cast<std::uint8_t>(Op::kWatch));
  w.str(key);
  impl_->expect_ok(Op::kWatch, impl_->request(w));
}

StoreEvents ConfigStoreClient::wait_for_events(int other_fd, milliseconds timeout) {
  Impl& im = *impl_;
  im.serving.store(true);
  const bool forever = timeout.count() < 0 || timeout >= kForever;
  const auto deadline = Clock::now() + (forever ? milliseconds{0} : timeout);
  StoreEvents result;
  while (true) {
    // Drained before looking, so that a notification after the look is not lost.
    std::uint64_t count = 0;
    while (::read(im.wake_fd, &count, sizeof(count)) > 0) {
    }
    {
      std::lock_guard lock(im.events_mu);
      if (!im.broken_copy.empty()) throw Error(im.broken_copy);
      result.events.assign(std::make_move_iterator(im.events.begin()),
                           std::make_move_iterator(im.events.end()));
      im.events.clear();
    }
    if (!result.events.empty() || result.other_ready) return result;
    if (im.shut.load()) throw im.closed_error();
    // The socket, when no request is in flight or waiting (a waiting one notifies wake_fd).
    std::unique_lock io(im.mu, std::defer_lock);
    if (im.waiting_requesters.load() == 0 && io.try_lock() && im.waiting_requesters.load() > 0) {
      io.unlock();
    }
    pollfd fds[3] = {{im.wake_fd, POLLIN, 0}, {other_fd, POLLIN, 0}, {-1, POLLIN, 0}};
    if (io.owns_lock()) fds[2].fd = im.fd;
    int wait_ms = -1;
    if (!forever) {
      auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      wait_ms = static_cast<int>(std::clamp<std::int64_t>(left, 0, INT_MAX));
    }
    int n = ::poll(fds, 3, wait_ms);
    if (n < 0 && errno != EINTR) {
      throw make_error("config store client: poll failed: {}", errno_text(errno));
    }
    if (n > 0 && fds[2].revents != 0) {
      im.set_rcvtimeo(milliseconds{0});
      if (im.receive_frame()) {
        im.fail(make_error("config store at {} sent a reply to no request", im.where));
      }
    }
    if (io.owns_lock()) io.unlock();
    if (n > 0 && fds[1].revents != 0) result.other_ready = true;
    if (n == 0) return result;  // timed out, with nothing
  }
}

void ConfigStoreClient::shutdown() {
  impl_->shut.store(true);
  ::shutdown(impl_->fd, SHUT_RDWR);
  impl_->notify_event_waiter();
}

}  // namespace shmoe::bootstrap
