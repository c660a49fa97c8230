#include "shmem/runtime.hpp"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>

#include "bootstrap/pmix_launch.hpp"
#include "common/backoff.hpp"
#include "common/error.hpp"
#include "common/pe_loss.hpp"
#include "common/settings.hpp"
#include "shmem/segment_size.hpp"
#include "shmem/team.hpp"

namespace shmoe {
namespace {

// Waits until every PE said goodbye to the store (or was lost). A store of its own (shmoerun
// --store-only) ends then and closes the connection, which says the same.
void await_every_goodbye(bootstrap::ConfigStoreClient& client, std::chrono::milliseconds timeout,
                         bool hosting_store) {
  try {
    if (!client.get(bootstrap::kFinalizedKey, timeout)) {
      log::warn("not every PE said goodbye to the config store within {} ms", timeout.count());
    }
  } catch (const std::exception&) {
    if (hosting_store) throw;
  }
}

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> rt;
  return rt;
}

std::string system_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string local_host_id() {
  if (auto id = settings::host_id()) {
    if (id->empty() || id->find_first_of(" \t\n") != std::string::npos) {
      throw make_error("SHMOE_HOST_ID='{}' must be a non-empty name without white space", *id);
    }
    return *id;
  }
  return system_host_name();
}

// A value stored under kAbortKey by shmem_global_exit: "exit=<status>;<message>".
int abort_status(std::string& message) {
  if (message.rfind("exit=", 0) == 0) {
    auto semi = message.find(';');
    if (semi != std::string::npos) {
      int status = std::atoi(message.c_str() + 5);
      message.erase(0, semi + 1);
      return status;  // shmem_global_exit's status is the job's, 0 included
    }
  }
  return 1;
}

// When PEs outnumber the cores, the PE a waiter waits for is often not running: spinning then
// only delays it, unless it runs on another core. Waits adapt their spin between yielding almost
// at once and spinning for ~20 us (see WaitPolicy). SHMOE_WAIT_SPIN fixes the spin instead.
void tune_waits_for_cores(int pes_on_host) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  WaitPolicy& w = wait_policy();
  w.cores = cores;
  w.oversubscribed = pes_on_host > cores;
  if (w.oversubscribed) {
    w.min_spin_iterations = 8;
    w.max_spin_iterations = 1024;
  }
  if (auto spin = settings::wait_spin()) {
    w.spin_iterations = static_cast<std::uint32_t>(*spin);
    w.min_spin_iterations = w.max_spin_iterations = w.spin_iterations;
  }
}

// SHMEM_SYMMETRIC_SIZE, else the variable OpenSHMEM 1.0-1.3 programs set, else the default.
heap::HeapRequest read_heap_request() {
  const settings::SymmetricSize s = settings::symmetric_size_in_force();
  heap::HeapRequest r{s.variable, s.text, s.bytes};
  heap::check_heap_size(r);
  return r;
}

}  // namespace

RuntimeConfig read_runtime_config() {
  RuntimeConfig c;
  c.heap_request = read_heap_request();
  // Room for the runtime's own symmetric state comes on top of what the user asked for.
  c.heap_size = heap_segment_bytes(c.heap_request.requested);
  c.init_timeout = settings::init_timeout();
  if (c.init_timeout.count() == 0) c.init_timeout = std::chrono::milliseconds(INT_MAX);
  c.debug_allocations = settings::debug();
  c.host = local_host_id();
  c.system_host = system_host_name();
  c.transport = settings::transport();
  c.ucx = transport::read_ucx_options();
  WaitPolicy& w = wait_policy();
  w.hang_timeout = settings::hang_timeout();
  set_watch_lost_pes(settings::pe_loss() == settings::PeLoss::kContinue);
  return c;
}

Runtime::Runtime(const bootstrap::LaunchInfo& launch, const RuntimeConfig& config, int thread_level)
    : rank_(launch.rank),
      size_(launch.size),
      thread_level_(thread_level),
      config_(config),
      launch_(launch),
      allocator_(config.heap_size) {
  // First, while the library has started no thread: see program_data.hpp.
  move_program_data();
  // The PEs a previous initialization lost belong to that job, not to this one.
  clear_lost_pes();
  tune_waits_for_cores(size_);  // until connect_transport knows which PEs share this host
  if (launch.hosts_store) {
    bootstrap::ConfigStoreServer::Options o;
    o.bind_host = launch.store.host;
    o.port = launch.store.port;
    o.job_size = size_;
    o.job_key = launch.job_key;
    o.on_pe_lost = [host = config_.host](const bootstrap::Hello& lost) {
      if (lost.host == host) heap::Segment::remove_name_of(lost.pid, lost.rank);
    };
    server_ = std::make_unique<bootstrap::ConfigStoreServer>(o);
    server_->start();
  }
  bootstrap::rendezvous(launch_, server_ ? server_->port() : 0, config_.init_timeout);
  const bootstrap::StoreAddress& store = launch_.store;
  bootstrap::Hello hello{bootstrap::PeerRole::kPe,     rank_,        size_,
                         static_cast<int>(::getpid()), config_.host, launch_.job_key};
  // The PE's only connection to the store: requests, and the events it pushes (abort, hang).
  client_ = std::make_unique<bootstrap::ConfigStoreClient>(store, hello, config_.init_timeout);
  try {
    hang_watch_ = std::make_unique<HangWatch>(*client_, rank_, size_);
    start_service();
    connect_transport();
  } catch (const std::exception& e) {
    // Every PE should learn why start-up failed, not only that this PE went away.
    publish_abort(fmt::format("PE {}: shmem_init failed: {}", rank_, e.what()));
    // A constructor that throws runs no destructor: the service must be stopped here.
    leaving_ = true;
    stop_service();
    linger_if_hosting_store();
    throw;
  }
}

void Runtime::move_program_data() {
  heap::DataRange range = heap::find_program_data(&program_data_missing_);
  if (range.size == 0) return;
  const std::string name = heap::Segment::data_name_for(static_cast<int>(::getpid()), rank_);
  heap::Segment::remove_names_at_fatal_exit({name});
  program_data_ = heap::move_into_shared_memory(range, name);
  program_data_range_ = range;
}

std::string Runtime::why_not_symmetric(const void* addr) const {
  const auto* heap = static_cast<const void*>(heap_base_);
  const auto* data = static_cast<const void*>(program_data_range_.base);
  if (is_symmetric(addr, 0)) {
    return is_symmetric(addr, 1)
               ? fmt::format(
                     "it runs past the end of the symmetric heap [{}, +{}) or of the "
                     "program's global data [{}, +{})",
                     heap, config_.heap_size, data, program_data_range_.size)
               : "it is the end of a symmetric range";
  }
  std::string where = fmt::format(
      "it is not inside the symmetric heap [{}, +{}) nor the program's global data [{}, +{})", heap,
      config_.heap_size, data, program_data_range_.size);
  if (program_data_range_.size == 0) {
    where += fmt::format(" (global variables are not symmetric in this job: {})",
                         program_data_missing_.empty() ? "the PEs run different executables"
                                                       : program_data_missing_);
  }
  const std::string file = heap::object_file_of(addr);
  if (!file.empty()) {
    return fmt::format(
        "{}; it lies in {}: only the executable's writable global and static variables are "
        "symmetric, not those of shared libraries nor constants",
        where, file);
  }
  return where + ": allocate it with shmem_malloc, or make it a global or static variable";
}

void Runtime::publish_abort(const std::string& message) {
  try {
    // Only the first explanation counts; later ones are mostly its consequences.
    client_->compare_and_swap(bootstrap::kAbortKey, std::nullopt, message);
  } catch (const std::exception&) {
    // The store is already gone; the caller's own message still reaches stderr.
  }
}

// When this PE runs the store, its exit takes the store down: wait a moment so that the other
// PEs receive the abort message first.
void Runtime::linger_if_hosting_store() {
  if (server_) std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

void Runtime::connect_transport() {
  static std::uint64_t initializations = 0;  // of this process; only the initializing thread
  collectives_ =
      std::make_unique<bootstrap::StoreCollectives>(*client_, rank_, size_, initializations++);
  const transport::PeerPlan plan = transport::plan_peers(
      *collectives_, rank_, size_, {config_.host, config_.system_host, config_.transport},
      config_.init_timeout);
  shared_memory_pes_ = plan.shared_memory_pes;
  tune_waits_for_cores(plan.pes_sharing_cores);
  // Every PE of this host puts its segments in the host's /dev/shm.
  heap::admit_segments(config_.heap_request, config_.heap_size + program_data_.size(),
                       plan.pes_sharing_cores);
  const bool use_ucx = plan.use_ucx;
  heap_ = std::make_unique<heap::SymmetricHeap>(rank_, config_.heap_size, std::move(program_data_));
  heap_base_ = heap_->base();
  transports_ = std::make_unique<transport::Transports>(
      *collectives_, rank_, size_, plan, *heap_, config_.host, config_.ucx, config_.init_timeout);
  if (transports_->shm().symmetric_data_size() == 0) program_data_range_ = {};
  transport_ = &transports_->active();
  // The runtime's own symmetric state comes first, so it has the same offset on every PE.
  auto flags = allocator_.allocate(DisseminationBarrier::kFlagBytes, 64);
  // PEs must run the same barrier algorithm, but their affinity masks (hence what they count as
  // oversubscribed) and environments may differ: all follow PE 0. The central barrier sleeps on
  // a word in PE 0's segment, which PEs that reach PE 0 through UCX cannot map.
  auto choices = collectives_->allgather(
      "barrier", Barrier::name(Barrier::choose(wait_policy().oversubscribed)),
      config_.init_timeout);
  Barrier::Algorithm algorithm = Barrier::parse(choices[0]);
  if (use_ucx && algorithm == Barrier::Algorithm::kCentral) {
    if (settings::barrier()) {
      log::warn(
          "SHMOE_BARRIER=central needs every PE to map PE 0's heap; with UCX peers the "
          "dissemination barrier runs instead");
    }
    algorithm = Barrier::Algorithm::kDissemination;
  }
  // Under SHMOE_PE_LOSS=continue it goes on over the live PEs once one is lost, so that the
  // survivors can free, barrier and finalize without it.
  world_barrier_ = std::make_unique<Barrier>(*transport_, *flags, heap_base_ + *flags,
                                             PeSet{0, 1, size_}, rank_, algorithm, true);
  auto team_scratch = allocator_.allocate(TeamRegistry::kReservedBytes, 64);
  teams_ = std::make_unique<TeamRegistry>(*this, *team_scratch);
}

namespace {
std::atomic<long> g_heap_holds{0};
}  // namespace

void hold_heap_mapping() {
  g_heap_holds.fetch_add(1, std::memory_order_relaxed);
}
void drop_heap_mapping() {
  g_heap_holds.fetch_sub(1, std::memory_order_relaxed);
}

Runtime::~Runtime() {
  if (heap_ && g_heap_holds.load(std::memory_order_relaxed) > 0) heap_->keep_mapped();
  leaving_ = true;
  stop_service();
  teams_.reset();
  world_barrier_.reset();
  if (server_) server_->stop();
}

void Runtime::start_service() {
  PeService::Handlers handlers;
  handlers.on_abort = [this](std::string message) {
    if (leaving_) return;
    int status = abort_status(message);
    std::fflush(nullptr);
    linger_if_hosting_store();
    log::fatal(fmt::format("job aborted: {}", message), status);
  };
  handlers.on_lost = [](const std::string& list) { mark_pes_lost(list); };
  handlers.on_store_lost = [this](const std::exception& e) {
    if (leaving_) return;
    log::fatal(fmt::format("lost the config store at {} ({}): {}", launch_.store.str(), e.what(),
                           bootstrap::store_loss_reason(launch_)));
  };
  service_ = std::make_unique<PeService>(*client_, *hang_watch_, std::move(handlers));
}

void Runtime::stop_service() {
  service_.reset();
  hang_watch_.reset();
}

void Runtime::sync_all() {
  std::lock_guard lock(barrier_mutex_);
  world_barrier_->arrive_and_wait();
}

void Runtime::barrier_all() {
  transport_->quiet(nullptr);
  sync_all();
}

void Runtime::finalize() {
  // What batch sessions of contexts never quieted or destroyed still hold lands before the PEs
  // part.
  transport_->complete_batches();
  barrier_all();
  leaving_ = true;
  stop_service();
  client_->bye();
  // The store must outlive every peer's goodbye. After a loss, every PE stays until then too: the
  // barrier over the live PEs reads each PE's entered word where it lies (over UCX on another
  // host), and a PE says goodbye only once out of it, so no PE reads the memory of one gone.
  if (server_ || any_pe_lost())
    await_every_goodbye(*client_, config_.init_timeout, server_ != nullptr);
  if (server_) server_->stop();
}

void Runtime::global_exit(int status) {
  leaving_ = true;
  publish_abort(fmt::format("exit={};PE {} called shmem_global_exit({})", status, rank_, status));
  std::fflush(nullptr);
  linger_if_hosting_store();
  // mpirun counts a process that leaves PMIx without PMIx_Finalize as failed, whatever its status.
  launch_.pmix.reset();
  bootstrap::PmixClient::release_for_this_process();
  ::_exit(status);
}

Runtime& runtime(const char* fn) {
  auto& rt = runtime_slot();
  if (!rt) [[unlikely]] {
    log::fatal(fmt::format("{}: called before shmem_init (or after shmem_finalize)", fn));
  }
  return *rt;
}

namespace {
// Whether a runtime is in place, readable from any thread at any time (shmem_query_initialized),
// where the slot itself is only changed and read by the thread that initializes and finalizes.
std::atomic<bool> g_initialized{false};
}  // namespace

Runtime* runtime_or_null() {
  return runtime_slot().get();
}
void set_runtime(std::unique_ptr<Runtime> rt) {
  runtime_slot() = std::move(rt);
  g_initialized.store(runtime_slot() != nullptr, std::memory_order_release);
}
std::unique_ptr<Runtime> take_runtime() {
  g_initialized.store(false, std::memory_order_release);
  return std::move(runtime_slot());
}
bool runtime_initialized() {
  return g_initialized.load(std::memory_order_acquire);
}

}  // namespace shmoe
