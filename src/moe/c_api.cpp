// The dispatch and combine entry points of include/shmoe/moe.h over the C++ operators.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <string>

#include "moe/c_api_guard.hpp"
#include "moe/moe.hpp"
#include "shmoe/moe.h"

struct shmoe_moe_buffer {
  shmoe::moe::MoeBuffer impl;
};

using shmoe::moe::c_api::guarded;
using shmoe::moe::c_api::read_struct;
using shmoe::moe::c_api::require;
using shmoe::moe::c_api::require_nonnull;

namespace {

// The first version of each extensible struct ends with these fields (appended ones have 0 as
// their default, so a caller that stops here keeps working; shmoe_moe_config_t's is in
// config_c_api.cpp).
constexpr std::size_t kDispatchArgsFirst = SHMOE_FIRST_SIZE(shmoe_dispatch_args_t, num_tokens);
constexpr std::size_t kDispatchOutputsFirst =
    SHMOE_FIRST_SIZE(shmoe_dispatch_outputs_t, recv_weights);
constexpr std::size_t kCombineArgsFirst = SHMOE_FIRST_SIZE(shmoe_combine_args_t, combined_x);
constexpr std::size_t kTimingFirst = SHMOE_FIRST_SIZE(shmoe_moe_timing_t, rows_received);

}  // namespace

extern "C" {

int shmoe_moe_buffer_create(const shmoe_moe_config_t* config, shmoe_moe_buffer_t* buffer) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_buffer_create";
    const shmoe::moe::MoeConfig c = shmoe::moe::c_api::moe_config_of(config, fn);
    auto& handle = require(buffer, fn, "buffer");
    handle = new shmoe_moe_buffer{shmoe::moe::MoeBuffer(c)};
    return int{SHMOE_MOE_OK};
  });
}

void shmoe_moe_buffer_destroy(shmoe_moe_buffer_t buffer) {
  delete buffer;
}

int shmoe_moe_last_timing(shmoe_moe_buffer_t buffer, shmoe_moe_timing_t* timing) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_last_timing";
    auto& m = require(buffer, fn, "buffer");
    const shmoe::moe::OpTiming& t = m.impl.last_timing();
    shmoe_moe_timing_t out{};
    for (double us : t.worker_us) out.worker_us_max = std::max(out.worker_us_max, us);
    out.workers = static_cast<int>(t.worker_us.size());
    out.comm_us = t.comm_us;
    out.bytes_sent = t.bytes_sent;
    out.bytes_via_copy_engine = t.bytes_via_copy_engine;
    out.rows_received = t.rows_received;
    shmoe::moe::c_api::write_struct(timing, out, kTimingFirst, fn, "timing");
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_last_worker_times(shmoe_moe_buffer_t buffer, double* worker_us, int n_workers) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_last_worker_times";
    auto& m = require(buffer, fn, "buffer");
    if (n_workers > 0) require_nonnull(worker_us, fn, "worker_us");
    const auto& us = m.impl.last_timing().worker_us;
    const int workers = static_cast<int>(us.size());
    if (n_workers != workers) {
      throw shmoe::moe::Refused(fmt::format(
          "{}: n_workers={} is not this buffer's worker count {} (shmoe_moe_timing_t.workers)", fn,
          n_workers, workers));
    }
    std::copy(us.begin(), us.end(), worker_us);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_last_source_waits(shmoe_moe_buffer_t buffer, double* wait_us, int n_pes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_last_source_waits";
    auto& m = require(buffer, fn, "buffer");
    require_nonnull(wait_us, fn, "wait_us");
    const int P = shmem_n_pes();
    if (n_pes != P) {
      throw shmoe::moe::Refused(
          fmt::format("{}: n_pes={} is not the job's PE count {} (wait_us holds one value per PE)",
                      fn, n_pes, P));
    }
    const auto& us = m.impl.last_timing().source_wait_us;
    for (int src = 0; src < P; ++src)
      wait_us[src] = us.empty() ? 0.0 : us[static_cast<std::size_t>(src)];
    return int{SHMOE_MOE_OK};
  });
}

size_t shmoe_moe_buffer_symmetric_bytes(const shmoe_moe_config_t* config, int n_pes) {
  std::size_t bytes = 0;
  const int status = guarded([&] {
    constexpr const char* fn = "shmoe_moe_buffer_symmetric_bytes";
    bytes = shmoe::moe::MoeBuffer::window_bytes(
        shmoe::moe::c_api::checked_moe_config(config, n_pes, fn), n_pes);
    return int{SHMOE_MOE_OK};
  });
  return status == SHMOE_MOE_OK ? bytes : 0;
}

size_t shmoe_moe_recv_capacity(shmoe_moe_buffer_t buffer) {
  return buffer == nullptr ? 0 : buffer->impl.recv_capacity();
}

int shmoe_moe_receive_window(shmoe_moe_buffer_t buffer, void** window, size_t* capacity_rows) {
  return guarded([&] {
    auto& m = require(buffer, "shmoe_moe_receive_window", "buffer");
    auto& out_window = require(window, "shmoe_moe_receive_window", "window");
    auto& out_rows = require(capacity_rows, "shmoe_moe_receive_window", "capacity_rows");
    out_window = m.impl.receive_window();
    out_rows = m.impl.recv_capacity();
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_dispatch(shmoe_moe_buffer_t buffer, const shmoe_dispatch_args_t* args,
                       const shmoe_dispatch_outputs_t* outputs) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_dispatch";
    auto& m = require(buffer, fn, "buffer");
    const auto a = read_struct(args, kDispatchArgsFirst, fn, "args");
    const int verdict = shmoe::moe::c_api::raw_enum_value(a.verdict);
    const bool known = verdict >= SHMOE_CALL_PROCEED && verdict <= SHMOE_CALL_RETRY;
    shmoe::moe::DispatchArgs in{
        a.x,
        a.topk_idx,
        a.topk_weights,
        a.num_tokens,
        a.token_side,
        a.header_ints,
        known ? static_cast<shmoe::moe::CallVerdict>(verdict) : shmoe::moe::CallVerdict::kRefuse,
        a.pe_mask};
    shmoe::moe::DispatchOutputs out;
    if (verdict == SHMOE_CALL_PROCEED) {  // with any other verdict no output is written
      const auto o = read_struct(outputs, kDispatchOutputsFirst, fn, "outputs");
      out = {o.recv_x,       o.recv_src_info,   o.recv_layout_prefix, o.num_recv_tokens_per_expert,
             o.recv_weights, o.recv_token_side, o.all_header_ints,    o.all_counts,
             o.recv_block,   o.recv_block_x};
    }
    const bool double_plane = shmoe::moe::c_api::raw_enum_value(a.plane) == SHMOE_PLANE_DOUBLE;
    auto run = [&] {
      return double_plane ? shmoe::moe::dispatch_doubleplane(m.impl, in, out)
                          : shmoe::moe::dispatch_classic(m.impl, in, out);
    };
    if (!known) {
      // This PE joins the call as refusing it, so the others stop too, and says why.
      try {
        run();
      } catch (const shmoe::moe::Refused&) {
      }
      throw shmoe::moe::Refused(std::string(fn) + ": args->verdict=" + std::to_string(verdict) +
                                " is out of range (0..2, SHMOE_CALL_PROCEED..SHMOE_CALL_RETRY)");
    }
    const int rows = run();
    return rows == shmoe::moe::kDispatchRetry ? int{SHMOE_MOE_RETRY} : rows;
  });
}

int shmoe_moe_release_block(shmoe_moe_buffer_t buffer, int block) {
  return guarded([&] {
    auto& m = require(buffer, "shmoe_moe_release_block", "buffer");
    try {
      m.impl.release_block(block);
    } catch (const shmoe::moe::Refused& e) {
      throw shmoe::moe::Refused(std::string("shmoe_moe_") + e.what());
    }
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_held_blocks(shmoe_moe_buffer_t buffer) {
  return buffer == nullptr ? 0 : buffer->impl.held_blocks();
}

int shmoe_moe_combine(shmoe_moe_buffer_t buffer, const shmoe_combine_args_t* args) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_combine";
    auto& m = require(buffer, fn, "buffer");
    const auto a = read_struct(args, kCombineArgsFirst, fn, "args");
    const int verdict = shmoe::moe::c_api::raw_enum_value(a.verdict);
    std::string own;  // this PE's reason to refuse, where the caller's arguments give one
    if (verdict != SHMOE_CALL_PROCEED && verdict != SHMOE_CALL_REFUSE) {
      own = std::string(fn) + ": args->verdict=" + std::to_string(verdict) +
            " is out of range (0..1, SHMOE_CALL_PROCEED or SHMOE_CALL_REFUSE)";
    } else if (a.caller_mode < 0 || a.caller_mode > 127) {
      own = std::string(fn) + ": args->caller_mode=" + std::to_string(a.caller_mode) +
            " is out of range (0..127)";
    }
    shmoe::moe::CombineArgs in{a.x,
                               a.src_info,
                               a.layout_prefix,
                               a.topk_idx,
                               a.topk_weights,
                               a.num_tokens,
                               a.combined_x,
                               verdict != SHMOE_CALL_PROCEED || !own.empty(),
                               a.combined_x_float32 != 0,
                               own.empty() ? a.caller_mode : 0,
                               a.pe_mask};
    try {
      if (shmoe::moe::c_api::raw_enum_value(a.plane) == SHMOE_PLANE_DOUBLE) {
        shmoe::moe::combine_doubleplane(m.impl, in);
      } else {
        shmoe::moe::combine_classic(m.impl, in);
      }
    } catch (const shmoe::moe::Refused&) {
      if (own.empty()) throw;
      throw shmoe::moe::Refused(own);  // refused everywhere; here, say why
    }
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_sync_live(shmoe_moe_buffer_t buffer, int32_t* pe_mask) {
  return guarded([&] {
    auto& m = require(buffer, "shmoe_moe_sync_live", "buffer");
    shmoe::moe::sync_live(m.impl, pe_mask);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_rejoin(shmoe_moe_buffer_t buffer, int32_t* pe_mask) {
  return shmoe_moe_rejoin_with(buffer, pe_mask, nullptr, 0);
}

int shmoe_moe_rejoin_with(shmoe_moe_buffer_t buffer, int32_t* pe_mask,
                          const shmoe_moe_buffer_t* others, int n_others) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_rejoin_with";
    auto& m = require(buffer, fn, "buffer");
    if (n_others < 0 || n_others > 31) {
      throw shmoe::moe::Refused(
          fmt::format("{}: n_others={} is out of range (0..31)", fn, n_others));
    }
    if (n_others > 0) require_nonnull(others, fn, "others");
    std::vector<shmoe::moe::MoeBuffer*> contexts;
    for (int i = 0; i < n_others; ++i)
      contexts.push_back(others[i] == nullptr ? nullptr : &others[i]->impl);
    shmoe::moe::rejoin(m.impl, pe_mask, contexts);
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
