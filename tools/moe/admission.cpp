#include "admission.hpp"

#include <fmt/format.h>

#include <initializer_list>

#include "common/bytes.hpp"
#include "common/output_path.hpp"
#include "common/settings.hpp"
#include "mega_run.hpp"
#include "run.hpp"

namespace shmoe::tools {
namespace {

// What every PE process holds whatever the shape: libraries (UCX, oneDNN), thread stacks, the
// runtime's state. And what the runtime adds to the heap it is asked for (its
// barrier flags and team scratch, about 2 MiB).
constexpr std::uint64_t kProcessBaseline = 64 * kMiB;
constexpr std::uint64_t kRuntimeHeapState = 4 * kMiB;

std::uint64_t product(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t p = 1;
  for (auto f : factors) p = saturating_mul(p, f);
  return p;
}

std::uint64_t sum(std::initializer_list<std::uint64_t> terms) {
  std::uint64_t s = 0;
  for (auto t : terms) s = saturating_add(s, t);
  return s;
}

std::uint64_t u64(std::int64_t v) {
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

// The largest value in [0, upper) for which `fits` holds (it holds for all smaller ones), or -1.
template <typename Fits>
std::int64_t largest_fitting(std::int64_t upper, Fits fits) {
  std::int64_t lo = -1, hi = upper;  // fits(lo) (or lo is -1), !fits(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

MachineMemory this_machine() {
  return {available_memory_bytes(), file_system_space(kShmDir)};
}

std::optional<std::uint64_t> user_heap_size() {
  try {
    const settings::SymmetricSize size = settings::symmetric_size_in_force();
    if (size.text.empty()) return std::nullopt;
    return size.bytes;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

MemoryNeed moe_case_need(const MoeRunOptions& o, const MoeCase& c,
                         std::optional<std::uint64_t> heap) {
  const std::uint64_t P = u64(o.pes), L = u64(c.experts_per_pe), bs = u64(c.bs);
  const std::uint64_t row = product({u64(c.hidden), dtype_size(c.dtype)});
  const std::uint64_t cap = o.max_recv_rows ? o.max_recv_rows : product({P, bs, u64(c.topk)});
  const std::uint64_t routes = product({bs, u64(c.topk), 8});  // expert ids and scales
  MemoryNeed n;
  n.windows = MoeBuffer::symmetric_bytes(moe_config(o, c), o.pes);
  n.heap = heap.value_or(symmetric_bytes_for(o, c));
  n.heap_from_user = heap.has_value();
  // Every PE's inputs (each PE regenerates all of them for its golden data) and a copy of its
  // own; the receive buffers (expand_x, expert_out, assist_info, scales) and x_out.
  const std::uint64_t inputs = product({P + 1, sum({product({bs, row}), routes})});
  const std::uint64_t buffers =
      sum({product({cap, 2 * row + 16}), product({bs, row}), product({P + 1, L, 4})});
  // Golden dispatch outputs grow by appending: up to twice the received rows.
  const std::uint64_t golden_dispatch = op_is_combine(o.op) ? 0 : product({2, cap, sum({row, 16})});
  const bool combines = op_is_combine(o.op) || o.op == MoeOp::kPipeline;
  const std::uint64_t golden_combine = combines ? product({bs, u64(c.hidden), 16}) : 0;
  n.host = sum({inputs, buffers, golden_dispatch, golden_combine, kProcessBaseline});
  return n;
}

MemoryNeed mega_need(const MegaOptions& o, std::optional<std::uint64_t> heap) {
  const MegaMoEConfig cfg = mega_config(o);
  const std::uint64_t P = u64(o.pes), L = u64(o.experts_per_pe), T = u64(o.tokens);
  const std::uint64_t D = u64(o.model_dim), F = u64(o.ffn_dim), half = F / 2, K = u64(o.topk);
  const std::uint64_t token_row = mx_row_bytes(o.model_dim), act_row = mx_row_bytes(o.ffn_dim / 2);
  const std::uint64_t cap = o.max_received_tokens ? o.max_received_tokens : product({P, T, K});
  const std::uint64_t matrix = u64(o.matrix_workers > 0 ? o.matrix_workers : 1);
  const std::uint64_t wave = u64(o.wave_rows != 0 ? o.wave_rows : 512);  // 0: automatic, <= 512
  const bool unfused = o.compare || o.unfused;
  MemoryNeed n;
  n.windows =
      unfused ? MegaMoE::unfused_symmetric_bytes(cfg, o.pes) : MegaMoE::symmetric_bytes(cfg, o.pes);
  n.heap = heap.value_or(mega_symmetric_bytes(o));
  n.heap_from_user = heap.has_value();
  // One expert's weights dequantized to fp32 (the operator's copy, and the reference's).
  const std::uint64_t fp32_weights = product({4, D, sum({F, half})});
  // Every PE generates every expert (the reference needs those its tokens route to): MX codes
  // and fp32; the operator dequantizes its own L.
  const std::uint64_t experts =
      sum({product({P, L, sum({product({F, token_row}), product({D, act_row}), fp32_weights})}),
           product({L, fp32_weights})});
  // Hand-over slots (two tiles in flight per matrix worker) and GEMM scratch.
  const std::uint64_t tiles = product(
      {matrix, wave, sum({product({2, sum({4 * F, act_row, 2 * D})}), 4 * sum({half, D})})});
  // Every PE's tokens and routing, and a copy of its own; y twice; the fp64 reference (y and
  // slack, one at a time); its quantized tokens.
  const std::uint64_t tokens =
      sum({product({P + 1, sum({product({T, 2 * D}), product({T, K, 8})})}), product({T, D, 4}),
           product({T, D, 16}), product({T, token_row})});
  // The unfused chain's intermediate tensors, for every row it can receive.
  const std::uint64_t chain =
      unfused ? product({cap, sum({token_row, 12, 4 * F, act_row, 2 * D})}) : 0;
  n.host = sum({experts, tiles, tokens, chain, kProcessBaseline});
  return n;
}

std::string shortfall(const MemoryNeed& need, int pes, const MachineMemory& m) {
  const std::uint64_t P = u64(pes);
  std::string why;
  const std::uint64_t shm = product({P, sum({need.heap, kRuntimeHeapState})});
  if (m.shm && !need.heap_from_user && shm > m.shm->free) {
    why = fmt::format("{} PEs x {} of symmetric heap = {} in {}, which has {} free", pes,
                      human_bytes(need.heap), human_bytes(shm), kShmDir, human_bytes(m.shm->free));
  }
  const std::uint64_t per_pe = sum({need.windows, need.host});
  const std::uint64_t memory = product({P, per_pe});
  if (m.available && memory > *m.available) {
    why += fmt::format(
        "{}{} PEs x {} ({} of operator windows in the symmetric heap + {} of buffers, inputs, "
        "golden data and weights) = {} of memory, but this machine has {} available "
        "(MemAvailable)",
        why.empty() ? "" : "; ", pes, human_bytes(per_pe), human_bytes(need.windows),
        human_bytes(need.host), human_bytes(memory), human_bytes(*m.available));
  }
  return why;
}

std::string refuse_moe_run(const MoeRunOptions& o, std::optional<std::uint64_t> heap,
                           const MachineMemory& m) {
  for (const MoeCase& c : o.cases) {
    const std::string why = shortfall(moe_case_need(o, c, heap), o.pes, m);
    if (why.empty()) continue;
    const std::int64_t bs = largest_fitting(c.bs, [&](std::int64_t b) {
      MoeCase smaller = c;
      smaller.bs = static_cast<int>(b);
      return shortfall(moe_case_need(o, smaller, heap), o.pes, m).empty();
    });
    return fmt::format(
        "{} --pes {} --bs {} --hidden {} --topk {} --experts-per-pe {} --dtype {} does not fit "
        "in this machine's memory: {}; {}",
        op_name(o.op), o.pes, c.bs, c.hidden, c.topk, c.experts_per_pe, dtype_name(c.dtype), why,
        bs >= 0 ? fmt::format("the largest --bs that fits is {}", bs)
                : std::string("no --bs fits: use fewer --pes or a smaller --hidden"));
  }
  return {};
}

std::string refuse_mega_run(const MegaOptions& o, std::optional<std::uint64_t> heap,
                            const MachineMemory& m) {
  const std::string why = shortfall(mega_need(o, heap), o.pes, m);
  if (why.empty()) return {};
  const std::int64_t tokens = largest_fitting(o.tokens, [&](std::int64_t t) {
    MegaOptions smaller = o;
    smaller.tokens = static_cast<int>(t);
    return shortfall(mega_need(smaller, heap), o.pes, m).empty();
  });
  return fmt::format(
      "--pes {} --tokens {} --model-dim {} --ffn-dim {} --topk {} --experts-per-pe {}{} does not "
      "fit in this machine's memory: {}; {}",
      o.pes, o.tokens, o.model_dim, o.ffn_dim, o.topk, o.experts_per_pe,
      o.compare   ? " --compare"
      : o.unfused ? " --unfused"
                  : "",
      why,
      tokens >= 0 ? fmt::format("the largest --tokens (TOKEN_COUNT) that fits is {}", tokens)
                  : std::string("no --tokens fits: the experts' weights alone are too large; "
                                "lower --model-dim, --ffn-dim or --experts-per-pe, or use fewer "
                                "--pes"));
}

std::string refuse_moe_outputs(const MoeRunOptions& o) {
  return o.perf ? why_not_writable_directory("--output-dir", o.output_dir) : std::string();
}

std::string refuse_mega_outputs(const MegaOptions& o) {
  if (!o.trace.empty()) {
    if (std::string why = why_not_writable_file("--trace", o.trace); !why.empty()) return why;
  }
  return o.csv.empty() ? std::string() : why_not_writable_file("--csv", o.csv);
}

}  // namespace shmoe::tools
