#include "mega_report.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/huge_pages.hpp"
#include "common/stream_read.hpp"
#include "median.hpp"
#include "run_csv.hpp"

namespace shmoe::tools {

const char* mode_name(shmoe_fp8_format_t f) {
  return f == SHMOE_FP8_E4M3 ? "e4m3" : "e5m2";
}

void Stats::add(double v) {
  sum += v;
  min = std::min(min, v);
  max = std::max(max, v);
  ++n;
}

bool all_passed(bool mine) {
  auto* flags = static_cast<int*>(shmem_calloc(2, sizeof(int)));
  flags[0] = mine ? 0 : 1;
  shmem_int_sum_reduce(SHMEM_TEAM_WORLD, flags + 1, flags, 1);
  const bool ok = flags[1] == 0;
  shmem_free(flags);
  return ok;
}

PerfSummary Timings::summary(bool timed) const {
  PerfSummary r;
  r.timed = timed;
  if (!timed) return r;
  auto* v = static_cast<double*>(shmem_calloc(12, sizeof(double)));
  v[0] = e2e.avg() / 1e3;
  v[1] = e2e.max / 1e3;
  v[2] = kernel.avg() / 1e3;
  v[3] = kernel.max / 1e3;
  v[4] = e2e.min / 1e3;
  v[5] = kernel.min / 1e3;
  shmem_double_max_reduce(SHMEM_TEAM_WORLD, v + 6, v, 4);
  shmem_double_min_reduce(SHMEM_TEAM_WORLD, v + 10, v + 4, 2);
  r = {true, v[6], v[10], v[7], v[8], v[11], v[9]};
  shmem_free(v);
  return r;
}

namespace {

// Element by element, the largest of every PE's values (for times: each round's slowest PE's).
// Collective; `mine` has as many values on every PE.
std::vector<double> max_over_pes(const std::vector<double>& mine) {
  const std::size_t n = mine.size();
  if (n == 0) return {};
  auto* v = static_cast<double*>(shmem_calloc(2 * n, sizeof(double)));
  std::copy(mine.begin(), mine.end(), v);
  shmem_double_max_reduce(SHMEM_TEAM_WORLD, v + n, v, n);
  std::vector<double> largest(v + n, v + 2 * n);
  shmem_free(v);
  return largest;
}

}  // namespace

// On huge pages, as the FP8 weights are (common/stream_read.hpp says why).
WeightReadRounds::WeightReadRounds(std::string form, std::size_t my_bytes)
    : form_(std::move(form)),
      bytes_(static_cast<std::size_t>(max_over_pes({static_cast<double>(my_bytes)})[0])),
      buffer_(bytes_, std::byte{1}) {}

void WeightReadRounds::round(bool keep) {
  shmem_barrier_all();
  const auto t0 = std::chrono::steady_clock::now();
  sink_ ^= stream_read(buffer_.data(), bytes_);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (keep) read_s_.push_back(s);
  // So that the next call starts on every PE at once: one still reading would hold up the
  // others' call, whose time would then include the rest of its read.
  shmem_barrier_all();
}

WeightReads WeightReadRounds::result(const std::vector<double>& call_us) const {
  const double read_s = median(max_over_pes(read_s_)),
               call_s = median(max_over_pes(call_us)) * 1e-6;
  const auto bytes = static_cast<double>(bytes_);
  // The sink keeps the reads: a read whose result nobody uses could be left out.
  return {true, form_, bytes, call_s > 0 ? bytes / call_s / 1e9 : 0,
          read_s > 0 && sink_ != 42 ? bytes / read_s / 1e9 : 0};
}

void report(const MegaOptions& o, const char* variant, const std::string& shape,
            const std::string& verdict, const PerfSummary& p, const WeightReads& reads) {
  if (shmem_my_pe() != 0) return;
  std::string perf;
  if (p.timed) {
    perf = fmt::format(
        " e2e_avg_ms={:.3f} e2e_min_ms={:.3f} e2e_max_ms={:.3f} kernel_avg_ms={:.3f} "
        "kernel_min_ms={:.3f} kernel_max_ms={:.3f} loops={}",
        p.e2e_avg, p.e2e_min, p.e2e_max, p.kernel_avg, p.kernel_min, p.kernel_max, o.loops);
  }
  if (p.timed && reads.measured) {
    perf += fmt::format(
        " weights={} weight_read_mb={:.2f} weight_gbps={:.2f} read_gbps={:.2f} "
        "weight/read={:.3f}",
        reads.form, reads.bytes / 1e6, reads.weight_gbps, reads.read_gbps,
        reads.read_gbps > 0 ? reads.weight_gbps / reads.read_gbps : 0.0);
  }
  fmt::print("mega{}: {} {}{}\n", std::string(variant) == "unfused" ? " (unfused chain)" : "",
             shape, verdict, perf);
  if (!p.timed || o.csv.empty()) return;
  auto fail = [&] {
    throw std::runtime_error(fmt::format("cannot write --csv={}: {}", o.csv, std::strerror(errno)));
  };
  std::ofstream f = open_run_csv(
      o.csv,
      "run_id,time,variant,pes,tokens,model_dim,ffn_dim,topk,experts_per_pe,mode,e2e_avg_ms,"
      "e2e_min_ms,e2e_max_ms,kernel_avg_ms,kernel_min_ms,kernel_max_ms,loops,weights,"
      "weight_read_bytes,read_gbps");
  const RunStamp& run = run_stamp();
  f << run.id << ',' << run.time << ',';
  f << fmt::format(
      "{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{},{:.0f},{:.3f}\n",
      variant, shmem_n_pes(), o.tokens, o.model_dim, o.ffn_dim, o.topk, o.experts_per_pe,
      mode_name(o.mode), p.e2e_avg, p.e2e_min, p.e2e_max, p.kernel_avg, p.kernel_min, p.kernel_max,
      o.loops, reads.form, reads.bytes, reads.read_gbps);
  f.close();
  if (!f) fail();
}

void write_trace(const std::string& path, const std::vector<MegaStageEvent>& events,
                 const MegaMoEInfo& layer) {
  const int P = shmem_n_pes(), me = shmem_my_pe();
  const std::string part = fmt::format("{}.pe{}", path, me);
  {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : events) {
      list.push_back(
          {{"name", e.index >= 0 ? fmt::format("{} {}", e.stage, e.index) : std::string(e.stage)},
           {"cat", std::string(e.stage)},
           {"ph", "X"},
           {"ts", e.begin_us},
           {"dur", e.end_us - e.begin_us},
           {"pid", me},
           {"tid", e.worker}});
    }
    std::ofstream out(part);
    out << list.dump();
    out.close();
    if (!out) {
      throw std::runtime_error(
          fmt::format("cannot write {} (--trace={}): {}", part, path, std::strerror(errno)));
    }
  }
  shmem_barrier_all();
  if (me == 0) {
    nlohmann::json trace = {{"displayTimeUnit", "ms"}, {"traceEvents", nlohmann::json::array()}};
    auto& out = trace["traceEvents"];
    double first = 1e300;
    std::vector<nlohmann::json> parts;
    for (int pe = 0; pe < P; ++pe) {
      const std::string name = fmt::format("{}.pe{}", path, pe);
      std::ifstream in(name);
      parts.push_back(nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false));
      if (!parts.back().is_array()) {
        throw std::runtime_error(
            fmt::format("cannot read PE {}'s part of the trace, {} (--trace={})", pe, name, path));
      }
      std::remove(name.c_str());
      for (const auto& e : parts.back()) first = std::min(first, e["ts"].get<double>());
    }
    for (int pe = 0; pe < P; ++pe) {
      out.push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", pe},
                     {"args", {{"name", fmt::format("PE {}", pe)}}}});
      const bool solo = layer.schedule == SHMOE_MEGA_SCHEDULE_SOLO;
      const int matrix_workers = layer.matrix_workers;
      for (int w = 0; w < (solo ? 1 : matrix_workers + layer.vector_workers); ++w) {
        const bool matrix = w < matrix_workers;
        const std::string thread = solo ? "calling thread (solo)"
                                        : fmt::format("{} {}", matrix ? "matrix" : "vector",
                                                      matrix ? w : w - matrix_workers);
        out.push_back({{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", pe},
                       {"tid", w},
                       {"args", {{"name", thread}}}});
      }
      for (auto e : parts[pe]) {
        e["ts"] = e["ts"].get<double>() - first;
        out.push_back(std::move(e));
      }
    }
    std::ofstream file(path);
    file << trace.dump(1);
    file.close();
    if (!file) {
      throw std::runtime_error(
          fmt::format("cannot write --trace={}: {}", path, std::strerror(errno)));
    }
    fmt::print("mega: trace of one fused call written to {} (open it in https://ui.perfetto.dev)\n",
               path);
  }
  shmem_barrier_all();
}

}  // namespace shmoe::tools
