// A PE program that misuses the MoE operators on request, for the hang tests:
//   moe_faults topk_mismatch   PE 1 calls dispatch with topk 1, the others with topk 2
//   moe_faults skip_combine    two full dispatch+combine rounds, then PE 1 never calls combine
#include <shmem.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "moe/moe.hpp"

namespace {

using namespace shmoe::moe;

struct Buffers {
  std::vector<float> x, scales, expand, out;
  std::vector<std::int32_t> ids, assist, recv, nums;
};

Buffers make_buffers(const MoeBuffer& ctx, int bs) {
  const auto& c = ctx.config();
  const int experts = ctx.n_pes() * c.experts_per_pe;
  Buffers b;
  b.x.assign(static_cast<std::size_t>(bs) * c.hidden, 1.0f);
  for (int t = 0; t < bs; ++t) {
    for (int k = 0; k < c.topk; ++k) b.ids.push_back((t + k) % experts);
  }
  b.scales.assign(b.ids.size(), 0.5f);
  b.expand.resize(ctx.recv_capacity() * c.hidden);
  b.assist.resize(ctx.recv_capacity() * 3);
  b.recv.resize(static_cast<std::size_t>(ctx.n_pes()) * c.experts_per_pe);
  b.nums.resize(c.experts_per_pe);
  b.out.resize(b.x.size());
  return b;
}

void dispatch(MoeBuffer& ctx, Buffers& b, int bs) {
  dispatch_classic(ctx, {b.x.data(), b.ids.data(), b.scales.data(), bs},
                   {b.expand.data(), b.assist.data(), b.recv.data(), b.nums.data(), nullptr});
}

void combine(MoeBuffer& ctx, Buffers& b, int bs) {
  combine_classic(ctx, {b.expand.data(), b.assist.data(), b.recv.data(), b.ids.data(),
                        b.scales.data(), bs, b.out.data()});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  shmem_init();
  const int me = shmem_my_pe();
  MoeConfig c;
  c.experts_per_pe = 2;
  c.max_bs = 8;
  c.hidden = 4;
  c.topk = mode == "topk_mismatch" && me == 1 ? 1 : 2;
  c.max_recv_rows = 64;
  c.workers = {0, 2};
  MoeBuffer ctx(c);
  Buffers b = make_buffers(ctx, 8);
  try {
    if (mode == "topk_mismatch") {
      dispatch(ctx, b, 8);
    } else if (mode == "skip_combine") {
      for (int round = 1; round <= 3; ++round) {
        dispatch(ctx, b, 8);
        if (round == 3 && me == 1) {
          for (;;) ::sleep(600);  // busy elsewhere: never calls combine
        }
        combine(ctx, b, 8);
      }
    } else {
      std::fprintf(stderr, "moe_faults: unknown mode '%s' (topk_mismatch, skip_combine)\n",
                   mode.c_str());
      return 2;
    }
  } catch (const Refused& e) {
    std::fprintf(stderr, "PE %d: refused: %s\n", me, e.what());
    return 3;
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
