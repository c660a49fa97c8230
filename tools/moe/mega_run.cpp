#include "mega_run.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "mega_report.hpp"
#include "mega_workload.hpp"
#include "moe/mega_moe.hpp"
#include "numeric/half.hpp"
#include "run.hpp"

namespace shmoe::tools {

namespace {

// The relative tolerance per format that the operator is held to.
double relative_tolerance(numeric::Fp8Format f) {
  return f == numeric::Fp8Format::kE4M3 ? 0.05 : 0.15;
}

// The floor of the check against the unquantized layer, as a fraction of the row's RMS: 12 unit
// roundoffs of the format (2^-4 for E4M3, 2^-3 for E5M2), i.e. 0.75 resp. 1.5 row RMS. Rounding
// tokens and activations to MX FP8 moves a correct layer's output by 5.5% RMS (E4M3) and 9.6% RMS
// (E5M2) from the unquantized one, and not independently per element: a token whose largest
// element saturates (E4M3's 448 is not a power of two) shifts its whole row. Measured worst
// error over 250k elements of rows of 32 and 64: 0.84 of 8 roundoffs; a floor of rtol times the
// row's largest |reference| failed good outputs by up to 2.2x. This check only bounds how far
// FP8 takes the layer from its ideal; the tight check is fp8_replay.
// Who applies SwiGLU and writes rows back under a resolved schedule, for the banner.
const char* schedule_text(moe::MegaSchedule s) {
  switch (s) {
    case moe::MegaSchedule::kOverlapped:
      return "vector workers (schedule overlapped)";
    case moe::MegaSchedule::kInline:
      return "matrix worker (schedule inline)";
    case moe::MegaSchedule::kSolo:
      return "calling thread, as every part (schedule solo)";
    case moe::MegaSchedule::kAuto:
      break;
  }
  return "?";
}

double ideal_floor(numeric::Fp8Format f) {
  return 12 * (f == numeric::Fp8Format::kE4M3 ? 0x1p-4 : 0x1p-3);
}

struct Verdict {
  bool ok = true;
  std::string detail;
  void fail(std::string why) {
    if (ok) detail = std::move(why);
    ok = false;
  }
};

// An element check: |y - expected| <= rel * |expected| + floor * (the row's RMS or max of
// |expected|).
struct NumericCheck {
  const char* name;
  double rel, floor;
  bool floor_of_max;
  Verdict verdict;
  double worst = 0;               // largest |error| / allowed
  double err_sq = 0, ref_sq = 0;  // for the relative RMS error

  void check(const std::vector<std::uint16_t>& y, const ReferenceLayer& ref, int D) {
    const std::vector<double>& expected = ref.y;
    const std::size_t rows = expected.size() / static_cast<std::size_t>(D);
    for (std::size_t t = 0; t < rows && verdict.ok; ++t) {
      double row_sq = 0, row_max = 0;
      for (int j = 0; j < D; ++j) {
        row_sq += expected[t * D + j] * expected[t * D + j];
        row_max = std::max(row_max, std::fabs(expected[t * D + j]));
      }
      const double row_rms = floor_of_max ? row_max : std::sqrt(row_sq / D);
      for (int j = 0; j < D; ++j) {
        const std::size_t i = t * D + j;
        const double got = numeric::bf16_to_float({y[i]});
        const double allowed = rel * std::fabs(expected[i]) + floor * row_rms + ref.slack[i];
        const double err = std::fabs(got - expected[i]);
        err_sq += err * err;
        ref_sq += expected[i] * expected[i];
        if (allowed > 0) worst = std::max(worst, err / allowed);
        if (!std::isfinite(got) || err > allowed) {
          return verdict.fail(
              fmt::format("{}: y[{}][{}] = {} but the fp64 reference is {} (|err| {:.3g} > {:.3g})",
                          name, t, j, got, expected[i], err, allowed));
        }
      }
    }
  }
  double rms_error() const { return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : 0; }
  std::string summary() const {
    return fmt::format(
        "{}: rms_err={:.3f}% worst err/allowed={:.3f} (allowed: {:.3g}*|ref| + "
        "{:.3g}*row_{})",
        name, 100 * rms_error(), worst, rel, floor, floor_of_max ? "max" : "rms");
  }
};

int run(const MegaOptions& o, std::uint64_t seed) {
  const int P = shmem_n_pes(), me = shmem_my_pe(), L = o.experts_per_pe;
  const moe::ExpertFfnShape shape{o.model_dim, o.ffn_dim, o.mode};
  // Experts are made when first needed: the operator needs this PE's, the reference those this
  // PE's tokens route to (at a real layer's shape, making all of them on every PE took 30 s).
  std::map<int, GeneratedExpert> experts;
  std::vector<const GeneratedExpert*> by_id(static_cast<std::size_t>(P) * L, nullptr);
  auto need = [&](int e) {
    if (by_id[e] == nullptr)
      by_id[e] = &experts.emplace(e, make_expert(shape, seed, e)).first->second;
  };
  moe::MegaMoEWeights weights;
  for (int e = 0; e < L; ++e) {
    need(me * L + e);
    weights.w1.push_back(by_id[me * L + e]->w1_rows.data());
    weights.w2.push_back(by_id[me * L + e]->w2_rows.data());
  }
  const moe::MegaMoEConfig cfg = mega_config(o);
  moe::MegaMoE op(cfg, weights);
  if (me == 0) {
    fmt::print(
        "mega: weights kept as {} ({} bytes on this PE); GEMMs on {}; SwiGLU and write-back by "
        "the {}\n",
        op.config().weights == moe::MegaWeights::kFp8 ? "fp8" : "bf16", op.weight_bytes(),
        op.gemm_engine(), schedule_text(op.config().schedule));
  }

  std::vector<std::uint16_t> y(static_cast<std::size_t>(o.tokens) * o.model_dim),
      y_unfused(y.size());
  std::vector<std::int32_t> counts(L), counts_unfused(L);
  Verdict v;
  const double rtol = relative_tolerance(o.mode);
  // The fp64 replay of the FP8 roundings differs from the operator by the BF16 roundings of each
  // expert's row and of the sum (2^-9 relative each, of terms that may cancel: hence a floor in
  // row RMS), plus the slack of activations that fp32 and fp64 may round to different FP8 codes
  // (see reference_layer). Measured worst: 0.41 of this bound.
  NumericCheck replay{"fp8_replay", 0x1p-7, 0.03, false, {}};
  NumericCheck ideal{"numeric_golden", rtol, ideal_floor(o.mode), false, {}};
  PeInputs mine;
  auto args_for = [&](const PeInputs& in, std::uint16_t* out, std::int32_t* cnt) {
    return moe::MegaMoEArgs{reinterpret_cast<const std::uint16_t*>(in.x.data()),
                            in.expert_ids.data(),
                            in.scales.data(),
                            in.bs,
                            out,
                            cnt};
  };
  for (int it = 0; it < o.iterations; ++it) {
    const std::uint64_t s = seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(it);
    std::vector<PeInputs> all;
    for (int pe = 0; pe < P; ++pe) all.push_back(make_mega_inputs(o, s, pe, P));
    mine = all[me];
    op.run(args_for(mine, y.data(), counts.data()));
    if (!v.ok) continue;  // keep calling: the other PEs are in the same loop
    const auto expected = expected_expert_counts(all, o, me);
    if (counts != expected) {
      v.fail(fmt::format("iteration {}: expert_token_counts [{}] but the routing replay gives [{}]",
                         it, fmt::join(counts, ","), fmt::join(expected, ",")));
    }
    y.resize(static_cast<std::size_t>(mine.bs) * o.model_dim);
    for (const int e : mine.expert_ids) {
      if (e >= 0) need(e);
    }
    replay.check(y, reference_layer(mine, o, by_id, true), o.model_dim);
    ideal.check(y, reference_layer(mine, o, by_id, false), o.model_dim);
    y.resize(static_cast<std::size_t>(o.tokens) * o.model_dim);
    if (o.compare) {
      op.run_unfused(args_for(mine, y_unfused.data(), counts_unfused.data()));
      const std::size_t n = static_cast<std::size_t>(mine.bs) * o.model_dim;
      if (counts_unfused != counts) {
        v.fail(fmt::format("iteration {}: the unfused chain counted [{}], the fused operator [{}]",
                           it, fmt::join(counts_unfused, ","), fmt::join(counts, ",")));
      }
      for (std::size_t i = 0; i < n && v.ok; ++i) {
        if (y[i] != y_unfused[i]) {
          v.fail(fmt::format(
              "iteration {}: y[{}][{}] is 0x{:04x} fused but 0x{:04x} unfused (not bitwise equal)",
              it, i / o.model_dim, i % o.model_dim, y[i], y_unfused[i]));
        }
      }
    }
  }
  const std::string checks =
      std::string("expert_token,numeric_golden,fp8_replay") + (o.compare ? ",bitwise_unfused" : "");
  for (const NumericCheck* c : {&replay, &ideal}) {
    if (!c->verdict.ok) v.fail(c->verdict.detail);
  }
  fmt::print("PE {}: mega verify={}({}) tokens={} received={} iterations={}; {}; {}{}\n", me,
             v.ok ? "pass" : "FAIL", checks, mine.bs, fmt::join(counts, "+"), o.iterations,
             ideal.summary(), replay.summary(), v.ok ? "" : "; first mismatch: " + v.detail);
  std::fflush(stdout);

  // Timed calls reuse the last verified inputs. With --compare both variants are timed, call by
  // call alternately, so that they see the same machine; each round ends with the streaming read
  // the weights' reads are compared with.
  Timings fused, unfused;
  const bool time_fused = o.perf && !o.unfused, time_unfused = o.perf && (o.unfused || o.compare);
  std::optional<WeightReadRounds> reads;
  if (o.perf) {
    const auto experts_read =
        std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; });
    reads.emplace(op.config().weights == moe::MegaWeights::kFp8 ? "fp8" : "bf16",
                  op.weight_bytes() / L * static_cast<std::size_t>(experts_read));
    const auto a = args_for(mine, y.data(), counts.data());
    for (int i = 0; i < o.warmup + o.loops; ++i) {
      const bool keep = i >= o.warmup;
      if (time_fused) fused.time(keep, op, [&] { op.run(a); });
      if (time_unfused) unfused.time(keep, op, [&] { op.run_unfused(a); });
      reads->round(keep);
    }
  }
  if (!o.trace.empty()) {
    op.set_tracing(true);
    op.run(args_for(mine, y.data(), counts.data()));
    op.set_tracing(false);
    write_trace(o.trace, op.last_trace(), op.config());
  }
  // Under the solo schedule the calling thread does every part: no worker runs.
  const std::string workers =
      op.config().schedule == moe::MegaSchedule::kSolo
          ? std::string("solo")
          : fmt::format("{}+{}", op.config().workers.matrix, op.config().workers.vector);
  const std::string described = fmt::format(
      "pes={} tokens={} model_dim={} ffn_dim={} topk={} experts_per_pe={} mode={} workers={}", P,
      o.tokens, o.model_dim, o.ffn_dim, o.topk, L, mode_name(o.mode), workers);
  const std::string verdict =
      fmt::format("verify={}({})", all_passed(v.ok) ? "pass" : "FAIL", checks);
  const PerfSummary fused_perf = fused.summary(time_fused);
  const PerfSummary unfused_perf = unfused.summary(time_unfused);
  const WeightReads fused_reads = time_fused ? reads->result(fused.e2e_us) : WeightReads{};
  const WeightReads unfused_reads = time_unfused ? reads->result(unfused.e2e_us) : WeightReads{};
  if (!o.unfused || !o.perf) report(o, "fused", described, verdict, fused_perf, fused_reads);
  if (time_unfused) report(o, "unfused", described, verdict, unfused_perf, unfused_reads);
  if (time_fused && time_unfused && me == 0) {
    fmt::print("mega: fused is {:.2f}x as fast as the unfused chain (e2e, slowest PE's average)\n",
               unfused_perf.e2e_avg / fused_perf.e2e_avg);
  }
  return v.ok ? 0 : 1;
}

}  // namespace

std::size_t mega_symmetric_bytes(const MegaOptions& o) {
  return moe::MegaMoE::symmetric_bytes(mega_config(o), o.pes, true) + (16u << 20);
}

int run_mega_pe(const MegaOptions& o) {
  const std::uint64_t seed = agree_on_seed(o.routing.seed);
  if (shmem_my_pe() == 0) fmt::print("shmoe-moe mega: {} PEs, seed={}\n", shmem_n_pes(), seed);
  try {
    return run(o, seed);
  } catch (const moe::Refused& e) {
    fmt::print(stderr, "PE {}: refused: {}\n", shmem_my_pe(), e.what());
    return 2;
  }
}

}  // namespace shmoe::tools
