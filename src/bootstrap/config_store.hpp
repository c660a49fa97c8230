// The config store: the TCP key-value service that bootstraps a job. The launcher (or PE 0 when
// the job was started by mpirun/srun) runs a ConfigStoreServer; every PE connects a
// ConfigStoreClient, says hello (rank, size, host, pid), exchanges its segment and endpoint
// information, and uses it for start-up barriers.
//
// Besides plain key-value service, the server watches the job:
//  * a second hello for a rank that is already connected, or a hello with a different job size,
//    is refused, and the server publishes kAbortKey with a message naming both parties;
//  * a PE connection that closes without BYE means the PE died: kAbortKey names it;
//  * once every rank of the job said BYE, kFinalizedKey is set.
// Each PE watches kAbortKey on a second ("monitor") connection, so every PE stops with the same
// message, even while it sits in a wait that does not involve the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shmoe::bootstrap {

inline constexpr std::string_view kAbortKey = "shmoe/abort";
inline constexpr std::string_view kFinalizedKey = "shmoe/finalized";

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
};

// What the server knows about the ranks of the job, for "who is missing" messages.
struct JobStatus {
  std::int32_t size = 0;               // 0 until the first PE said hello
  std::vector<std::int32_t> arrived;   // ranks that said hello (PE role), ascending
  std::vector<std::int32_t> departed;  // ranks that said BYE, ascending
};

class ConfigStoreServer {
 public:
  struct Options {
    std::string bind_host = "127.0.0.1";
    std::uint16_t port = 0;     // 0: pick a free port
    std::int32_t job_size = 0;  // 0: learn it from the first PE hello
    std::size_t max_frame = 64u << 20;
    // Called on the service thread for a PE that disconnected without BYE, after the abort is
    // published: the owner cleans up what the dead PE could not (its shared-memory name).
    std::function<void(const Hello&)> on_pe_lost;
  };

  explicit ConfigStoreServer(Options options);
  ~ConfigStoreServer();  // stops the service thread
  ConfigStoreServer(const ConfigStoreServer&) = delete;
  ConfigStoreServer& operator=(const ConfigStoreServer&) = delete;

  // The port actually bound (after construction the socket is listening).
  std::uint16_t port() const;
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
  // hello. Throws shmoe::Error: unreachable address (naming it and the time waited), refused
  // hello (the server's reason), protocol mismatch.
  ConfigStoreClient(const StoreAddress& address, const Hello& hello,
                    std::chrono::milliseconds connect_timeout);
  ~ConfigStoreClient();
  ConfigStoreClient(const ConfigStoreClient&) = delete;
  ConfigStoreClient& operator=(const ConfigStoreClient&) = delete;

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
  // Unblocks a thread that sits in get() on this client (used at finalize); further calls throw.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Barrier and allgather over the store. Every PE of the job must call them in the same order.
// Rounds are numbered so keys of different rounds never collide.
class StoreCollectives {
 public:
  StoreCollectives(ConfigStoreClient& client, std::int32_t rank, std::int32_t size);
  // Throws shmoe::Error after `timeout`, listing the ranks that never arrived.
  void barrier(std::string_view name, std::chrono::milliseconds timeout);
  std::vector<std::string> allgather(std::string_view name, std::string_view mine,
                                     std::chrono::milliseconds timeout);

 private:
  ConfigStoreClient& client_;
  std::int32_t rank_;
  std::int32_t size_;
  std::uint64_t round_ = 0;
};

}  // namespace shmoe::bootstrap
