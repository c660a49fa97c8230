// MoE dispatch/combine under random shapes: a fresh context per step (so creation and teardown
// are soaked too), a few back-to-back calls on it, every output compared exactly.
//
// Exactness: inputs are small integers, the expert adds (expert + 1), and the weights are 1 or 2
// (also 0.5 for float types), so every product and sum is exactly representable in float32,
// float16 and int32, whatever order combine adds in. Any difference is a real error.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "moe/moe.hpp"
#include "soak.hpp"

namespace shmoe::soak {
namespace {

using moe::DType;

// What one PE passes to one call; every PE can build every PE's inputs.
struct Inputs {
  int bs = 0;
  std::vector<std::byte> x;       // [bs, hidden] of dtype
  std::vector<std::int32_t> ids;  // [bs, topk], distinct experts or -1
  std::vector<float> scales;      // [bs, topk]
};

struct Shape {
  moe::MoeConfig cfg;
  bool double_plane = false;
  int calls = 1;
};

Shape draw_shape(Soak& s) {
  static constexpr DType kTypes[] = {DType::kInt32, DType::kFloat32, DType::kFloat16};
  Shape sh;
  moe::MoeConfig& c = sh.cfg;
  c.experts_per_pe = static_cast<int>(s.draw(1, 3));
  c.max_bs = static_cast<int>(s.draw(1, 24));
  c.hidden = static_cast<int>(s.draw(1, 48));
  c.topk = static_cast<int>(s.draw(1, std::min<std::uint64_t>(4, s.n * c.experts_per_pe)));
  c.dtype = kTypes[s.draw(0, 2)];
  c.workers = {0, static_cast<int>(s.draw(1, 2))};
  sh.double_plane = s.draw(0, 3) == 0;
  c.doubleplane_threshold = 64;  // small, so the copy engine takes part
  sh.calls = static_cast<int>(s.draw(1, 4));
  return sh;
}

std::size_t row_bytes(const moe::MoeConfig& c) {
  return static_cast<std::size_t>(c.hidden) * moe::dtype_size(c.dtype);
}

// `topk` distinct experts out of E (a partial Fisher-Yates shuffle), some slots dropped (-1).
void route_token(const Soak& s, const moe::MoeConfig& c, int E, std::uint64_t key,
                 std::int32_t* ids) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) pool[static_cast<std::size_t>(e)] = e;
  for (int k = 0; k < c.topk; ++k) {
    const std::uint64_t h = s.hash(key, 0x1D5, static_cast<std::uint64_t>(k));
    const auto j =
        static_cast<std::size_t>(k + static_cast<int>(h % static_cast<std::uint64_t>(E - k)));
    std::swap(pool[static_cast<std::size_t>(k)], pool[j]);
    ids[k] = (h >> 40) % 10 == 0 ? -1 : pool[static_cast<std::size_t>(k)];
  }
}

Inputs make_inputs(const Soak& s, const moe::MoeConfig& c, int call, int pe) {
  Inputs in;
  const auto key = static_cast<std::uint64_t>(call) << 32 | static_cast<std::uint64_t>(pe);
  in.bs = static_cast<int>(s.hash(key, 0xB5) % static_cast<std::uint64_t>(c.max_bs + 1));
  const int E = s.n * c.experts_per_pe;
  in.x.resize(static_cast<std::size_t>(in.bs) * row_bytes(c));
  in.ids.resize(static_cast<std::size_t>(in.bs) * c.topk);
  in.scales.resize(in.ids.size());
  for (int t = 0; t < in.bs; ++t) {
    const std::uint64_t tk = key * 4096 + static_cast<std::uint64_t>(t);
    for (int j = 0; j < c.hidden; ++j) {
      const auto v = static_cast<float>(static_cast<int>(s.hash(tk, 0x71, j) % 17) - 8);
      moe::store_f32(c.dtype, in.x.data() + t * row_bytes(c), static_cast<std::size_t>(j), v);
    }
    route_token(s, c, E, tk, in.ids.data() + static_cast<std::size_t>(t) * c.topk);
    for (int k = 0; k < c.topk; ++k) {
      const std::uint64_t h = s.hash(tk, 0x5CA, static_cast<std::uint64_t>(k)) % 3;
      const float w = c.dtype == DType::kInt32 ? (h == 0 ? 2.0f : 1.0f)
                                               : (h == 0   ? 2.0f
                                                  : h == 1 ? 1.0f
                                                           : 0.5f);
      in.scales[static_cast<std::size_t>(t) * c.topk + k] = w;
    }
  }
  return in;
}

// The rows PE `me` must receive, per (local expert, source PE) block, as (token, slot) pairs in
// the order the block's rows are expected: by token, then slot.
struct Expected {
  std::vector<std::vector<std::pair<int, int>>> blocks;  // [le * n + src]
  int rows = 0;
};

Expected expected_dispatch(const Soak& s, const moe::MoeConfig& c, const std::vector<Inputs>& all) {
  const int L = c.experts_per_pe;
  Expected want;
  want.blocks.resize(static_cast<std::size_t>(L) * s.n);
  for (int src = 0; src < s.n; ++src) {
    const Inputs& in = all[static_cast<std::size_t>(src)];
    for (int t = 0; t < in.bs; ++t) {
      for (int k = 0; k < c.topk; ++k) {
        const int e = in.ids[static_cast<std::size_t>(t) * c.topk + k];
        if (e < 0 || e / L != s.me) continue;
        want.blocks[static_cast<std::size_t>((e % L) * s.n + src)].push_back({t, k});
        ++want.rows;
      }
    }
  }
  return want;
}

struct Outputs {
  std::vector<std::byte> expand_x, expert_out, x_out;
  std::vector<std::int32_t> assist, recv, nums;
  std::vector<float> scales;
};

void check_counts(const Soak& s, const moe::MoeConfig& c, const Expected& want, const Outputs& o,
                  int rows) {
  if (rows != want.rows)
    s.fail("moe", fmt::format("dispatch received {} rows, expected {}", rows, want.rows));
  int prefix = 0;
  for (std::size_t b = 0; b < want.blocks.size(); ++b) {
    prefix += static_cast<int>(want.blocks[b].size());
    if (o.recv[b] != prefix) {
      s.fail("moe", fmt::format("ep_recv_count[{}] (expert {}, source PE {}) is {}, expected {}", b,
                                b / s.n, b % s.n, o.recv[b], prefix));
    }
  }
  for (int le = 0; le < c.experts_per_pe; ++le) {
    int n = 0;
    for (int src = 0; src < s.n; ++src)
      n += static_cast<int>(want.blocks[static_cast<std::size_t>(le * s.n + src)].size());
    if (o.nums[static_cast<std::size_t>(le)] != n) {
      s.fail("moe", fmt::format("expert_token_nums[{}] is {}, expected {}", le,
                                o.nums[static_cast<std::size_t>(le)], n));
    }
  }
}

// Every row of a block must be one of the block's expected (token, slot) pairs, each exactly
// once, with the token's data and weight. (Within a block the order is the operator's choice.)
void check_rows(const Soak& s, const moe::MoeConfig& c, const Expected& want,
                const std::vector<Inputs>& all, const Outputs& o) {
  const std::size_t rb = row_bytes(c);
  int row = 0;
  for (std::size_t b = 0; b < want.blocks.size(); ++b) {
    const int src = static_cast<int>(b % static_cast<std::size_t>(s.n));
    std::vector<std::pair<int, int>> got;
    for (std::size_t i = 0; i < want.blocks[b].size(); ++i, ++row) {
      const std::int32_t* a = &o.assist[static_cast<std::size_t>(row) * 3];
      if (a[0] != src) {
        s.fail("moe", fmt::format("row {} names source PE {}, expected {}", row, a[0], src));
      }
      got.push_back({a[1], a[2]});
      const Inputs& in = all[static_cast<std::size_t>(src)];
      if (a[1] < 0 || a[1] >= in.bs || a[2] < 0 || a[2] >= c.topk) {
        s.fail("moe", fmt::format("row {} names token {} slot {} of PE {} (bs {})", row, a[1], a[2],
                                  src, in.bs));
      }
      if (std::memcmp(o.expand_x.data() + row * rb, in.x.data() + a[1] * rb, rb) != 0) {
        s.fail("moe", fmt::format("row {} (PE {} token {}) has the wrong data", row, src, a[1]));
      }
      const float w = in.scales[static_cast<std::size_t>(a[1]) * c.topk + a[2]];
      if (o.scales[static_cast<std::size_t>(row)] != w) {
        s.fail("moe", fmt::format("row {} carries weight {}, expected {}", row,
                                  o.scales[static_cast<std::size_t>(row)], w));
      }
    }
    std::vector<std::pair<int, int>> expected = want.blocks[b];
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    if (got != expected) {
      s.fail("moe", fmt::format("block {} (expert {}, PE {}) holds other (token, slot) rows than "
                                "routed there",
                                b, b / s.n, src));
    }
  }
}

// The experts' work: add (global expert + 1), exactly, in the row's own type.
void run_experts(const Soak& s, const moe::MoeConfig& c, Outputs& o, int rows) {
  const std::size_t rb = row_bytes(c);
  int block = 0;
  for (int r = 0; r < rows; ++r) {
    while (o.recv[static_cast<std::size_t>(block)] <= r) ++block;
    const int expert = s.me * c.experts_per_pe + block / s.n;
    for (int j = 0; j < c.hidden; ++j) {
      const float v = moe::load_f32(c.dtype, o.expand_x.data() + r * rb, j);
      moe::store_f32(c.dtype, o.expert_out.data() + r * rb, j, v + static_cast<float>(expert + 1));
    }
  }
}

void check_combine(const Soak& s, const moe::MoeConfig& c, const Inputs& mine, const Outputs& o) {
  const std::size_t rb = row_bytes(c);
  for (int t = 0; t < mine.bs; ++t) {
    for (int j = 0; j < c.hidden; ++j) {
      float want = 0;
      const float x = moe::load_f32(c.dtype, mine.x.data() + t * rb, j);
      for (int k = 0; k < c.topk; ++k) {
        const std::size_t i = static_cast<std::size_t>(t) * c.topk + k;
        if (mine.ids[i] >= 0) want += mine.scales[i] * (x + static_cast<float>(mine.ids[i] + 1));
      }
      const float got = moe::load_f32(c.dtype, o.x_out.data() + t * rb, j);
      if (got != want) {
        s.fail("moe", fmt::format("combine x_out[{}][{}] is {}, expected {} ({} hidden, topk {})",
                                  t, j, got, want, c.hidden, c.topk));
      }
    }
  }
}

Outputs make_outputs(const moe::MoeBuffer& ctx, const moe::MoeConfig& c, int n) {
  const std::size_t cap = ctx.recv_capacity(), rb = row_bytes(c);
  Outputs o;
  o.expand_x.resize(cap * rb);
  o.expert_out.resize(cap * rb);
  o.x_out.resize(static_cast<std::size_t>(c.max_bs) * rb);
  o.assist.resize(cap * 3);
  o.recv.resize(static_cast<std::size_t>(n) * c.experts_per_pe);
  o.nums.resize(static_cast<std::size_t>(c.experts_per_pe));
  o.scales.resize(cap);
  return o;
}

void one_call(Soak& s, moe::MoeBuffer& ctx, const Shape& sh, int call, Outputs& o) {
  const moe::MoeConfig& c = sh.cfg;
  std::vector<Inputs> all;
  for (int pe = 0; pe < s.n; ++pe) all.push_back(make_inputs(s, c, call, pe));
  const Inputs& mine = all[static_cast<std::size_t>(s.me)];
  moe::DispatchArgs da{mine.x.data(), mine.ids.data(), mine.scales.data(), mine.bs};
  moe::DispatchOutputs dout{o.expand_x.data(), o.assist.data(), o.recv.data(), o.nums.data(),
                            o.scales.data()};
  const int rows = sh.double_plane ? moe::dispatch_doubleplane(ctx, da, dout)
                                   : moe::dispatch_classic(ctx, da, dout);
  const Expected want = expected_dispatch(s, c, all);
  check_counts(s, c, want, o, rows);
  check_rows(s, c, want, all, o);
  run_experts(s, c, o, rows);
  moe::CombineArgs ca{o.expert_out.data(), o.assist.data(), o.recv.data(), mine.ids.data(),
                      mine.scales.data(),  mine.bs,         o.x_out.data()};
  sh.double_plane ? moe::combine_doubleplane(ctx, ca) : moe::combine_classic(ctx, ca);
  check_combine(s, c, mine, o);
}

}  // namespace

void step_moe(Soak& s) {
  const Shape sh = draw_shape(s);
  try {
    moe::MoeBuffer ctx(sh.cfg);
    Outputs o = make_outputs(ctx, sh.cfg, s.n);
    for (int call = 0; call < sh.calls; ++call) one_call(s, ctx, sh, call, o);
  } catch (const moe::Refused& e) {
    s.fail("moe", fmt::format("a valid call was refused: {}", e.what()));
  }
}

}  // namespace shmoe::soak
