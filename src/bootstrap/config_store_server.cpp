// The config store server: its lifecycle, the event loop, connection I/O and the key-value state
// with its waiters and watchers. Admission and the request handlers are units of their own.
#include "bootstrap/config_store_server_impl.hpp"

namespace shmoe::bootstrap {

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

void ConfigStoreServer::Impl::reply(Conn& c, wire::Writer& w) {
  if (c.dead) return;
  c.out.append(w.frame());
  flush(c);
}

void ConfigStoreServer::Impl::reply_status(Conn& c, Status s) {
  wire::Writer w(static_cast<std::uint8_t>(s));
  reply(c, w);
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
  if (c.greeted && c.hello.role == PeerRole::kPe) on_pe_closed(c);
}

// A PE's connection closed: what that means for the job (JobLiveness) is published here.
void ConfigStoreServer::Impl::on_pe_closed(const Conn& c) {
  const JobLiveness::Closing what = job.closed(c.hello, c.id, c.said_bye, c.kill_reason);
  if (what.abort) publish_abort(*what.abort);
  if (what.lost) {
    log::warn("config store: {}; SHMOE_PE_LOSS=continue: the job goes on without it", *what.lost);
    const std::string list = job.lost_list();
    publish(std::string(kLostKey), list);
    publish(lost_event_key(job.lost_count()), list);
  }
  if (what.finalized && !kv.contains(std::string(kFinalizedKey))) {
    publish(std::string(kFinalizedKey), "1");
  }
  if ((what.abort || what.lost) && opt.on_pe_lost) opt.on_pe_lost(c.hello);
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
