// Who gets into the config store: accepting connections (and what to say when descriptors run
// out), the challenge, the hello that proves the job key, and refusals of strangers.
#include <algorithm>

#include "bootstrap/config_store_server_impl.hpp"

namespace shmoe::bootstrap {

namespace {

// The host part of a peer's "host:port" (or "[v6]:port"): connections are bounded per source.
std::string source_of(const std::string& peer) {
  const auto colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

}  // namespace

// How many connections that have not proved the job key the store holds at once: an eighth of
// its descriptor limit, between 16 and 256 (a PE proves the key within milliseconds of its
// connect, so this bounds strangers, not a job's start); one source may hold half of them.
std::size_t ConfigStoreServer::Impl::unproven_limit() const {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  const auto eighth =
      static_cast<std::size_t>(rl.rlim_cur == RLIM_INFINITY ? 4096 : rl.rlim_cur) / 8;
  return std::clamp<std::size_t>(eighth, 16, 256);
}

// Out of descriptors with a connection waiting: the oldest connection that has not proved the
// key gives its descriptor up (false when every connection has proved it: the table is then the
// job's own, and the store says so, see on_accept_failure).
bool ConfigStoreServer::Impl::shed_oldest_unproven() {
  const Conn* oldest = nullptr;
  for (const auto& [id, c] : conns) {
    if (!c.greeted && !c.dead && (oldest == nullptr || c.id < oldest->id)) oldest = &c;
  }
  if (oldest == nullptr) return false;
  note_flood(conns.size(), 0, source_of(oldest->peer));
  close_conn(oldest->id);
  return true;
}

// Said once per flood, naming it as one: at the first connection shed, then at 10, 100, ...
void ConfigStoreServer::Impl::note_flood(std::size_t open, std::size_t from_source,
                                         const std::string& source) {
  if (flood_shed++ != 0 && flood_shed != flood_next_log) return;
  flood_next_log = flood_shed * 10;
  log::warn(
      "config store: a flood of connections that do not prove the job key ({} open, {} from {}; "
      "{} closed so far): the oldest are closed, so the job's own processes still get in; at "
      "most {} such connections are held, {} per source",
      open, from_source, printable(source), flood_shed, unproven_limit(), unproven_limit() / 2);
}

// Makes room for one more unproven connection from `source`: while the bound in total or for the
// source is reached, the oldest unproven connection (of that source, for the latter) is closed.
// A flood is so shed instead of filling the descriptor table, and a PE that connects now is the
// newest, answered at once, and proves the key long before it could be shed.
void ConfigStoreServer::Impl::shed_unproven_for(const std::string& source) {
  const std::size_t limit = unproven_limit(), per_source = limit / 2;
  while (true) {
    std::size_t total = 0, mine = 0;
    const Conn* oldest = nullptr;
    const Conn* oldest_mine = nullptr;
    for (const auto& [id, c] : conns) {
      if (c.greeted || c.dead) continue;
      ++total;
      const bool same = source_of(c.peer) == source;
      mine += same ? 1 : 0;
      if (oldest == nullptr || c.id < oldest->id) oldest = &c;
      if (same && (oldest_mine == nullptr || c.id < oldest_mine->id)) oldest_mine = &c;
    }
    const Conn* victim = mine >= per_source ? oldest_mine : total >= limit ? oldest : nullptr;
    if (victim == nullptr) return;
    note_flood(total, mine, source);
    close_conn(victim->id);
  }
}

void ConfigStoreServer::Impl::accept_all() {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd =
        ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && shed_oldest_unproven()) {
      continue;  // a descriptor is free again: take the waiting connection
    }
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
  std::string peer = sockaddr_text(ss);
  shed_unproven_for(source_of(peer));
  std::uint64_t id = next_id++;
  Conn& c = conns[id];
  c.id = id;
  c.fd = fd;
  c.peer = std::move(peer);
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
  greet(c, h, proof);
}

// The connection is the job's from now on: it gets the store's own proof of the key.
void ConfigStoreServer::Impl::greet(Conn& c, const Hello& h, const std::string& proof) {
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
  greet(c, h, proof);
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

}  // namespace shmoe::bootstrap
