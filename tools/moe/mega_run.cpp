#include "mega_run.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "dtype.hpp"
#include "harness.hpp"
#include "mega_report.hpp"
#include "mega_workload.hpp"

namespace shmoe::tools {

namespace {

// The relative tolerance per format that the operator is held to.
double relative_tolerance(shmoe_fp8_format_t f) {
  return f == SHMOE_FP8_E4M3 ? 0.05 : 0.15;
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
const char* schedule_text(shmoe_mega_schedule_t s) {
  switch (s) {
    case SHMOE_MEGA_SCHEDULE_OVERLAPPED:
      return "vector workers (schedule overlapped)";
    case SHMOE_MEGA_SCHEDULE_INLINE:
      return "matrix worker, in the GEMMs' epilogues (schedule inline)";
    case SHMOE_MEGA_SCHEDULE_SOLO:
      return "calling thread, in the GEMMs' epilogues (schedule solo)";
    case SHMOE_MEGA_SCHEDULE_AUTO:
      break;
  }
  return "?";
}

double ideal_floor(shmoe_fp8_format_t f) {
  return 12 * (f == SHMOE_FP8_E4M3 ? 0x1p-4 : 0x1p-3);
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
        const double got = bf16_to_float(y[i]);
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

// One `shmoe-moe mega` run on this PE, as a call object: the operator and its experts, the
// checks, and one method per phase; operator() shows the order and the collective steps.
class MegaRun {
 public:
  MegaRun(const MegaOptions& o, std::uint64_t seed);

  // The PE's status: 0 when every output verified.
  int operator()() {
    for (int it = 0; it < o_.iterations; ++it) verified_iteration(it);  // collective calls
    report_verdict();
    if (o_.perf) timed_rounds();           // collective
    if (!o_.trace.empty()) traced_call();  // collective
    report_timings();                      // collective
    return v_.ok ? 0 : 1;
  }

 private:
  void need(int e);
  MegaMoEArgs args_for(std::uint16_t* out, std::int32_t* cnt) const;
  const char* weights_form() const;
  void verified_iteration(int it);
  void compare_unfused(int it);
  std::string checks() const;
  void report_verdict();
  void timed_rounds();
  void traced_call();
  void report_timings();

  const MegaOptions& o_;
  const std::uint64_t seed_;
  const int P_ = shmem_n_pes(), me_ = shmem_my_pe(), L_;
  // Experts are made when first needed: the operator needs this PE's, the reference those this
  // PE's tokens route to (at a real layer's shape, making all of them on every PE took 30 s).
  std::map<int, GeneratedExpert> experts_;
  std::vector<const GeneratedExpert*> by_id_;
  std::optional<MegaMoE> op_;
  MegaMoEInfo layer_;  // what the operator resolved at creation
  std::vector<std::uint16_t> y_, y_unfused_;
  std::vector<std::int32_t> counts_, counts_unfused_;
  Verdict v_;
  // The fp64 replay of the FP8 roundings differs from the operator by the BF16 roundings of each
  // expert's row and of the sum (2^-9 relative each, of terms that may cancel: hence a floor in
  // row RMS), plus the slack of activations that fp32 and fp64 may round to different FP8 codes
  // (see reference_layer). Measured worst: 0.41 of this bound.
  NumericCheck replay_{"fp8_replay", 0x1p-7, 0.03, false, {}};
  NumericCheck ideal_;
  PeInputs mine_;
  // Timed calls: with --compare both variants, call by call alternately, so that they see the
  // same machine; each round ends with the streaming read the weights' reads are compared with.
  Timings fused_, unfused_;
  const bool time_fused_, time_unfused_;
  std::optional<WeightReadRounds> reads_;
};

MegaRun::MegaRun(const MegaOptions& o, std::uint64_t seed)
    : o_(o),
      seed_(seed),
      L_(o.experts_per_pe),
      by_id_(static_cast<std::size_t>(P_) * L_, nullptr),
      y_(static_cast<std::size_t>(o.tokens) * o.model_dim),
      y_unfused_(y_.size()),
      counts_(L_),
      counts_unfused_(L_),
      ideal_{"numeric_golden", relative_tolerance(o.mode), ideal_floor(o.mode), false, {}},
      time_fused_(o.perf && !o.unfused),
      time_unfused_(o.perf && (o.unfused || o.compare)) {
  std::vector<const std::uint8_t*> w1, w2;
  for (int e = 0; e < L_; ++e) {
    need(me_ * L_ + e);
    w1.push_back(by_id_[me_ * L_ + e]->w1_rows.data());
    w2.push_back(by_id_[me_ * L_ + e]->w2_rows.data());
  }
  op_.emplace(mega_config(o), w1, w2);  // collective
  layer_ = op_->info();
  if (me_ == 0) {
    fmt::print(
        "mega: weights kept as {} ({} bytes on this PE); GEMMs on {} in waves of {} rows; "
        "SwiGLU and write-back by the {}\n",
        weights_form(), layer_.weight_bytes, layer_.gemm_engine, layer_.wave_rows,
        schedule_text(layer_.schedule));
  }
}

void MegaRun::need(int e) {
  if (by_id_[e] == nullptr)
    by_id_[e] = &experts_.emplace(e, make_expert(o_, seed_, e)).first->second;
}

const char* MegaRun::weights_form() const {
  return layer_.weights == SHMOE_MEGA_WEIGHTS_FP8 ? "fp8" : "bf16";
}

MegaMoEArgs MegaRun::args_for(std::uint16_t* out, std::int32_t* cnt) const {
  return MegaMoEArgs{reinterpret_cast<const std::uint16_t*>(mine_.x.data()),
                     mine_.expert_ids.data(),
                     mine_.scales.data(),
                     mine_.bs,
                     out,
                     cnt};
}

void MegaRun::verified_iteration(int it) {
  const std::uint64_t s = seed_ + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(it);
  std::vector<PeInputs> all;
  for (int pe = 0; pe < P_; ++pe) all.push_back(make_mega_inputs(o_, s, pe, P_));
  mine_ = all[me_];
  op_->run(args_for(y_.data(), counts_.data()));
  if (!v_.ok) return;  // keep calling: the other PEs are in the same loop
  const auto expected = expected_expert_counts(all, o_, me_);
  if (counts_ != expected) {
    v_.fail(fmt::format("iteration {}: expert_token_counts [{}] but the routing replay gives [{}]",
                        it, fmt::join(counts_, ","), fmt::join(expected, ",")));
  }
  y_.resize(static_cast<std::size_t>(mine_.bs) * o_.model_dim);
  for (const int e : mine_.expert_ids) {
    if (e >= 0) need(e);
  }
  const int checked = o_.verify_tokens > 0 ? o_.verify_tokens : mine_.bs;
  replay_.check(y_, reference_layer(mine_, o_, by_id_, true, checked), o_.model_dim);
  ideal_.check(y_, reference_layer(mine_, o_, by_id_, false, checked), o_.model_dim);
  y_.resize(static_cast<std::size_t>(o_.tokens) * o_.model_dim);
  if (o_.compare) compare_unfused(it);
}

// --compare: the unfused chain on the same inputs, which must give the same bits.
void MegaRun::compare_unfused(int it) {
  op_->run_unfused(args_for(y_unfused_.data(), counts_unfused_.data()));
  const std::size_t n = static_cast<std::size_t>(mine_.bs) * o_.model_dim;
  if (counts_unfused_ != counts_) {
    v_.fail(fmt::format("iteration {}: the unfused chain counted [{}], the fused operator [{}]", it,
                        fmt::join(counts_unfused_, ","), fmt::join(counts_, ",")));
  }
  for (std::size_t i = 0; i < n && v_.ok; ++i) {
    if (y_[i] != y_unfused_[i]) {
      v_.fail(fmt::format(
          "iteration {}: y[{}][{}] is 0x{:04x} fused but 0x{:04x} unfused (not bitwise equal)", it,
          i / o_.model_dim, i % o_.model_dim, y_[i], y_unfused_[i]));
    }
  }
}

std::string MegaRun::checks() const {
  const std::string sampled =
      o_.verify_tokens > 0 ? fmt::format(",first_{}_tokens", o_.verify_tokens) : "";
  return "expert_token,numeric_golden,fp8_replay" + sampled +
         (o_.compare ? ",bitwise_unfused" : "");
}

void MegaRun::report_verdict() {
  for (const NumericCheck* c : {&replay_, &ideal_}) {
    if (!c->verdict.ok) v_.fail(c->verdict.detail);
  }
  fmt::print("PE {}: mega verify={}({}) tokens={} received={} iterations={}; {}; {}{}\n", me_,
             v_.ok ? "pass" : "FAIL", checks(), mine_.bs, fmt::join(counts_, "+"), o_.iterations,
             ideal_.summary(), replay_.summary(), v_.ok ? "" : "; first mismatch: " + v_.detail);
  std::fflush(stdout);
}

// Timed calls reuse the last verified inputs.
void MegaRun::timed_rounds() {
  const auto experts_read =
      std::count_if(counts_.begin(), counts_.end(), [](int c) { return c > 0; });
  reads_.emplace(weights_form(), layer_.weight_bytes / L_ * static_cast<std::size_t>(experts_read));
  const auto a = args_for(y_.data(), counts_.data());
  for (int i = 0; i < o_.warmup + o_.loops; ++i) {
    const bool keep = i >= o_.warmup;
    if (time_fused_) fused_.time(keep, *op_, [&] { op_->run(a); });
    if (time_unfused_) unfused_.time(keep, *op_, [&] { op_->run_unfused(a); });
    reads_->round(keep);
  }
}

void MegaRun::traced_call() {
  op_->set_tracing(true);
  op_->run(args_for(y_.data(), counts_.data()));
  op_->set_tracing(false);
  write_trace(o_.trace, op_->last_trace(), layer_);
}

void MegaRun::report_timings() {
  // Under the solo schedule the calling thread does every part: no worker runs.
  const std::string workers =
      layer_.schedule == SHMOE_MEGA_SCHEDULE_SOLO
          ? std::string("solo")
          : fmt::format("{}+{}", layer_.matrix_workers, layer_.vector_workers);
  const std::string described = fmt::format(
      "pes={} tokens={} model_dim={} ffn_dim={} topk={} experts_per_pe={} mode={} workers={}", P_,
      o_.tokens, o_.model_dim, o_.ffn_dim, o_.topk, L_, mode_name(o_.mode), workers);
  const std::string verdict =
      fmt::format("verify={}({})", all_passed(v_.ok) ? "pass" : "FAIL", checks());
  const PerfSummary fused_perf = fused_.summary(time_fused_);
  const PerfSummary unfused_perf = unfused_.summary(time_unfused_);
  const WeightReads fused_reads = time_fused_ ? reads_->result(fused_.e2e_us) : WeightReads{};
  const WeightReads unfused_reads = time_unfused_ ? reads_->result(unfused_.e2e_us) : WeightReads{};
  if (!o_.unfused || !o_.perf) report(o_, "fused", described, verdict, fused_perf, fused_reads);
  if (time_unfused_) report(o_, "unfused", described, verdict, unfused_perf, unfused_reads);
  if (time_fused_ && time_unfused_ && me_ == 0) {
    fmt::print("mega: fused is {:.2f}x as fast as the unfused chain (e2e, slowest PE's average)\n",
               unfused_perf.e2e_avg / fused_perf.e2e_avg);
  }
}

}  // namespace

std::size_t mega_symmetric_bytes(const MegaOptions& o) {
  return MegaMoE::unfused_symmetric_bytes(mega_config(o), o.pes) + (16u << 20);
}

int run_mega_pe(const MegaOptions& o) {
  return run_driver(
      o.routing.seed,
      [](std::uint64_t seed) {
        return fmt::format("shmoe-moe mega: {} PEs, seed={}", shmem_n_pes(), seed);
      },
      1, [&](std::size_t, std::uint64_t seed) { return MegaRun(o, seed)(); });
}

}  // namespace shmoe::tools
