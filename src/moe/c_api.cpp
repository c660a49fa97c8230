// The plain C entry points of include/shmoe/moe.h over the C++ operators.
#include <string>

#include "moe/moe.hpp"
#include "shmoe/moe.h"

struct shmoe_moe {
  shmoe::moe::MoeContext context;
};

namespace {

thread_local std::string g_last_error;

template <typename F>
int guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

}  // namespace

extern "C" {

int shmoe_moe_create(const shmoe_moe_config_t* config, shmoe_moe_t* moe) {
  return guarded([&] {
    if (config == nullptr || moe == nullptr)
      throw shmoe::moe::MoeError("shmoe_moe_create: null argument");
    shmoe::moe::MoeConfig c;
    c.experts_per_pe = config->experts_per_pe;
    c.max_bs = config->max_bs;
    c.hidden = config->hidden;
    c.topk = config->topk;
    c.dtype = static_cast<shmoe::moe::DType>(config->dtype);
    c.max_recv_rows = config->max_recv_rows;
    c.workers = {config->matrix_workers, config->vector_workers};
    if (config->doubleplane_threshold != 0) c.doubleplane_threshold = config->doubleplane_threshold;
    *moe = new shmoe_moe{shmoe::moe::MoeContext(c)};
    return 0;
  });
}

void shmoe_moe_destroy(shmoe_moe_t moe) {
  delete moe;
}

size_t shmoe_moe_recv_capacity(shmoe_moe_t moe) {
  return moe->context.recv_capacity();
}

const char* shmoe_moe_last_error(void) {
  return g_last_error.c_str();
}

int shmoe_dispatch(shmoe_moe_t moe, shmoe_plane_t plane, const void* x, const int32_t* expert_ids,
                   const float* expert_scales, int bs, void* expand_x, int32_t* assist_info,
                   int32_t* ep_recv_count, int32_t* expert_token_nums, float* expand_scales) {
  return guarded([&] {
    shmoe::moe::DispatchArgs in{x, expert_ids, expert_scales, bs};
    shmoe::moe::DispatchOutputs out{expand_x, assist_info, ep_recv_count, expert_token_nums,
                                    expand_scales};
    return plane == SHMOE_PLANE_DOUBLE ? shmoe::moe::dispatch_doubleplane(moe->context, in, out)
                                       : shmoe::moe::dispatch_classic(moe->context, in, out);
  });
}

int shmoe_combine(shmoe_moe_t moe, shmoe_plane_t plane, const void* expand_x,
                  const int32_t* assist_info, const int32_t* ep_recv_count,
                  const int32_t* expert_ids, const float* expert_scales, int bs, void* x_out) {
  return guarded([&] {
    shmoe::moe::CombineArgs in{expand_x,      assist_info, ep_recv_count, expert_ids,
                               expert_scales, bs,          x_out};
    if (plane == SHMOE_PLANE_DOUBLE) {
      shmoe::moe::combine_doubleplane(moe->context, in);
    } else {
      shmoe::moe::combine_classic(moe->context, in);
    }
    return 0;
  });
}

}  // extern "C"
