// The dispatch and combine entry points of include/shmoe/moe.h over the C++ operators.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <string>

#include "moe/c_api_guard.hpp"
#include "moe/moe.hpp"
#include "shmem/last_error.hpp"
#include "shmoe/moe.h"
#include "shmoe/runtime.h"

struct shmoe_moe {
  shmoe::moe::MoeContext context;
};

namespace shmoe::moe::c_api {

void set_last_error(std::string text) {
  shmoe::set_last_error(std::move(text));
}

}  // namespace shmoe::moe::c_api

using shmoe::moe::c_api::guarded;
using shmoe::moe::c_api::require;
using shmoe::moe::c_api::require_nonnull;

extern "C" {

const char* shmoe_moe_last_error(void) {
  return shmoe_last_error();
}

int shmoe_moe_create(const shmoe_moe_config_t* config, shmoe_moe_t* moe) {
  return guarded([&] {
    const auto& in = require(config, "shmoe_moe_create", "config");
    auto& handle = require(moe, "shmoe_moe_create", "moe");
    shmoe::moe::MoeConfig c;
    c.experts_per_pe = in.experts_per_pe;
    c.max_bs = in.max_bs;
    c.hidden = in.hidden;
    c.topk = in.topk;
    const int dtype = shmoe::moe::c_api::raw_enum_value(in.dtype);
    if (dtype < SHMOE_DTYPE_INT32 || dtype > SHMOE_DTYPE_FLOAT32) {
      throw shmoe::moe::MoeError("shmoe_moe_create: dtype=" + std::to_string(dtype) +
                                 " is out of range (0..3, SHMOE_DTYPE_INT32..SHMOE_DTYPE_FLOAT32)");
    }
    c.dtype = static_cast<shmoe::moe::DType>(dtype);
    c.max_recv_rows = in.max_recv_rows;
    c.workers = {in.matrix_workers, in.vector_workers};
    if (in.doubleplane_threshold != 0) c.doubleplane_threshold = in.doubleplane_threshold;
    c.token_side_bytes = in.token_side_bytes;
    c.header_ints = in.header_ints;
    c.shrink_timeout_ms = in.shrink_timeout_ms;
    handle = new shmoe_moe{shmoe::moe::MoeContext(c)};
    return int{SHMOE_MOE_OK};
  });
}

void shmoe_moe_destroy(shmoe_moe_t moe) {
  delete moe;
}

int shmoe_moe_last_timing(shmoe_moe_t moe, shmoe_moe_timing_t* timing) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_moe_last_timing", "moe");
    auto& out = require(timing, "shmoe_moe_last_timing", "timing");
    const shmoe::moe::OpTiming& t = m.context.last_timing();
    out = shmoe_moe_timing_t{};
    for (double us : t.worker_us) out.worker_us_max = std::max(out.worker_us_max, us);
    out.workers = static_cast<int>(t.worker_us.size());
    out.comm_us = t.comm_us;
    out.bytes_sent = t.bytes_sent;
    out.bytes_via_copy_engine = t.bytes_via_copy_engine;
    out.rows_received = t.rows_received;
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_last_source_waits(shmoe_moe_t moe, double* wait_us, int n_pes) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_last_source_waits";
    auto& m = require(moe, fn, "moe");
    require_nonnull(wait_us, fn, "wait_us");
    const int P = shmem_n_pes();
    if (n_pes != P) {
      throw shmoe::moe::MoeError(
          fmt::format("{}: n_pes={} is not the job's PE count {} (wait_us holds one value per PE)",
                      fn, n_pes, P));
    }
    const auto& us = m.context.last_timing().source_wait_us;
    for (int src = 0; src < P; ++src)
      wait_us[src] = us.empty() ? 0.0 : us[static_cast<std::size_t>(src)];
    return int{SHMOE_MOE_OK};
  });
}

size_t shmoe_moe_recv_capacity(shmoe_moe_t moe) {
  return moe == nullptr ? 0 : moe->context.recv_capacity();
}

int shmoe_moe_receive_window(shmoe_moe_t moe, void** window, size_t* capacity_rows) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_moe_receive_window", "moe");
    auto& out_window = require(window, "shmoe_moe_receive_window", "window");
    auto& out_rows = require(capacity_rows, "shmoe_moe_receive_window", "capacity_rows");
    out_window = m.context.receive_window();
    out_rows = m.context.recv_capacity();
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_dispatch(shmoe_moe_t moe, shmoe_plane_t plane, const void* x, const int32_t* expert_ids,
                   const float* expert_scales, int bs, void* expand_x, int32_t* assist_info,
                   int32_t* ep_recv_count, int32_t* expert_token_nums, float* expand_scales) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_dispatch", "moe");
    shmoe::moe::DispatchArgs in{x, expert_ids, expert_scales, bs};
    shmoe::moe::DispatchOutputs out{expand_x, assist_info, ep_recv_count, expert_token_nums,
                                    expand_scales};
    return plane == SHMOE_PLANE_DOUBLE ? shmoe::moe::dispatch_doubleplane(m.context, in, out)
                                       : shmoe::moe::dispatch_classic(m.context, in, out);
  });
}

int shmoe_dispatch_ex(shmoe_moe_t moe, shmoe_plane_t plane, const shmoe_dispatch_args_t* args,
                      const shmoe_dispatch_outputs_t* outputs) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_dispatch_ex", "moe");
    const auto& a = require(args, "shmoe_dispatch_ex", "args");
    const auto& o = require(outputs, "shmoe_dispatch_ex", "outputs");
    const int verdict = shmoe::moe::c_api::raw_enum_value(a.verdict);
    const bool known = verdict >= SHMOE_CALL_PROCEED && verdict <= SHMOE_CALL_RETRY;
    shmoe::moe::DispatchArgs in{
        a.x,
        a.expert_ids,
        a.expert_scales,
        a.bs,
        a.token_side,
        a.header_ints,
        known ? static_cast<shmoe::moe::CallVerdict>(verdict) : shmoe::moe::CallVerdict::kRefuse,
        a.pe_mask};
    shmoe::moe::DispatchOutputs out{o.expand_x,          o.assist_info,   o.ep_recv_count,
                                    o.expert_token_nums, o.expand_scales, o.expand_side,
                                    o.all_header_ints,   o.all_counts};
    auto run = [&] {
      return plane == SHMOE_PLANE_DOUBLE ? shmoe::moe::dispatch_doubleplane(m.context, in, out)
                                         : shmoe::moe::dispatch_classic(m.context, in, out);
    };
    if (!known) {
      // This PE joins the call as refusing it, so the others stop too, and says why.
      try {
        run();
      } catch (const shmoe::moe::MoeError&) {
      }
      throw shmoe::moe::MoeError("shmoe_dispatch_ex: args->verdict=" + std::to_string(verdict) +
                                 " is out of range (0..2, SHMOE_CALL_PROCEED..SHMOE_CALL_RETRY)");
    }
    const int rows = run();
    return rows == shmoe::moe::kDispatchRetry ? int{SHMOE_MOE_RETRY} : rows;
  });
}

int shmoe_combine_ex(shmoe_moe_t moe, shmoe_plane_t plane, const shmoe_combine_args_t* args) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_combine_ex", "moe");
    const auto& a = require(args, "shmoe_combine_ex", "args");
    const int verdict = shmoe::moe::c_api::raw_enum_value(a.verdict);
    std::string own;  // this PE's reason to refuse, where the caller's arguments give one
    if (verdict != SHMOE_CALL_PROCEED && verdict != SHMOE_CALL_REFUSE) {
      own = "shmoe_combine_ex: args->verdict=" + std::to_string(verdict) +
            " is out of range (0..1, SHMOE_CALL_PROCEED or SHMOE_CALL_REFUSE)";
    } else if (a.caller_mode < 0 || a.caller_mode > 127) {
      own = "shmoe_combine_ex: args->caller_mode=" + std::to_string(a.caller_mode) +
            " is out of range (0..127)";
    }
    shmoe::moe::CombineArgs in{a.expand_x,
                               a.assist_info,
                               a.ep_recv_count,
                               a.expert_ids,
                               a.expert_scales,
                               a.bs,
                               a.x_out,
                               verdict != SHMOE_CALL_PROCEED || !own.empty(),
                               a.x_out_float32 != 0,
                               own.empty() ? a.caller_mode : 0,
                               a.pe_mask};
    try {
      if (plane == SHMOE_PLANE_DOUBLE) {
        shmoe::moe::combine_doubleplane(m.context, in);
      } else {
        shmoe::moe::combine_classic(m.context, in);
      }
    } catch (const shmoe::moe::MoeError&) {
      if (own.empty()) throw;
      throw shmoe::moe::MoeError(own);  // refused everywhere; here, say why
    }
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_sync_live(shmoe_moe_t moe, int32_t* pe_mask) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_moe_sync_live", "moe");
    shmoe::moe::sync_live(m.context, pe_mask);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_moe_rejoin(shmoe_moe_t moe, int32_t* pe_mask) {
  return shmoe_moe_rejoin_with(moe, pe_mask, nullptr, 0);
}

int shmoe_moe_rejoin_with(shmoe_moe_t moe, int32_t* pe_mask, const shmoe_moe_t* others,
                          int n_others) {
  return guarded([&] {
    constexpr const char* fn = "shmoe_moe_rejoin_with";
    auto& m = require(moe, fn, "moe");
    if (n_others < 0 || n_others > 31) {
      throw shmoe::moe::MoeError(
          fmt::format("{}: n_others={} is out of range (0..31)", fn, n_others));
    }
    if (n_others > 0) require_nonnull(others, fn, "others");
    std::vector<shmoe::moe::MoeContext*> contexts;
    for (int i = 0; i < n_others; ++i)
      contexts.push_back(others[i] == nullptr ? nullptr : &others[i]->context);
    shmoe::moe::rejoin(m.context, pe_mask, contexts);
    return int{SHMOE_MOE_OK};
  });
}

int shmoe_combine(shmoe_moe_t moe, shmoe_plane_t plane, const void* expand_x,
                  const int32_t* assist_info, const int32_t* ep_recv_count,
                  const int32_t* expert_ids, const float* expert_scales, int bs, void* x_out) {
  return guarded([&] {
    auto& m = require(moe, "shmoe_combine", "moe");
    shmoe::moe::CombineArgs in{expand_x,      assist_info, ep_recv_count, expert_ids,
                               expert_scales, bs,          x_out};
    if (plane == SHMOE_PLANE_DOUBLE) {
      shmoe::moe::combine_doubleplane(m.context, in);
    } else {
      shmoe::moe::combine_classic(m.context, in);
    }
    return int{SHMOE_MOE_OK};
  });
}

}  // extern "C"
