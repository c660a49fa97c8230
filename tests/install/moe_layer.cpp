// The MoE C++ API (shmoe/moe.hpp) from a program built outside shmoe, against references each PE
// computes itself from the routing every PE uses (a pure function of PE, token and slot):
//   - MoeBuffer: dispatch on the double plane, an "expert" that scales each row by its expert's
//     number plus one, combine; the combined rows exactly; a refused call throws shmoe::Error;
//   - MegaMoE: weights and tokens of the form k/8 (exact in MX E4M3 and BF16), checked
//     against the layer in fp64 (SwiGLU(x W1^T) W2^T, weighted), within the FP8 tolerance the
//     Python tests use (0.05 |ref| + 0.75 row RMS, and 10% relative RMS over all outputs), and
//     the per-expert row counts exactly.
// Prints "PE r/N: ok" when all matched.
#include <shmem.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <shmoe/moe.hpp>
#include <string>
#include <vector>

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok && failures++ < 10) std::fprintf(stderr, "PE %d: %s\n", shmem_my_pe(), what.c_str());
}

// Routing of token t of PE pe, slot k; -1 for one slot, to cover "no expert".
int expert_of(int pe, int t, int k, int experts) {
  return (t == 2 && k == 1) ? -1 : (pe * 5 + t * 3 + k) % experts;
}
float scale_of(int k) {
  return 0.75f - 0.25f * static_cast<float>(k);
}
// k/8 for k in -8..8: exact in MX E4M3 (at most 3 significant bits, below 448 once scaled).
float eighths(int a) {
  return static_cast<float>(((a % 17) + 17) % 17 - 8) / 8.0f;
}

std::uint16_t to_bf16(float f) {  // exact for the values used here
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}
double from_bf16(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void dispatch_and_combine(int me, int n) {
  constexpr int L = 2, kMaxBs = 4, kHidden = 16, kTopk = 2;
  const int experts = n * L, bs = 2 + me % 3;
  shmoe::MoeConfig config;
  config.num_experts_per_pe = L;
  config.max_tokens_per_pe = kMaxBs;
  config.hidden = kHidden;
  config.num_topk = kTopk;
  config.dtype = SHMOE_DTYPE_FLOAT32;
  shmoe::MoeBuffer buffer(config);

  std::vector<float> x(kMaxBs * kHidden), scales(kMaxBs * kTopk), out(kMaxBs * kHidden);
  std::vector<std::int32_t> ids(kMaxBs * kTopk);
  for (int t = 0; t < bs; ++t) {
    for (int j = 0; j < kHidden; ++j) x[t * kHidden + j] = static_cast<float>(100 * me + 7 * t + j);
    for (int k = 0; k < kTopk; ++k) {
      ids[t * kTopk + k] = expert_of(me, t, k, experts);
      scales[t * kTopk + k] = scale_of(k);
    }
  }
  const std::size_t cap = buffer.recv_capacity();
  std::vector<float> expand_x(cap * kHidden);
  std::vector<std::int32_t> assist(cap * 3), recv_count(L * n), token_nums(L);
  shmoe::DispatchArgs args;
  args.plane = SHMOE_PLANE_DOUBLE;
  args.x = x.data();
  args.topk_idx = ids.data();
  args.topk_weights = scales.data();
  args.num_tokens = bs;
  shmoe::DispatchOutputs outs;
  outs.recv_x = expand_x.data();
  outs.recv_src_info = assist.data();
  outs.recv_layout_prefix = recv_count.data();
  outs.num_recv_tokens_per_expert = token_nums.data();
  const int rows = buffer.dispatch(args, outs);
  int begin = 0;
  for (int b = 0; b < L * n; ++b) {
    const int expert = me * L + b / n;
    for (int r = begin; r < recv_count[b] && r < rows; ++r)
      for (int j = 0; j < kHidden; ++j) expand_x[r * kHidden + j] *= static_cast<float>(expert + 1);
    begin = recv_count[b];
  }
  shmoe::CombineArgs combine;
  combine.plane = SHMOE_PLANE_DOUBLE;
  combine.x = expand_x.data();
  combine.src_info = assist.data();
  combine.layout_prefix = recv_count.data();
  combine.topk_idx = ids.data();
  combine.topk_weights = scales.data();
  combine.num_tokens = bs;
  combine.combined_x = out.data();
  buffer.combine(combine);
  for (int t = 0; t < bs; ++t) {
    for (int j = 0; j < kHidden; ++j) {
      float want = 0;
      for (int k = 0; k < kTopk; ++k) {
        const int e = expert_of(me, t, k, experts);
        if (e >= 0) want += scale_of(k) * static_cast<float>(e + 1) * x[t * kHidden + j];
      }
      check(out[t * kHidden + j] == want,
            "combined row " + std::to_string(t) + " element " + std::to_string(j) + ": " +
                std::to_string(out[t * kHidden + j]) + ", want " + std::to_string(want));
    }
  }

  const std::vector<double> waits = buffer.last_source_waits();
  check(waits.size() == static_cast<std::size_t>(n),
        "last_source_waits gave " + std::to_string(waits.size()) + " values for " +
            std::to_string(n) + " PEs");
  for (const double us : waits) check(us >= 0, "a negative wait: " + std::to_string(us));

  try {
    args.num_tokens = kMaxBs + 1;
    buffer.dispatch(args, outs);
    check(false, "a dispatch of num_tokens > max_tokens_per_pe was not refused");
  } catch (const shmoe::Error& e) {
    check(e.status() == SHMOE_MOE_REFUSED, "the refusal's status is not SHMOE_MOE_REFUSED");
    check(std::strstr(e.what(), "num_tokens") != nullptr,
          std::string("the refusal names no num_tokens: ") + e.what());
  }
}

void mega_layer(int me, int n) {
  constexpr int L = 2, T = 6, D = 64, F = 64, kTopk = 2;
  const int experts = n * L;
  shmoe::MegaMoEConfig config;
  config.max_tokens_per_pe = T;
  config.hidden = D;
  config.intermediate_hidden = F;
  config.num_topk = kTopk;
  config.num_experts_per_pe = L;
  config.format = SHMOE_FP8_E4M3;

  // Expert e: w1 [F][D], w2 [D][F/2], of the form k/8.
  auto w1_of = [](int e, int f, int d) { return eighths(3 * f + 5 * d + 7 * e); };
  auto w2_of = [](int e, int d, int f) { return eighths(2 * d + 7 * f + 3 * e + 1); };
  std::vector<std::vector<std::uint8_t>> w1_rows, w2_rows;
  std::vector<const std::uint8_t*> w1, w2;
  for (int l = 0; l < L; ++l) {
    const int e = me * L + l;
    std::vector<float> a(F * D), b(D * (F / 2));
    for (int f = 0; f < F; ++f)
      for (int d = 0; d < D; ++d) a[f * D + d] = w1_of(e, f, d);
    for (int d = 0; d < D; ++d)
      for (int f = 0; f < F / 2; ++f) b[d * (F / 2) + f] = w2_of(e, d, f);
    w1_rows.push_back(shmoe::mx_quantize_rows(a.data(), F, D, SHMOE_FP8_E4M3));
    w2_rows.push_back(shmoe::mx_quantize_rows(b.data(), D, F / 2, SHMOE_FP8_E4M3));
  }
  for (int l = 0; l < L; ++l) {
    w1.push_back(w1_rows[l].data());
    w2.push_back(w2_rows[l].data());
  }
  shmoe::MegaMoEConfig bad = config;
  bad.weights = static_cast<shmoe_mega_weights_t>(7);
  try {
    shmoe::MegaMoE refused(bad, w1, w2);
    check(false, "a MegaMoE with weights=7 was not refused");
  } catch (const shmoe::Error& e) {
    check(std::strstr(e.what(), "weights=7") != nullptr,
          std::string("the refusal does not name weights=7: ") + e.what());
  }
  // The bf16 form on odd PEs, FP8 on even ones (AUTO, the default, would pick bf16 here: 6
  // tokens x top-2 > 2 x 2 experts): each PE keeps its own experts as it likes.
  config.weights = me % 2 ? SHMOE_MEGA_WEIGHTS_BF16 : SHMOE_MEGA_WEIGHTS_FP8;
  shmoe::MegaMoE layer(config, w1, w2);

  const int tokens = T - me % 2;
  std::vector<std::uint16_t> x(T * D), y(T * D);
  std::vector<std::int32_t> ids(T * kTopk), counts(L);
  std::vector<float> weights(T * kTopk);
  auto x_of = [](int pe, int t, int d) { return eighths(11 * pe + 5 * t + 3 * d); };
  for (int t = 0; t < tokens; ++t) {
    for (int d = 0; d < D; ++d) x[t * D + d] = to_bf16(x_of(me, t, d));
    for (int k = 0; k < kTopk; ++k) {
      ids[t * kTopk + k] = expert_of(me, t, k, experts);
      weights[t * kTopk + k] = scale_of(k);
    }
  }
  layer.run({x.data(), ids.data(), weights.data(), tokens, y.data(), counts.data()});

  for (int l = 0; l < L; ++l) {
    int want = 0;
    for (int pe = 0; pe < n; ++pe)
      for (int t = 0; t < T - pe % 2; ++t)
        for (int k = 0; k < kTopk; ++k) want += expert_of(pe, t, k, experts) == me * L + l;
    check(counts[l] == want, "expert " + std::to_string(l) + " received " +
                                 std::to_string(counts[l]) + " rows, want " + std::to_string(want));
  }

  double err2 = 0, ref2 = 0;
  for (int t = 0; t < tokens; ++t) {
    std::vector<double> ref(D, 0.0);
    for (int k = 0; k < kTopk; ++k) {
      const int e = expert_of(me, t, k, experts);
      if (e < 0) continue;
      std::vector<double> h(F), a(F / 2);
      for (int f = 0; f < F; ++f) {
        h[f] = 0;
        for (int d = 0; d < D; ++d) h[f] += double{w1_of(e, f, d)} * x_of(me, t, d);
      }
      for (int f = 0; f < F / 2; ++f) a[f] = h[f] / (1 + std::exp(-h[f])) * h[F / 2 + f];
      for (int d = 0; d < D; ++d) {
        double s = 0;
        for (int f = 0; f < F / 2; ++f) s += double{w2_of(e, d, f)} * a[f];
        ref[d] += scale_of(k) * s;
      }
    }
    double rms = 0;
    for (double v : ref) rms += v * v;
    rms = std::sqrt(rms / D);
    for (int d = 0; d < D; ++d) {
      const double got = from_bf16(y[t * D + d]), err = std::fabs(got - ref[d]);
      err2 += err * err;
      ref2 += ref[d] * ref[d];
      check(err <= 0.05 * std::fabs(ref[d]) + 0.75 * rms,
            "MegaMoE y[" + std::to_string(t) + "][" + std::to_string(d) +
                "] = " + std::to_string(got) + ", reference " + std::to_string(ref[d]));
    }
  }
  check(ref2 > 0, "the MegaMoE reference is all zero");
  check(err2 <= 0.01 * ref2,
        "MegaMoE relative RMS error " + std::to_string(std::sqrt(err2 / ref2)) + " is above 10%");
}

}  // namespace

int main() {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  try {
    dispatch_and_combine(me, n);
    mega_layer(me, n);
  } catch (const shmoe::Error& e) {
    std::fprintf(stderr, "PE %d: shmoe::Error (status %d): %s\n", me, e.status(), e.what());
    shmem_global_exit(1);
  }
  if (failures == 0) std::printf("PE %d/%d: ok\n", me, n);
  shmem_finalize();
  return failures != 0;
}
