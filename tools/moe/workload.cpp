#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "random_stream.hpp"

namespace shmoe::tools {
namespace {

int pick_expert(Stream& r, const MoeRunOptions& o, int experts,
                const std::vector<double>& zipf_cdf) {
  if (o.routing == Routing::kZipf) {
    double u = r.uniform();
    auto it = std::lower_bound(zipf_cdf.begin(), zipf_cdf.end(), u);
    return std::min<int>(static_cast<int>(it - zipf_cdf.begin()), experts - 1);
  }
  return r.below(experts);
}

}  // namespace

PeInputs make_inputs(const MoeRunOptions& o, const MoeCase& c, std::uint64_t seed, int pe,
                     int n_pes) {
  PeInputs in;
  in.bs = pe >= n_pes - o.empty_pes ? 0 : c.bs;
  const int experts = n_pes * c.experts_per_pe;
  const std::size_t elem = dtype_size(c.dtype);
  in.x.resize(static_cast<std::size_t>(in.bs) * c.hidden * elem);
  Stream values(seed, pe, 1), routes(seed, pe, 2), weights(seed, pe, 3);
  for (std::size_t i = 0; i < static_cast<std::size_t>(in.bs) * c.hidden; ++i) {
    if (c.dtype == SHMOE_DTYPE_INT32) {
      std::int32_t v = static_cast<std::int32_t>(values.below(2001)) - 1000;
      std::memcpy(in.x.data() + 4 * i, &v, 4);
    } else {
      store_f32(c.dtype, in.x.data(), i, static_cast<float>(values.uniform() * 4.0 - 2.0));
    }
  }
  std::vector<double> zipf_cdf;
  if (o.routing == Routing::kZipf) {
    double total = 0;
    for (int e = 0; e < experts; ++e) zipf_cdf.push_back(total += 1.0 / std::pow(e + 1, o.zipf_s));
    for (auto& v : zipf_cdf) v /= total;
  }
  in.expert_ids.assign(static_cast<std::size_t>(in.bs) * c.topk, -1);
  in.scales.resize(in.expert_ids.size());
  for (int t = 0; t < in.bs; ++t) {
    std::int32_t* ids = &in.expert_ids[static_cast<std::size_t>(t) * c.topk];
    for (int k = 0; k < c.topk; ++k) {
      int e;
      do {
        e = (o.routing == Routing::kHot && k == 0) ? 0 : pick_expert(routes, o, experts, zipf_cdf);
      } while (std::find(ids, ids + k, e) != ids + k);
      ids[k] = e;
    }
    for (int k = 0; k < c.topk; ++k) {
      if (o.drop > 0 && routes.uniform() < o.drop) ids[k] = -1;
      in.scales[static_cast<std::size_t>(t) * c.topk + k] = static_cast<float>(weights.uniform());
    }
  }
  return in;
}

void expert_step(DType dtype, int expert, const void* in_row, void* out_row, int hidden) {
  const float w = 0.5f + 0.25f * static_cast<float>(expert % 7);
  for (int j = 0; j < hidden; ++j) store_f32(dtype, out_row, j, load_f32(dtype, in_row, j) * w);
}

DispatchGolden golden_dispatch(const std::vector<PeInputs>& all, const MoeCase& c, int me) {
  const int P = static_cast<int>(all.size()), L = c.experts_per_pe;
  const std::size_t row_bytes = static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
  DispatchGolden g;
  g.ep_recv_count.resize(static_cast<std::size_t>(L) * P);
  g.expert_token_nums.assign(L, 0);
  for (int le = 0; le < L; ++le) {
    const int expert = me * L + le;
    for (int src = 0; src < P; ++src) {
      const PeInputs& in = all[src];
      for (int t = 0; t < in.bs; ++t) {
        for (int k = 0; k < c.topk; ++k) {
          const std::size_t i = static_cast<std::size_t>(t) * c.topk + k;
          if (in.expert_ids[i] != expert) continue;
          const std::byte* row = in.x.data() + static_cast<std::size_t>(t) * row_bytes;
          g.expand_x.insert(g.expand_x.end(), row, row + row_bytes);
          g.assist_info.insert(g.assist_info.end(), {src, t, k});
          g.expand_scales.push_back(in.scales[i]);
          ++g.rows;
          ++g.expert_token_nums[le];
        }
      }
      g.ep_recv_count[static_cast<std::size_t>(le) * P + src] = g.rows;
    }
  }
  return g;
}

void golden_combine(const PeInputs& mine, const MoeCase& c, std::vector<double>& value,
                    std::vector<double>& magnitude) {
  const std::size_t row_bytes = static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
  value.assign(static_cast<std::size_t>(mine.bs) * c.hidden, 0.0);
  magnitude.assign(value.size(), 0.0);
  std::vector<std::byte> y(row_bytes);
  for (int t = 0; t < mine.bs; ++t) {
    for (int k = 0; k < c.topk; ++k) {
      const std::size_t i = static_cast<std::size_t>(t) * c.topk + k;
      const int e = mine.expert_ids[i];
      if (e < 0) continue;
      expert_step(c.dtype, e, mine.x.data() + static_cast<std::size_t>(t) * row_bytes, y.data(),
                  c.hidden);
      for (int j = 0; j < c.hidden; ++j) {
        const double term = static_cast<double>(load_f32(c.dtype, y.data(), j)) * mine.scales[i];
        value[static_cast<std::size_t>(t) * c.hidden + j] += term;
        magnitude[static_cast<std::size_t>(t) * c.hidden + j] += std::fabs(term);
      }
    }
  }
}

double combine_tolerance(DType dtype, int topk, double magnitude) {
  const double accumulate = (topk + 1) * 0x1p-24 * magnitude;  // fp32 products and sums
  switch (dtype) {
    case SHMOE_DTYPE_INT32:
      return 0.5 + accumulate + 1e-9;
    case SHMOE_DTYPE_FLOAT16:
      return 0x1p-11 * magnitude + accumulate + 0x1p-24;  // + subnormal step
    case SHMOE_DTYPE_BFLOAT16:
      return 0x1p-8 * magnitude + accumulate + 1e-38;
    case SHMOE_DTYPE_FLOAT32:
      return accumulate + 1e-38;
    default:  // an MoE buffer carries only the four types above
      break;
  }
  return 0;
}

}  // namespace shmoe::tools
