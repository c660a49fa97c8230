// The config store server's insides, shared by its units: the connection state, the limits, and
// the server object whose members are defined in config_store_server.cpp (lifecycle, the event
// loop, connection I/O and the key-value state), config_store_admission.cpp (accepting, the
// challenge and hello, refusals, the bound on unproven connections) and
// config_store_requests.cpp (one handler per message kind).
#pragma once

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
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"

namespace shmoe::bootstrap {
// The units' shared pieces, kept out of the rest of the bootstrap layer.
namespace store_server {

using Clock = std::chrono::steady_clock;
using wire::Op;
using wire::Status;

inline constexpr std::int64_t kForeverMs = std::int64_t{365} * 24 * 3600 * 1000;
// Before a connection has proved the job key it may send one small frame (its hello) and must do
// so promptly: a stranger can hold neither much memory nor a descriptor for long.
inline constexpr std::size_t kHelloFrameLimit = 16u << 10;
inline constexpr auto kHelloDeadline = std::chrono::seconds(15);
// Room in a frame beyond its value: the opcode's other fields and the key.
inline constexpr std::size_t kFrameOverhead = 64u << 10;
// Counted per entry on top of its key and value: the hash node and the strings' own size.
inline constexpr std::size_t kEntryOverhead = 64;
// A connection whose replies pile up unread is not served (nor read) until they drain.
inline constexpr std::size_t kOutBacklogLimit = 1u << 20;
// While the job is still starting, a store that cannot accept connections for this long gives
// up and says why, rather than leaving the PEs to wait for SHMOE_INIT_TIMEOUT.
inline constexpr auto kAcceptGiveUp = std::chrono::seconds(5);
// A PE watches two keys (abort, hang); watches are not counted in the store's size, so a
// connection may hold only a few.
inline constexpr std::size_t kMaxWatchesPerConnection = 16;
// Refused strangers are logged, but only the first few: a flood must not flood the log too.
inline constexpr int kLoggedRefusals = 10;

inline std::string errno_text(int err) {
  return std::strerror(err);
}

inline std::string sockaddr_text(const sockaddr_storage& ss) {
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
inline std::string printable(std::string_view text) {
  std::string out;
  for (char ch : text.substr(0, 64)) out.push_back(ch >= ' ' && ch < 0x7f ? ch : '?');
  if (text.size() > 64) out += "...";
  return out;
}

// Who an unproven hello claims to be.
inline std::string describe_claim(const Hello& h) {
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

inline std::size_t entry_bytes(std::size_t key_size, std::size_t value_size) {
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

}  // namespace store_server
using namespace store_server;

struct ConfigStoreServer::Impl {
  explicit Impl(Options o)
      : opt(std::move(o)),
        job_id(opt.job_key.job_id()),
        max_frame(opt.limits.max_value + kFrameOverhead),
        job(opt.job_size, opt.pe_loss == settings::PeLoss::kContinue) {}

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
  // Unproven connections shed in floods (logged at 1, 10, 100, ...).
  std::uint64_t flood_shed = 0;
  std::uint64_t flood_next_log = 0;
  // Since when accept() has failed for lack of descriptors; what the server says about it.
  std::optional<Clock::time_point> accept_failing_since;
  bool accept_trouble_logged = false;
  std::string store_trouble;

  void open_listener();
  void run();
  void accept_all();
  void welcome(int fd, const sockaddr_storage& ss);
  void on_accept_failure(int err);
  std::size_t unproven_limit() const;
  void shed_unproven_for(const std::string& source);
  bool shed_oldest_unproven();
  void note_flood(std::size_t open, std::size_t from_source, const std::string& source);
  std::string descriptor_shortage(int err) const;
  void read_from(Conn& c);
  void process_frames(Conn& c);
  void handle(Conn& c, std::uint8_t code, std::string_view payload);
  // One handler per message kind of a proven connection (config_store_requests.cpp).
  void on_second_hello(Conn& c, wire::Reader& r);
  void on_set(Conn& c, wire::Reader& r);
  void on_get(Conn& c, wire::Reader& r);
  void on_add(Conn& c, wire::Reader& r);
  void on_append(Conn& c, wire::Reader& r);
  void on_cas(Conn& c, wire::Reader& r);
  void on_remove(Conn& c, wire::Reader& r);
  void on_status(Conn& c, wire::Reader& r);
  void on_bye(Conn& c, wire::Reader& r);
  void on_watch(Conn& c, wire::Reader& r);
  void on_hello(Conn& c, wire::Reader& r, std::string_view payload);
  void admit_pe(Conn& c, const Hello& h, const std::string& proof);
  void greet(Conn& c, const Hello& h, const std::string& proof);
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
  void on_pe_closed(const Conn& c);
  bool may_write(Conn& c, std::string_view op, const std::string& key);
};

}  // namespace shmoe::bootstrap
