// One global set of tokens and experts, spread over however many PEs run this: token t lives on
// PE t / (T / P), expert e on PE e / (E / P). Writes the combined outputs of all tokens (gathered
// on PE 0) to a file, which determinism.sh compares byte for byte across PE counts, worker
// counts and data planes, and with the rows read in the receive window ("window": dispatch
// leaves them there, the experts overwrite them in place, combine reads them there).
//   moe_determinism OUT_FILE SEED VECTOR_WORKERS classic|double|window
#include <shmem.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "moe/moe.hpp"

namespace {

constexpr int kTokens = 48, kExperts = 8, kTopk = 4, kHidden = 40;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(mix(seed ^ mix(a * 1000003 + b)) >> 11) * 0x1p-53;
}

int run(const char* out_file, std::uint64_t seed, int workers, bool double_plane, bool window) {
  using namespace shmoe::moe;
  const int P = shmem_n_pes(), me = shmem_my_pe();
  if (kTokens % P != 0 || kExperts % P != 0) {
    std::fprintf(stderr, "PE count %d must divide %d tokens and %d experts\n", P, kTokens,
                 kExperts);
    return 2;
  }
  const int bs = kTokens / P, first = me * bs;
  const DType dt = DType::kBFloat16;
  const std::size_t row = kHidden * dtype_size(dt);

  MoeConfig cfg;
  cfg.experts_per_pe = kExperts / P;
  cfg.max_bs = bs;
  cfg.hidden = kHidden;
  cfg.topk = kTopk;
  cfg.dtype = dt;
  cfg.workers = {0, workers};
  cfg.doubleplane_threshold = 2 * row;  // small, so the copy engine really takes segments
  MoeBuffer ctx(cfg);

  // The global token t's data, routing and weights depend on t alone, never on P.
  std::vector<std::uint16_t> x(static_cast<std::size_t>(bs) * kHidden);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(bs) * kTopk);
  std::vector<float> scales(ids.size());
  for (int i = 0; i < bs; ++i) {
    const int t = first + i;
    for (int j = 0; j < kHidden; ++j) {
      store_f32(dt, x.data(), static_cast<std::size_t>(i) * kHidden + j,
                static_cast<float>(unit(seed, t, j) * 8 - 4));
    }
    for (int k = 0; k < kTopk; ++k) {
      ids[i * kTopk + k] = (static_cast<int>(mix(seed + t) % kExperts) + 3 * k) % kExperts;
      scales[i * kTopk + k] = static_cast<float>(unit(seed, t, 1000 + k));
    }
  }
  const std::size_t cap = ctx.recv_capacity();
  std::vector<std::byte> expand_buffer(window ? 0 : cap * row),
      expert_buffer(window ? 0 : cap * row), out(static_cast<std::size_t>(bs) * row);
  std::byte* const expand =
      window ? static_cast<std::byte*>(ctx.receive_window()) : expand_buffer.data();
  std::byte* const expert_out = window ? expand : expert_buffer.data();
  std::vector<std::int32_t> assist(cap * 3), recv(static_cast<std::size_t>(P) * cfg.experts_per_pe),
      nums(cfg.experts_per_pe);
  DispatchArgs din{x.data(), ids.data(), scales.data(), bs};
  DispatchOutputs dout{expand, assist.data(), recv.data(), nums.data(), nullptr};
  const int rows =
      double_plane ? dispatch_doubleplane(ctx, din, dout) : dispatch_classic(ctx, din, dout);
  // Each expert scales by its own weight, a function of the global expert id alone.
  int block = 0;
  for (int r = 0; r < rows; ++r) {
    while (recv[block] <= r) ++block;
    const int expert = me * cfg.experts_per_pe + block / P;
    for (int j = 0; j < kHidden; ++j) {
      store_f32(dt, expert_out + r * row, j,
                load_f32(dt, expand + r * row, j) * (0.75f + 0.125f * expert));
    }
  }
  CombineArgs cin{expert_out, assist.data(), recv.data(), ids.data(), scales.data(),
                  bs,         out.data()};
  double_plane ? combine_doubleplane(ctx, cin) : combine_classic(ctx, cin);

  auto* all = static_cast<std::byte*>(shmem_malloc(kTokens * row));
  shmem_putmem(all + first * row, out.data(), bs * row, 0);
  shmem_barrier_all();
  int status = 0;
  if (me == 0) {
    FILE* f = std::fopen(out_file, "wb");
    status = f == nullptr || std::fwrite(all, row, kTokens, f) != kTokens;
    if (f) std::fclose(f);
    bool any_nonzero = false;
    for (std::size_t i = 0; i < kTokens * row; ++i) any_nonzero |= all[i] != std::byte{0};
    if (!any_nonzero) {
      std::fprintf(stderr, "every output is zero: the combine did nothing\n");
      status = 1;
    }
  }
  shmem_barrier_all();
  shmem_free(all);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr,
                 "usage: moe_determinism OUT_FILE SEED VECTOR_WORKERS classic|double|window\n");
    return 2;
  }
  int provided;
  shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
  // The context lives inside run(): it must be gone (collectively) before finalize.
  const std::string plane = argv[4];
  const int status = run(argv[1], std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]),
                         plane == "double", plane == "window");
  shmem_finalize();
  return status;
}
