// The config store: the TCP key-value service that bootstraps a job. The launcher (or PE 0 when
// the job was started by mpirun/srun) runs a ConfigStoreServer; every PE connects a
// ConfigStoreClient, says hello (rank, size, host, pid), exchanges its segment and endpoint
// information, and uses it for start-up barriers.
//
// Only the job's own processes get in: every connection starts with a challenge-response over
// the job key (store_auth.hpp), checked before the server reads or changes anything else. A
// hello that fails it (another job, a wrong or replayed proof, a malformed frame) is refused and
// its connection closed, and the job goes on as if it had never come.
//
// Besides plain key-value service, the server watches the job:
//  * a second hello for a rank that is already connected, or a hello with a different job size,
//    from a process that proved the job key, is refused, and the server publishes kAbortKey with
//    a message naming both parties;
//  * a PE connection that closes without BYE means the PE died: kAbortKey names it; or, under
//    SHMOE_PE_LOSS=continue, the PE is lost and the job goes on: kLostKey lists the lost ranks,
//    and the n-th loss also sets lost_event_key(n) to the list, which PEs watch one after the
//    other (a watch fires once, and a key that changes would fire at once again);
//  * once every rank of the job said BYE (or was lost), kFinalizedKey is set.
// Keys under kLostKey are the server's alone: a client's write to one is refused, so no process
// can make the others believe a PE was lost.
// Each PE watches kAbortKey and has it pushed (kWatch) on its one connection, so every PE stops
// with the same message, even while it sits in a wait that does not involve the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/job_key.hpp"
#include "common/settings.hpp"

namespace shmoe::bootstrap {

inline constexpr std::string_view kAbortKey = "shmoe/abort";
inline constexpr std::string_view kFinalizedKey = "shmoe/finalized";
// SHMOE_PE_LOSS=continue: the lost ranks, a comma list in the order they were lost ("2,5").
inline constexpr std::string_view kLostKey = "shmoe/lost";
// The key set at the n-th loss (n from 1), to the list as it was then.
std::string lost_event_key(std::size_t n);
// Whether `key` is kLostKey or one of its event keys, which only the server writes.
bool is_server_only_key(std::string_view key);

struct StoreAddress {
  std::string host;
  std::uint16_t port = 0;

  // "HOST:PORT" (HOST may be a name, an IPv4 address, or [IPv6]). Throws shmoe::Error naming
  // `what` on bad input.
  static StoreAddress parse(std::string_view text, std::string_view what = "store address");
  std::string str() const;
};

enum class PeerRole : std::uint8_t { kPe = 1, kMonitor = 2, kTool = 3 };

struct Hello {
  PeerRole role = PeerRole::kTool;
  std::int32_t rank = -1;  // -1 for tools
  std::int32_t size = 0;   // 0 for tools
  std::int32_t pid = 0;
  std::string host;
  // The job's key, which the hello proves without sending it. Empty: SHMOE_JOB_KEY from this
  // process's environment (what shmoerun's own tools and its PEs' helpers find there).
  JobKey job_key;
};

// A watched key's value, pushed by the store once it has one.
struct StoreEvent {
  std::string key;
  std::string value;
};

struct StoreEvents {
  std::vector<StoreEvent> events;  // in the order the store pushed them
  bool other_ready = false;        // wait_for_events' other_fd is readable
};

// What the server knows about the ranks of the job, for "who is missing" messages.
struct JobStatus {
  std::int32_t size = 0;               // 0 until the first PE said hello
  std::vector<std::int32_t> arrived;   // ranks that said hello (PE role), ascending
  std::vector<std::int32_t> departed;  // ranks that said BYE, ascending
  // Why the server may be missing PEs that tried to come (e.g. it is out of file descriptors);
  // empty when it knows of no such trouble.
  std::string store_trouble;
};

// How much the store holds. A request that would go past a limit is refused with a message
// naming the size and the limit, and its connection is dropped (a PE's drop ends the job with
// that message; a tool's leaves the job running). Values exchanged by real jobs are far smaller:
// an allgather of UCX worker addresses and keys takes a few KiB per PE, and a store
// collective's keys are removed once every PE is past them.
struct StoreLimits {
  static constexpr std::size_t kDefaultMaxValue = std::size_t{64} << 20;
  static constexpr std::size_t kDefaultMaxTotal = std::size_t{256} << 20;
  std::size_t max_value = kDefaultMaxValue;  // one key or value, in bytes
  std::size_t max_total = kDefaultMaxTotal;  // all keys and values written by clients
  // SHMOE_STORE_MAX_VALUE and SHMOE_STORE_MAX_TOTAL (sizes such as 64M), where set, replace the
  // defaults; throws shmoe::Error naming the variable on a bad value.
  static StoreLimits from_environment();
};

// What the store holds now (for tests and fuzzers; readable from any thread).
struct StoreUsage {
  std::size_t stored_bytes = 0;  // keys and values, with a fixed allowance per entry
  std::size_t keys = 0;
};

class ConfigStoreServer {
 public:
  struct Options {
    std::string bind_host = "127.0.0.1";
    std::uint16_t port = 0;     // 0: pick a free port
    std::int32_t job_size = 0;  // 0: learn it from the first PE hello
    JobKey job_key;             // required: only processes that prove it get in
    StoreLimits limits = StoreLimits::from_environment();
    // What a PE's connection closing without BYE does: end the job (abort) or mark the PE lost
    // and go on (continue). Throws shmoe::Error naming SHMOE_PE_LOSS on a bad value.
    settings::PeLoss pe_loss = settings::pe_loss();
    // Called on the service thread for a PE that disconnected without BYE, after the abort (or
    // the loss) is published: the owner cleans up what the dead PE could not (its shared-memory
    // name).
    std::function<void(const Hello&)> on_pe_lost;
  };

  explicit ConfigStoreServer(Options options);
  ~ConfigStoreServer();  // stops the service thread
  ConfigStoreServer(const ConfigStoreServer&) = delete;
  ConfigStoreServer& operator=(const ConfigStoreServer&) = delete;

  // The port actually bound (after construction the socket is listening).
  std::uint16_t port() const;
  StoreUsage usage() const;
  // Serves on a background thread until stop() or destruction.
  void start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ConfigStoreClient {
 public:
  // Connects, retrying until `connect_timeout` (the store may start after the client), then says
  // hello, proving hello.job_key, and checks that the store knows the key too. Throws
  // shmoe::Error: unreachable address (naming it and the time waited), no key, refused hello
  // (the server's reason), a store that does not know the key, protocol mismatch.
  ConfigStoreClient(const StoreAddress& address, const Hello& hello,
                    std::chrono::milliseconds connect_timeout);
  ~ConfigStoreClient();
  ConfigStoreClient(const ConfigStoreClient&) = delete;
  ConfigStoreClient& operator=(const ConfigStoreClient&) = delete;

  // Requests may come from several threads; they go one at a time, so a get() that waits holds
  // back the others on this client.
  void set(std::string_view key, std::string_view value);
  // Blocks until the key exists or `timeout` passes (negative: forever). nullopt on timeout.
  std::optional<std::string> get(std::string_view key, std::chrono::milliseconds timeout);
  // Adds to a signed 64-bit counter (absent = 0) and returns the new value.
  std::int64_t add(std::string_view key, std::int64_t delta);
  void append(std::string_view key, std::string_view value);
  // Sets key to `desired` if its value is `expected` (nullopt: if absent). Returns whether it
  // swapped; `current` receives the value found (nullopt if absent).
  bool compare_and_swap(std::string_view key, std::optional<std::string_view> expected,
                        std::string_view desired, std::optional<std::string>* current = nullptr);
  bool remove(std::string_view key);  // false if absent
  JobStatus job_status();
  // Declares a clean departure: closing after this is not a death.
  void bye();
  // Asks the store to push `key` once it has a value (at once if it has one): one event per
  // call, received by wait_for_events.
  void watch(std::string_view key);
  // Waits until the store has pushed events, `other_fd` (-1: none) is readable, or `timeout`
  // passes (negative: forever); whichever came, possibly none on a timeout. Meant for one
  // thread, while others make requests on the same connection: they take precedence, and
  // the events they come across on the way to their replies are kept for this one. Throws
  // shmoe::Error once the connection is lost or shut down.
  StoreEvents wait_for_events(int other_fd, std::chrono::milliseconds timeout);
  // Unblocks a thread that sits in get() or wait_for_events() on this client; further calls
  // throw.
  void shutdown();

 private:
  // The server's nonce from the challenge it opens every connection with.
  std::string read_challenge(std::chrono::milliseconds timeout);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Barrier and allgather over the store. Every PE of the job must call them in the same order.
// Rounds are numbered so keys of different rounds never collide. Once a barrier completes, every
// PE has finished the rounds before it, so PE 0 then removes their keys: the store holds the
// last rounds only, however many collectives a job runs.
class StoreCollectives {
 public:
  // `generation`: which initialization of the library in the PE's process this is (OpenSHMEM 1.6
  // re-initializes after the last finalize). Every PE counts the same, and a store that outlives
  // one (the launcher's) must not answer the next one's collectives with the last one's keys.
  StoreCollectives(ConfigStoreClient& client, std::int32_t rank, std::int32_t size,
                   std::uint64_t generation = 0);
  // Throws shmoe::Error after `timeout`, listing the ranks that never arrived.
  void barrier(std::string_view name, std::chrono::milliseconds timeout);
  std::vector<std::string> allgather(std::string_view name, std::string_view mine,
                                     std::chrono::milliseconds timeout);

 private:
  ConfigStoreClient& client_;
  std::int32_t rank_;
  std::int32_t size_;
  std::uint64_t generation_;
  std::uint64_t round_ = 0;
  // Keys of rounds this PE has finished: removed (by PE 0) once the next barrier completes.
  std::vector<std::string> finished_keys_;
};

}  // namespace shmoe::bootstrap
