// The state of one PE between shmem_init and shmem_finalize, and the checks every API call makes
// on its arguments. The API files (api_*.cpp) are thin: they translate the C calls into calls on
// this and on the transport.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "bootstrap/launch_env.hpp"
#include "common/log.hpp"
#include "heap/allocator.hpp"
#include "heap/program_data.hpp"
#include "heap/shm_admission.hpp"
#include "heap/symmetric_heap.hpp"
#include "shmem.h"
#include "shmem/barrier.hpp"
#include "shmem/hang_watch.hpp"
#include "shmem/live_contexts.hpp"
#include "shmem/pe_service.hpp"
#include "transport/selection.hpp"
#include "transport/transport.hpp"
#include "transport/ucx_options.hpp"

// The object behind shmem_ctx_t: its options, and its channel in the PE's transport (its own
// UCX endpoints, so its quiet waits for its own operations only); nullptr for the default one.
struct shmoe_ctx {
  long options = 0;
  std::unique_ptr<shmoe::transport::Channel> channel;
  struct shmoe_team* team = nullptr;  // the team it was created on; nullptr: SHMEM_TEAM_WORLD
  // PE numbers given to this context are team numbers: world PE = start + pe * stride.
  int pe_start = 0;
  int pe_stride = 1;
  int pe_count = -1;  // -1: the world's numbering
};

namespace shmoe {

class TeamRegistry;

// How PEs reach each other (SHMOE_TRANSPORT): see transport/selection.hpp.
using TransportMode = transport::Mode;

struct RuntimeConfig {
  std::size_t heap_size = 0;  // what the user asked for, plus the runtime's own symmetric state
  heap::HeapRequest heap_request;  // what the user asked for, and where
  std::chrono::milliseconds init_timeout{60'000};
  bool debug_allocations = false;
  std::string host;         // SHMOE_HOST_ID, or the hostname: PEs of one host share memory
  std::string system_host;  // the hostname, whatever SHMOE_HOST_ID says: PEs that share cores
  TransportMode transport = TransportMode::kAuto;
  transport::UcxOptions ucx;
};

RuntimeConfig read_runtime_config();

class Runtime {
 public:
  Runtime(const bootstrap::LaunchInfo& launch, const RuntimeConfig& config, int thread_level);
  ~Runtime();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int thread_level() const { return thread_level_; }
  const RuntimeConfig& config() const { return config_; }
  transport::Transport& transport() { return *transport_; }
  // The PEs whose segments this PE maps (its host's PEs, or itself alone under
  // SHMOE_TRANSPORT=ucx), ascending; SHMEM_TEAM_SHARED is made of them.
  const std::vector<int>& shared_memory_pes() const { return shared_memory_pes_; }
  // This PE's window (ShmTransport): the heap, then the symmetric program data, so
  // heap_base() + offset_of(addr) reaches any symmetric object of this PE.
  std::byte* heap_base() const { return heap_base_; }
  std::size_t heap_size() const { return config_.heap_size; }
  // The executable's global and static variables, where they are symmetric (empty otherwise).
  const heap::DataRange& program_data() const { return program_data_range_; }

  bool is_symmetric(const void* addr, std::size_t bytes) const {
    auto a = reinterpret_cast<std::uintptr_t>(addr);
    auto b = reinterpret_cast<std::uintptr_t>(heap_base_);
    return (a >= b && a - b <= config_.heap_size && bytes <= config_.heap_size - (a - b)) ||
           program_data_range_.contains(addr, bytes);
  }
  // The symmetric offset of `addr`, which is_symmetric() accepted: offsets past the heap name
  // the program data.
  std::size_t offset_of(const void* addr) const {
    const auto* p = static_cast<const std::byte*>(addr);
    if (program_data_range_.contains(addr, 0)) {
      return config_.heap_size + static_cast<std::size_t>(p - program_data_range_.base);
    }
    return static_cast<std::size_t>(p - heap_base_);
  }
  // Why `addr` is not symmetric, for the message that refuses it.
  std::string why_not_symmetric(const void* addr) const;

  // Collective heap management (serialised: PEs must call in the same order anyway).
  std::mutex& heap_mutex() { return heap_mutex_; }
  heap::BestFitAllocator& allocator() { return allocator_; }
  bootstrap::StoreCollectives& store_collectives() { return *collectives_; }

  // Teams and the symmetric scratch of every team and active set (team.hpp).
  TeamRegistry& teams() { return *teams_; }

  void barrier_all();  // quiet + sync_all
  void sync_all();

  // Collective. Runs the finalize protocol; the object may be destroyed afterwards.
  void finalize();
  [[noreturn]] void global_exit(int status);

 private:
  void move_program_data();
  void connect_transport();
  void publish_abort(const std::string& message);
  void linger_if_hosting_store();
  void start_service();
  void stop_service();

  int rank_;
  int size_;
  int thread_level_;
  RuntimeConfig config_;
  bootstrap::LaunchInfo launch_;
  std::unique_ptr<bootstrap::ConfigStoreServer> server_;
  std::unique_ptr<bootstrap::ConfigStoreClient> client_;
  std::unique_ptr<bootstrap::StoreCollectives> collectives_;
  std::unique_ptr<HangWatch> hang_watch_;
  std::unique_ptr<PeService> service_;  // the PE's one thread; uses client_ and hang_watch_
  std::atomic<bool> leaving_{false};
  // This PE's symmetric memory, which the transports map or register: made before them and
  // destroyed after them (members go in reverse order).
  std::unique_ptr<heap::SymmetricHeap> heap_;
  std::unique_ptr<transport::Transports> transports_;
  transport::Transport* transport_ = nullptr;  // transports_->active()
  std::vector<int> shared_memory_pes_;
  heap::Segment program_data_;  // this PE's moved program data, until heap_ takes it
  heap::DataRange program_data_range_;
  std::string program_data_missing_;  // why there is no symmetric program data, if there is none
  std::byte* heap_base_ = nullptr;
  std::mutex heap_mutex_;
  heap::BestFitAllocator allocator_;
  std::unique_ptr<DisseminationBarrier> world_barrier_;
  std::mutex barrier_mutex_;
  std::unique_ptr<TeamRegistry> teams_;
};

// The PE's runtime; stops the process with a message naming `fn` if shmem_init was not called.
Runtime& runtime(const char* fn);
Runtime* runtime_or_null();
void set_runtime(std::unique_ptr<Runtime> rt);
std::unique_ptr<Runtime> take_runtime();
// Whether a runtime is in place; safe from any thread at any time.
bool runtime_initialized();
// Memory of this PE's heap that the caller still reads after the library is done with it (a
// deep_ep result over a receive block): while any is held, shmem_finalize leaves the heap
// segment mapped (its pages go with the process), so such memory never becomes a bad address.
// From any thread.
void hold_heap_mapping();
void drop_heap_mapping();

// Bad arguments to an API call: a message naming the call, the parameter, the value and what
// is allowed, then exit. The C API has no error return for these.
template <typename... Args>
[[noreturn]] void api_error(const char* fn, fmt::format_string<Args...> f, Args&&... args) {
  log::fatal(fmt::format("{}: {}", fn, fmt::format(f, std::forward<Args>(args)...)));
}

// `count` items of `size` bytes, refused by name with the allowed range where the product does not
// fit in size_t (it would wrap to a small size that passes every later check).
inline std::size_t checked_bytes(const char* fn, const char* param, std::size_t count,
                                 std::size_t size) {
  if (size != 0 && count > SIZE_MAX / size) [[unlikely]] {
    api_error(fn,
              "{}={} is out of range (0..{}): {} items of {} bytes are more than the address "
              "space holds",
              param, count, SIZE_MAX / size, count, size);
  }
  return count * size;
}

inline void check_pe(const Runtime& rt, int pe, const char* fn) {
  if (pe < 0 || pe >= rt.size()) [[unlikely]] {
    api_error(fn, "pe={} is out of range (0..{})", pe, rt.size() - 1);
  }
}

// Offset of a symmetric address range, or a fatal error naming the parameter.
inline std::size_t symmetric_offset(const Runtime& rt, const void* addr, std::size_t bytes,
                                    const char* fn, const char* param) {
  if (!rt.is_symmetric(addr, bytes)) [[unlikely]] {
    api_error(fn, "{}={} ({} bytes) is not symmetric: {}", param, addr, bytes,
              rt.why_not_symmetric(addr));
  }
  return rt.offset_of(addr);
}

inline void check_ctx(shmem_ctx_t ctx, const char* fn) {
  if (ctx != SHMEM_CTX_DEFAULT && !live_contexts::contains(ctx)) [[unlikely]] {
    api_error(fn,
              "ctx={} is not a live context (SHMEM_CTX_DEFAULT or one shmem_ctx_create or "
              "shmem_team_create_ctx made and shmem_ctx_destroy has not destroyed)",
              static_cast<const void*>(ctx));
  }
}

}  // namespace shmoe
