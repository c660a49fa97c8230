// Library setup, exit and query routines (OpenSHMEM 1.5 section 9.1), and contexts.
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/settings.hpp"
#include "common/unknown_settings.hpp"
#include "shmem/api_stamp.hpp"
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"
#include "shmem/uncaught.hpp"

struct shmoe_ctx shmoe_ctx_default;

namespace {

using shmoe::Runtime;

// OpenSHMEM 1.6 (9.1.1, 9.1.4): initialization calls nest. Each counts here, and only the
// finalize that matches the first releases the library; the others are barriers. Changed only by
// the thread that initializes and finalizes.
int g_init_depth = 0;

void finalize_at_exit() {
  if (shmoe::runtime_or_null() == nullptr) return;
  g_init_depth = 1;  // a program that leaves without its last finalize still releases the library
  pshmem_finalize();
}

int start(int requested) {
  if (shmoe::runtime_or_null() != nullptr) {
    ++g_init_depth;
    return shmoe::runtime_or_null()->thread_level();
  }
  int provided = requested < SHMEM_THREAD_SINGLE     ? SHMEM_THREAD_SINGLE
                 : requested > SHMEM_THREAD_MULTIPLE ? SHMEM_THREAD_MULTIPLE
                                                     : requested;
  shmoe::report_uncaught_exceptions();
  try {
    // The environment as shmem_init finds it: a program may set variables (SHMEM_SYMMETRIC_SIZE)
    // after a call that needs no init (shmoe_elastic_buffer_heap_size) read them.
    shmoe::settings::reread();
    auto launch = shmoe::bootstrap::detect_launch();
    shmoe::log::set_rank(launch.rank);
    auto config = shmoe::read_runtime_config();
    shmoe::set_runtime(std::make_unique<Runtime>(launch, config, provided));
    if (shmoe::runtime_or_null()->rank() == 0) shmoe::settings::warn_unknown_variables_once();
  } catch (const std::exception& e) {
    shmoe::log::fatal(fmt::format("shmem_init failed: {}", e.what()));
  }
  g_init_depth = 1;
  static bool registered = false;
  if (!registered) {
    std::atexit(finalize_at_exit);
    registered = true;
  }
  return provided;
}

}  // namespace

extern "C" {

void pshmem_init(void) {
  start(SHMEM_THREAD_SINGLE);
}

int pshmem_init_thread(int requested, int* provided) {
  int level = start(requested);
  if (provided != nullptr) *provided = level;
  return 0;
}

void pshmem_query_thread(int* provided) {
  if (provided != nullptr) *provided = shmoe::runtime("shmem_query_thread").thread_level();
}

// OpenSHMEM 1.6: nonzero between initialization and the finalize; callable at any time, from any
// thread, before shmem_init and after shmem_finalize included.
void pshmem_query_initialized(int* initialized) {
  if (initialized != nullptr) *initialized = shmoe::runtime_initialized() ? 1 : 0;
}

void pshmem_finalize(void) {
  if (shmoe::runtime_or_null() == nullptr) return;  // finalize after finalize does nothing
  if (g_init_depth > 1) {
    --g_init_depth;
    pshmem_barrier_all();  // all but the last finalize (1.6, 9.1.4)
    return;
  }
  g_init_depth = 0;
  auto rt = shmoe::take_runtime();
  try {
    rt->finalize();
  } catch (const std::exception& e) {
    shmoe::log::fatal(fmt::format("shmem_finalize failed: {}", e.what()));
  }
}

void pshmem_global_exit(int status) {
  if (auto* rt = shmoe::runtime_or_null()) rt->global_exit(status);
  std::exit(status);
}

int pshmem_my_pe(void) {
  return shmoe::runtime("shmem_my_pe").rank();
}
int pshmem_n_pes(void) {
  return shmoe::runtime("shmem_n_pes").size();
}

int pshmem_pe_accessible(int pe) {
  auto& rt = shmoe::runtime("shmem_pe_accessible");
  return pe >= 0 && pe < rt.size() ? 1 : 0;
}

int pshmem_addr_accessible(const void* addr, int pe) {
  auto& rt = shmoe::runtime("shmem_addr_accessible");
  return pshmem_pe_accessible(pe) && rt.is_symmetric(addr, 1) ? 1 : 0;
}

void* pshmem_ptr(const void* dest, int pe) {
  auto& rt = shmoe::runtime("shmem_ptr");
  if (pe < 0 || pe >= rt.size() || !rt.is_symmetric(dest, 1)) return nullptr;
  // This PE's own object is where the program has it (a global is mapped twice: at its address
  // and in this PE's window).
  if (pe == rt.rank()) return const_cast<void*>(dest);
  std::byte* base = rt.transport().direct_base(pe);
  return base == nullptr ? nullptr : base + rt.offset_of(dest);
}

void pshmem_info_get_version(int* major, int* minor) {
  if (major != nullptr) *major = SHMEM_MAJOR_VERSION;
  if (minor != nullptr) *minor = SHMEM_MINOR_VERSION;
}

// The name is SHMEM_VENDOR_STRING itself, as the specification asks of the two ("consistent").
void pshmem_info_get_name(char* name) {
  static_assert(sizeof(SHMEM_VENDOR_STRING) <= SHMEM_MAX_NAME_LEN);
  if (name != nullptr) std::memcpy(name, SHMEM_VENDOR_STRING, sizeof(SHMEM_VENDOR_STRING));
}

// A profiling tool that intercepts shmem_pcontrol gives the levels their meaning; the library
// itself only returns (OpenSHMEM 1.5 section 10.1).
void pshmem_pcontrol(const int level, ...) {
  (void)level;
}

int pshmem_ctx_create(long options, shmem_ctx_t* ctx) {
  auto& rt = shmoe::runtime("shmem_ctx_create");
  if (ctx == nullptr) return -1;
  constexpr long kKnown = SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE;
  if ((options & ~kKnown) != 0) {
    *ctx = SHMEM_CTX_INVALID;
    return -1;
  }
  *ctx = new shmoe_ctx{options, rt.transport().open_channel()};
  shmoe::live_contexts::add(*ctx);
  return 0;
}

// Context sessions (OpenSHMEM 1.6, 9.9) are hints: the options and total_ops say what the
// program will do, and results, completion and ordering never depend on them. A batch session
// lets the UCX transport hold the context's small puts and non-fetching atomics to each other
// host and send them as one message (transport.hpp's start_batch); shared memory, where a put is
// a store, has nothing to gain. total_ops changes nothing: messages go when full or when an
// operation needs them gone, whatever the count.
void pshmem_ctx_session_start(shmem_ctx_t ctx, long options,
                              const shmem_ctx_session_config_t* config, long config_mask) {
  constexpr const char* fn = "shmem_ctx_session_start";
  if (ctx == SHMEM_CTX_INVALID) return;
  shmoe::check_ctx(ctx, fn);
  if ((options & ~SHMEM_CTX_SESSION_BATCH) != 0) {
    shmoe::log::warn("{}: options={:#x} has bits other than SHMEM_CTX_SESSION_BATCH: ignored", fn,
                     options);
  }
  if ((config_mask & ~SHMEM_CTX_SESSION_TOTAL_OPS) != 0) {
    shmoe::log::warn(
        "{}: config_mask={:#x} has bits other than SHMEM_CTX_SESSION_TOTAL_OPS: "
        "ignored",
        fn, config_mask);
  }
  if (config_mask != 0 && config == nullptr) {
    shmoe::log::warn("{}: config=NULL with config_mask={:#x}: the defaults apply", fn, config_mask);
  }
  // A second start adds its options to the session's (9.9): one without BATCH leaves it batching.
  if ((options & SHMEM_CTX_SESSION_BATCH) != 0) {
    shmoe::runtime(fn).transport().start_batch(shmoe::api::channel_of(ctx));
  }
}

void pshmem_ctx_session_stop(shmem_ctx_t ctx) {
  constexpr const char* fn = "shmem_ctx_session_stop";
  if (ctx == SHMEM_CTX_INVALID) return;
  shmoe::check_ctx(ctx, fn);
  shmoe::runtime(fn).transport().stop_batch(shmoe::api::channel_of(ctx));
}

void pshmem_ctx_destroy(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_INVALID) return;  // as the specification says: no effect
  if (ctx == SHMEM_CTX_DEFAULT) {
    shmoe::api_error("shmem_ctx_destroy",
                     "ctx=SHMEM_CTX_DEFAULT cannot be destroyed (only contexts that "
                     "shmem_ctx_create or shmem_team_create_ctx made)");
  }
  shmoe::check_ctx(ctx, "shmem_ctx_destroy");
  pshmem_ctx_quiet(ctx);
  shmoe::live_contexts::remove(ctx);
  delete ctx;
}

SHMOE_WEAK_ALIAS(shmem_init)
SHMOE_WEAK_ALIAS(shmem_query_initialized)
SHMOE_WEAK_ALIAS(shmem_ctx_session_start)
SHMOE_WEAK_ALIAS(shmem_ctx_session_stop)
SHMOE_WEAK_ALIAS(shmem_init_thread)
SHMOE_WEAK_ALIAS(shmem_query_thread)
SHMOE_WEAK_ALIAS(shmem_finalize)
SHMOE_WEAK_ALIAS(shmem_global_exit)
SHMOE_WEAK_ALIAS(shmem_my_pe)
SHMOE_WEAK_ALIAS(shmem_n_pes)
SHMOE_WEAK_ALIAS(shmem_pe_accessible)
SHMOE_WEAK_ALIAS(shmem_addr_accessible)
SHMOE_WEAK_ALIAS(shmem_ptr)
SHMOE_WEAK_ALIAS(shmem_info_get_version)
SHMOE_WEAK_ALIAS(shmem_info_get_name)
SHMOE_WEAK_ALIAS(shmem_pcontrol)
SHMOE_WEAK_ALIAS(shmem_ctx_create)
SHMOE_WEAK_ALIAS(shmem_ctx_destroy)

}  // extern "C"
