#include "run.hpp"

#include <fmt/format.h>
#include <shmem.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "moe/moe.hpp"
#include "ordered_lines.hpp"
#include "run_csv.hpp"
#include "slow_pe.hpp"
#include "workload.hpp"

namespace shmoe::tools {
namespace {

using moe::DType;

// Buffers of one PE for one case, sized for the context.
struct Buffers {
  std::vector<std::byte> expand_x, expert_out, x_out;
  std::vector<std::int32_t> assist_info, ep_recv_count, expert_token_nums;
  std::vector<float> expand_scales;
};

struct Verdict {
  bool ok = true;
  std::string detail;
  void fail(std::string why) {
    if (ok) detail = std::move(why);
    ok = false;
  }
};

// Where dispatch's row r lies in expand_x (and assist_info): at r, or, in shrink mode with the
// receive window as expand_x, in its fixed slot (slots[r]).
std::size_t at(const std::vector<std::size_t>& slots, int r) {
  return slots.empty() ? static_cast<std::size_t>(r) : slots[static_cast<std::size_t>(r)];
}

// Shrink mode's fixed slots of the rows ep_recv_count counts: the j-th row of local expert e
// from source s at (e * n_pes + s) * max_bs + j.
std::vector<std::size_t> fixed_slots(const Buffers& b, int n_pes, int max_bs) {
  std::vector<std::size_t> slots;
  std::int32_t prev = 0;
  for (std::size_t block = 0; block < b.ep_recv_count.size(); ++block) {
    for (std::int32_t j = 0; j < b.ep_recv_count[block] - prev; ++j)
      slots.push_back(block * static_cast<std::size_t>(max_bs) + static_cast<std::size_t>(j));
    prev = b.ep_recv_count[block];
  }
  (void)n_pes;  // block = e * n_pes + s already
  return slots;
}

void check_dispatch(const Buffers& b, const std::byte* expand_x, int rows, const DispatchGolden& g,
                    std::size_t row_bytes, const std::vector<std::size_t>& slots, Verdict& v) {
  if (rows != g.rows)
    return v.fail(fmt::format("dispatch received {} rows, expected {}", rows, g.rows));
  if (!std::equal(g.ep_recv_count.begin(), g.ep_recv_count.end(), b.ep_recv_count.begin())) {
    return v.fail("dispatch ep_recv_count differs");
  }
  if (!std::equal(g.expert_token_nums.begin(), g.expert_token_nums.end(),
                  b.expert_token_nums.begin())) {
    return v.fail("dispatch expert_token_nums differs");
  }
  for (int r = 0; r < rows; ++r) {
    const std::size_t i = at(slots, r);
    if (std::memcmp(&b.assist_info[3 * i], &g.assist_info[3 * r], 12) != 0) {
      return v.fail(fmt::format("dispatch assist_info row {} = ({}, {}, {}), expected ({}, {}, {})",
                                i, b.assist_info[3 * i], b.assist_info[3 * i + 1],
                                b.assist_info[3 * i + 2], g.assist_info[3 * r],
                                g.assist_info[3 * r + 1], g.assist_info[3 * r + 2]));
    }
    if (std::memcmp(expand_x + i * row_bytes, g.expand_x.data() + r * row_bytes, row_bytes) != 0) {
      return v.fail(fmt::format("dispatch expand_x row {} (from PE {} token {}) differs", i,
                                g.assist_info[3 * r], g.assist_info[3 * r + 1]));
    }
    if (b.expand_scales[i] != g.expand_scales[r])
      return v.fail(fmt::format("dispatch expand_scales[{}] differs", i));
  }
}

// The experts' work on the received rows: row r belongs to local expert le (from ep_recv_count).
// `out` may be `in` (element by element, in place).
void run_experts(const Buffers& b, const std::byte* in, std::byte* out, const MoeCase& c, int me,
                 int n_pes, int rows, std::size_t row_bytes,
                 const std::vector<std::size_t>& slots) {
  int block = 0;
  for (int r = 0; r < rows; ++r) {
    while (b.ep_recv_count[block] <= r) ++block;
    const int expert = me * c.experts_per_pe + block / n_pes;
    const std::size_t i = at(slots, r);
    expert_step(c.dtype, expert, in + i * row_bytes, out + i * row_bytes, c.hidden);
  }
}

double check_combine(const Buffers& b, const PeInputs& mine, const MoeCase& c, Verdict& v) {
  std::vector<double> value, magnitude;
  golden_combine(mine, c, value, magnitude);
  double worst = 0;  // largest error as a fraction of its tolerance
  for (std::size_t i = 0; i < value.size(); ++i) {
    const double got = moe::load_f32(c.dtype, b.x_out.data(), i);
    const double tol = combine_tolerance(c.dtype, c.topk, magnitude[i]);
    const double err = std::fabs(got - value[i]);
    if (!std::isfinite(got) || err > tol) {
      v.fail(
          fmt::format("combine x_out[{}][{}] = {} but the fp64 reference is {} (|err| {:.3g} > "
                      "tolerance {:.3g})",
                      i / c.hidden, i % c.hidden, got, value[i], err, tol));
      return err / tol;
    }
    worst = std::max(worst, tol > 0 ? err / tol : 0);
  }
  return worst;
}

// The combine check's line: within its bound, or the worst error as a multiple of it (a ratio
// of 1.000 on a pass read as a near-failure: it is the bound's rounding, reached exactly).
std::string combine_verdict(double worst_err_over_tol, DType dtype) {
  const char* bound = dtype == DType::kInt32      ? "0.5 + fp32 accumulation"
                      : dtype == DType::kFloat32  ? "(topk+1)*2^-24*sum|terms|"
                      : dtype == DType::kBFloat16 ? "2^-8*sum|terms| + accumulation"
                                                  : "2^-11*sum|terms| + accumulation";
  if (worst_err_over_tol <= 1) return fmt::format(" combine within tolerance (|err| <= {})", bound);
  return fmt::format(" combine_err/tol={:.3f} (tol: {})", worst_err_over_tol, bound);
}

struct PerfSample {
  std::vector<double> worker_us;
  double comm_us = 0;
  double bytes = 0;
  std::vector<double> source_wait_us;  // per source PE, per call (dispatch and combine summed)
};

// --output-dir was checked before the PEs started (and may have gone since: opening the file
// says so); what can still fail, such as a full disk, must not pass unsaid.
[[noreturn]] void cannot_write(const MoeRunOptions& o, const std::string& path) {
  throw std::runtime_error(fmt::format("cannot write {} (--output-dir={}): {}", path, o.output_dir,
                                       std::strerror(errno)));
}

// The wait matrix and its verdict, printed and written next to the perf CSV (PE 0).
void report_waits(const MoeRunOptions& o, const MoeCase& c, const std::string& name,
                  const std::vector<double>& wait_us) {
  const int P = shmem_n_pes();
  const SlowPeVerdict verdict = judge_slow_pe(wait_us, P);
  fmt::print("{}", wait_matrix_text(wait_us, P, verdict));
  const std::string path = perf_csv_path(o, c, name + "_waits", P);
  std::ofstream f = open_run_csv(path, "run_id,time,waiting_pe,source_pe,wait_us_per_call,slow_pe");
  const RunStamp& run = run_stamp();
  for (int r = 0; r < P; ++r) {
    for (int s = 0; s < P; ++s)
      f << fmt::format("{},{},{},{},{:.3f},{}\n", run.id, run.time, r, s,
                       wait_us[static_cast<std::size_t>(r * P + s)], verdict.pe);
  }
  f.close();
  if (!f) cannot_write(o, path);
}

void write_csv(const MoeRunOptions& o, const MoeCase& c, const std::string& name, int workers,
               const std::vector<double>& all_worker_us, const std::vector<double>& all_comm_us,
               double global_bytes) {
  const int P = shmem_n_pes();
  const std::string path = perf_csv_path(o, c, name, P);
  std::error_code ignored;
  std::filesystem::create_directories(o.output_dir, ignored);
  std::string header =
      "run_id,time,data_size_bytes,pes,workers,bandwidth_gbps,core_max_time_us,metric,"
      "global_data_size_bytes,per_pe_bandwidth_gbps,bs,hidden,topk,experts_per_pe,dtype,warmup,"
      "loops";
  for (int p = 0; p < P; ++p)
    for (int w = 0; w < workers; ++w) header += fmt::format(",time_pe{}_w{}_us", p, w);
  std::ofstream f = open_run_csv(path, header);
  const RunStamp& run = run_stamp();
  for (const char* metric : {"full_op", "comm_only"}) {
    const bool full = std::strcmp(metric, "full_op") == 0;
    double max_us = 0;
    for (int p = 0; p < P; ++p) {
      for (int w = 0; w < workers; ++w)
        max_us = std::max(max_us, full ? all_worker_us[p * workers + w] : all_comm_us[p]);
    }
    const double gbps = max_us > 0 ? global_bytes / (max_us * 1e3) : 0;
    f << fmt::format("{},{},{:.0f},{},{},{:.4f},{:.3f},{},{:.0f},{:.4f},{},{},{},{},{},{},{}",
                     run.id, run.time, global_bytes / P, P, workers, gbps, max_us, metric,
                     global_bytes, gbps / P, c.bs, c.hidden, c.topk, c.experts_per_pe,
                     moe::dtype_name(c.dtype), o.warmup, o.loops);
    for (int p = 0; p < P; ++p)
      for (int w = 0; w < workers; ++w)
        f << fmt::format(",{:.3f}", full ? all_worker_us[p * workers + w] : all_comm_us[p]);
    f << "\n";
    fmt::print(
        "perf: {} {} pes={} bs={} h={} topk={} experts_per_pe={} dtype={} time_max={:.1f} us "
        "bandwidth={:.3f} GB/s per_pe={:.3f} GB/s csv={}\n",
        name, metric, P, c.bs, c.hidden, c.topk, c.experts_per_pe, moe::dtype_name(c.dtype), max_us,
        gbps, gbps / P, path);
  }
  f.close();
  if (!f) cannot_write(o, path);
}

// Gathers each PE's averages to PE 0 (symmetric scratch) and writes the CSV there.
void report_perf(const MoeRunOptions& o, const MoeCase& c, const std::string& name,
                 const PerfSample& mine) {
  const int P = shmem_n_pes(), me = shmem_my_pe();
  const int W = static_cast<int>(mine.worker_us.size());
  const int stride = W + 2 + P;
  auto* all =
      static_cast<double*>(shmem_calloc(static_cast<std::size_t>(P) * stride, sizeof(double)));
  std::vector<double> row(mine.worker_us);
  row.push_back(mine.comm_us);
  row.push_back(mine.bytes);
  row.insert(row.end(), mine.source_wait_us.begin(), mine.source_wait_us.end());
  shmem_double_put(all + me * stride, row.data(), stride, 0);
  shmem_barrier_all();
  if (me == 0) {
    std::vector<double> workers, comm, waits;
    double bytes = 0;
    for (int p = 0; p < P; ++p) {
      workers.insert(workers.end(), all + p * stride, all + p * stride + W);
      comm.push_back(all[p * stride + W]);
      bytes += all[p * stride + W + 1];
      waits.insert(waits.end(), all + p * stride + W + 2, all + (p + 1) * stride);
    }
    write_csv(o, c, name, W, workers, comm, bytes);
    report_waits(o, c, name, waits);
  }
  shmem_barrier_all();
  shmem_free(all);
}

// Shrink mode's reference: what PE `me` must get when the PEs in `masked` are left out (their
// tokens are not sent, their experts not summed).
std::vector<PeInputs> without(std::vector<PeInputs> all, const std::set<int>& masked) {
  for (int pe : masked) {
    all[static_cast<std::size_t>(pe)].bs = 0;
    all[static_cast<std::size_t>(pe)].expert_ids.clear();
  }
  return all;
}
PeInputs without_experts_of(PeInputs mine, const std::set<int>& masked, int experts_per_pe) {
  for (auto& e : mine.expert_ids) {
    if (e >= 0 && masked.count(e / experts_per_pe)) e = -1;
  }
  return mine;
}

std::set<int> masked_pes(const std::vector<std::int32_t>& mask) {
  std::set<int> s;
  for (std::size_t pe = 0; pe < mask.size(); ++pe) {
    if (mask[pe] != 0) s.insert(static_cast<int>(pe));
  }
  return s;
}

// Every PE's process id, for the PE that resumes a stopped one (collective).
std::vector<pid_t> exchange_pids() {
  const int P = shmem_n_pes(), me = shmem_my_pe();
  auto* pids =
      static_cast<long long*>(shmem_calloc(static_cast<std::size_t>(P), sizeof(long long)));
  for (int pe = 0; pe < P; ++pe) shmem_longlong_p(pids + me, ::getpid(), pe);
  shmem_barrier_all();
  std::vector<pid_t> out(pids, pids + P);
  shmem_free(pids);
  return out;
}

// --fail-pe ...:stop or kill: the process sends itself `sig` `delay` after the main thread sets
// `calling` (just before its first call), so that it lands in the middle of the iteration's calls.
std::thread signal_after(const std::atomic<bool>& calling, std::chrono::microseconds delay,
                         int sig) {
  return std::thread([&calling, delay, sig] {
    while (!calling.load(std::memory_order_acquire)) std::this_thread::yield();
    std::this_thread::sleep_for(delay);
    ::kill(::getpid(), sig);
  });
}

// Sends SIGCONT to `pid` once it shows as stopped (its stop comes from its own thread, which may
// fire after this PE is done; shrink mode runs on one host, so /proc tells).
void resume_when_stopped(pid_t pid) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');  // the state follows the command name
    if (close == std::string::npos || close + 2 >= line.size()) break;
    if (line[close + 2] == 'T') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(pid, SIGCONT);
}

int run_case(const MoeRunOptions& o, const MoeCase& c, std::uint64_t seed) {
  const int P = shmem_n_pes(), me = shmem_my_pe();
  moe::MoeBuffer ctx(moe_config(o, c));
  const std::size_t row_bytes = static_cast<std::size_t>(c.hidden) * moe::dtype_size(c.dtype);
  const std::size_t cap = ctx.recv_capacity();
  // The outputs are required even when no row can arrive (--bs 0 gives a capacity of 0): a
  // buffer of at least one row is never null.
  const std::size_t min_rows = std::max<std::size_t>(cap, 1);
  Buffers b;
  if (o.copy_out) {
    b.expand_x.resize(min_rows * row_bytes);
    b.expert_out.resize(min_rows * row_bytes);
  }
  // Where dispatch's rows are read and where the experts' outputs go.
  std::byte* const expand_x =
      o.copy_out ? b.expand_x.data() : static_cast<std::byte*>(ctx.receive_window());
  std::byte* const expert_out = o.copy_out ? b.expert_out.data() : expand_x;
  b.x_out.resize(static_cast<std::size_t>(std::max(c.bs, 1)) * row_bytes);
  b.assist_info.resize(min_rows * 3);
  b.ep_recv_count.resize(static_cast<std::size_t>(P) * c.experts_per_pe);
  b.expert_token_nums.resize(c.experts_per_pe);
  b.expand_scales.resize(min_rows);
  const bool double_plane = op_uses_double_plane(o);
  const bool check_dispatch_out = !op_is_combine(o.op);
  const bool do_combine = op_is_combine(o.op) || o.op == MoeOp::kPipeline;

  // Shrink mode with the receive window as expand_x: the rows stay in their fixed slots.
  const bool in_slots = o.shrink_ms > 0 && !o.copy_out;
  // Shrink mode: the PEs this PE has masked, passed to every call.
  std::vector<std::int32_t> mask(static_cast<std::size_t>(P), 0);
  std::int32_t* const pe_mask = o.shrink_ms > 0 ? mask.data() : nullptr;
  const std::vector<pid_t> pids =
      o.fail_action == FailAction::kStop && o.fail_pe >= 0 ? exchange_pids() : std::vector<pid_t>{};
  // Set at every other PE by a stopped PE once it is back (symmetric, zeroed).
  long* const back = pids.empty() ? nullptr : static_cast<long*>(shmem_calloc(1, sizeof(long)));
  auto dispatch = [&](const PeInputs& in) {
    moe::DispatchArgs a{in.x.data(), in.expert_ids.data(), in.scales.data(), in.bs};
    a.pe_mask = pe_mask;
    moe::DispatchOutputs out{expand_x, b.assist_info.data(), b.ep_recv_count.data(),
                             b.expert_token_nums.data(), b.expand_scales.data()};
    return double_plane ? moe::dispatch_doubleplane(ctx, a, out)
                        : moe::dispatch_classic(ctx, a, out);
  };
  auto combine = [&](const PeInputs& in) {
    moe::CombineArgs a{expert_out,           b.assist_info.data(), b.ep_recv_count.data(),
                       in.expert_ids.data(), in.scales.data(),     in.bs,
                       b.x_out.data()};
    a.pe_mask = pe_mask;
    double_plane ? moe::combine_doubleplane(ctx, a) : moe::combine_classic(ctx, a);
  };

  Verdict verdict;
  double worst_combine = 0;
  int rows = 0;
  std::size_t engine_bytes = 0;
  PeInputs mine;
  std::string failed;   // this PE failed on purpose (--fail-pe): how
  std::string masking;  // when and how fast this PE masked others
  // The operators' call number of iteration `it`, counted as shrink mode's mask warnings count
  // ("... of call N"): each iteration calls dispatch (and combine) once on this case's own
  // context, the library counts calls from 1, and a rejoin goes on from the furthest PE's count
  // (that of the PEs that made every iteration), so iteration `it` is call it + 1 on every PE.
  // "masked=[P] from call N" names the first call whose outputs leave P out: the call whose step
  // the warning says P missed, or the next one when that step was a combine's last (combine
  // reads: P's rows were all read, so the call completed with them), as tests/moe/shrink_cli.sh
  // checks.
  auto call_of = [](int it) { return it + 1; };
  auto inputs_of_iteration = [&](int it) {
    const std::uint64_t s = seed + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(it);
    std::vector<PeInputs> all;
    for (int pe = 0; pe < P; ++pe) all.push_back(make_inputs(o, c, s, pe, P));
    return std::make_pair(s, all);
  };
  // Iteration `it`'s calls, checked against a reference without the PEs this PE has masked.
  auto verified_iteration = [&](int it) {
    const auto [s, all] = inputs_of_iteration(it);
    mine = all[me];
    const std::size_t masked_before = masked_pes(mask).size();
    const auto t0 = std::chrono::steady_clock::now();
    rows = dispatch(mine);
    engine_bytes += ctx.last_timing().bytes_via_copy_engine;
    const std::vector<std::size_t> slots =
        in_slots ? fixed_slots(b, P, c.bs) : std::vector<std::size_t>{};
    if (check_dispatch_out) {
      check_dispatch(b, expand_x, rows, golden_dispatch(without(all, masked_pes(mask)), c, me),
                     row_bytes, slots, verdict);
    }
    if (do_combine) {
      run_experts(b, expand_x, expert_out, c, me, P, rows, row_bytes, slots);
      combine(mine);
      engine_bytes += ctx.last_timing().bytes_via_copy_engine;
      const PeInputs kept = without_experts_of(mine, masked_pes(mask), c.experts_per_pe);
      worst_combine = std::max(worst_combine, check_combine(b, kept, c, verdict));
    }
    if (masked_pes(mask).size() > masked_before) {
      masking += fmt::format(
          " masked=[{}] from call {} (iteration {}) within {:.0f} ms",
          fmt::join(masked_pes(mask), ","), call_of(it), it,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  };
  for (int it = 0; it < o.iterations && verdict.ok; ++it) {
    if (me == o.fail_pe && it == o.fail_iteration) {
      if (o.fail_action == FailAction::kQuit) {
        failed = fmt::format("quit (stopped calling) at call {} (iteration {})", call_of(it), it);
        break;
      }
      // Stopped (or killed) somewhere in the first 500 us of the iteration's calls; once
      // resumed, it finishes the calls it is in (the others no longer answer it, so it masks
      // them). A kill that comes after the calls comes at the latest in join(): the PE never
      // goes on.
      const auto [s, all] = inputs_of_iteration(it);
      mine = all[me];
      std::atomic<bool> calling{false};
      const int sig = o.fail_action == FailAction::kKill ? SIGKILL : SIGSTOP;
      std::thread stopper = signal_after(calling, std::chrono::microseconds((s >> 7) % 500), sig);
      calling.store(true, std::memory_order_release);
      dispatch(mine);
      run_experts(b, expand_x, expert_out, c, me, P, ctx.last_timing().rows_received, row_bytes,
                  in_slots ? fixed_slots(b, P, c.bs) : std::vector<std::size_t>{});
      combine(mine);
      stopper.join();
      failed = fmt::format("stopped by SIGSTOP during call {} (iteration {}) and resumed",
                           call_of(it), it);
      break;
    }
    verified_iteration(it);
  }
  if (!pids.empty()) {
    // The lowest other PE resumes the stopped one once done; that one says when it is back
    // (its calls of the iteration it was stopped in end at their bound), and every PE rejoins:
    // one more iteration, checked with every PE live on every PE.
    if (me != o.fail_pe) {
      if (me == (o.fail_pe == 0 ? 1 : 0))
        resume_when_stopped(pids[static_cast<std::size_t>(o.fail_pe)]);
      shmem_long_wait_until(back, SHMEM_CMP_EQ, 1);
    } else {
      for (int pe = 0; pe < P; ++pe) {
        if (pe != me) shmem_long_atomic_set(back, 1, pe);
      }
    }
    moe::rejoin(ctx, mask.data());
    if (!masked_pes(mask).empty()) {
      verdict.fail(
          fmt::format("PEs {} still masked after the rejoin", fmt::join(masked_pes(mask), ",")));
    }
    verified_iteration(o.iterations);
    masking += fmt::format(" rejoined: every PE live, call {} (iteration {}) checked",
                           call_of(o.iterations), o.iterations);
    shmem_free(back);
  }
  if (!failed.empty()) {
    fmt::print("PE {}: failed on purpose: {}{}\n", me, failed,
               pids.empty() ? std::string()
                            : fmt::format("; rejoined: verify={}{}", verdict.ok ? "pass" : "FAIL",
                                          verdict.ok ? "" : " first mismatch: " + verdict.detail));
    std::fflush(stdout);
    return verdict.ok ? 0 : 1;
  }
  std::string checks = check_dispatch_out ? "dispatch_exact" : "";
  if (do_combine) checks += std::string(checks.empty() ? "" : ",") + "combine_fp64";
  const std::string op =
      op_name(o.op) + (o.op == MoeOp::kPipeline && double_plane ? "-doubleplane" : "");
  const std::string line = fmt::format(
      "PE {}: {} verify={}({}) bs={} h={} topk={} experts_per_pe={} dtype={} rows={} "
      "iterations={}{}{}{}",
      me, op, verdict.ok ? "pass" : "FAIL", checks, mine.bs, c.hidden, c.topk, c.experts_per_pe,
      moe::dtype_name(c.dtype), rows, o.iterations,
      do_combine ? combine_verdict(worst_combine, c.dtype) : "",
      (double_plane ? fmt::format(" copy_engine_bytes={}", engine_bytes) : "") + masking,
      verdict.ok ? "" : " first mismatch: " + verdict.detail);
  if (o.fail_pe < 0) {
    // Every PE is alive: PE 0 prints the lines in PE order and the case's summary.
    print_in_pe_order(line, verdict.ok,
                      fmt::format("{} bs={} h={} topk={} experts_per_pe={} dtype={}", op, c.bs,
                                  c.hidden, c.topk, c.experts_per_pe, moe::dtype_name(c.dtype)));
  } else {
    fmt::print("{}\n", line);  // a PE may be gone: each prints its own
    std::fflush(stdout);
  }

  if (o.perf && verdict.ok) {
    // Timed calls reuse the last verified inputs; what is timed is what the op name says.
    PerfSample sample;
    sample.worker_us.assign(ctx.config().workers.vector, 0);
    sample.source_wait_us.assign(static_cast<std::size_t>(P), 0);
    const auto delay = std::chrono::duration<double, std::micro>(me == o.delay_pe ? o.delay_us : 0);
    for (int i = 0; i < o.warmup + o.loops; ++i) {
      double comm = 0, bytes = 0;
      std::vector<double> w(sample.worker_us.size(), 0), waits(sample.source_wait_us.size(), 0);
      auto add = [&] {
        const auto& t = ctx.last_timing();
        for (std::size_t k = 0; k < w.size(); ++k) w[k] += t.worker_us[k];
        for (std::size_t s = 0; s < waits.size(); ++s) waits[s] += t.source_wait_us[s];
        comm += t.comm_us;
        bytes += static_cast<double>(t.bytes_sent);
      };
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      if (!op_is_combine(o.op)) {
        dispatch(mine);
        add();
      }
      if (do_combine) {
        combine(mine);
        add();
      }
      if (i >= o.warmup) {
        for (std::size_t k = 0; k < w.size(); ++k) sample.worker_us[k] += w[k] / o.loops;
        for (std::size_t s = 0; s < waits.size(); ++s)
          sample.source_wait_us[s] += waits[s] / o.loops;
        sample.comm_us += comm / o.loops;
        sample.bytes += bytes / o.loops;
      }
    }
    report_perf(o, c, perf_name(o), sample);
  }
  return verdict.ok ? 0 : 1;
}

}  // namespace

std::uint64_t agree_on_seed(std::uint64_t requested) {
  auto* slot = static_cast<std::uint64_t*>(shmem_calloc(1, sizeof(std::uint64_t)));
  if (shmem_my_pe() == 0) {
    std::uint64_t seed = requested;
    if (seed == 0) seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
    for (int pe = 0; pe < shmem_n_pes(); ++pe) shmem_uint64_p(slot, seed, pe);
  }
  shmem_barrier_all();
  std::uint64_t seed = *slot;
  shmem_free(slot);
  return seed;
}

std::size_t symmetric_bytes_for(const MoeRunOptions& o, const MoeCase& c) {
  // Room beyond the operator's windows for the seed and the perf report's scratch.
  return moe::MoeBuffer::window_bytes(moe_config(o, c), o.pes) + (64u << 20);
}

std::size_t symmetric_bytes_needed(const MoeRunOptions& o) {
  std::size_t most = 0;
  for (const auto& c : o.cases) most = std::max(most, symmetric_bytes_for(o, c));
  return most;
}

int run_moe_pe(const MoeRunOptions& o) {
  const std::uint64_t seed = agree_on_seed(o.seed);
  if (shmem_my_pe() == 0)
    fmt::print("shmoe-moe: {} on {} PEs, seed={}\n", op_name(o.op), shmem_n_pes(), seed);
  int status = 0;
  for (const auto& c : o.cases) {
    try {
      status |= run_case(o, c, seed);
    } catch (const moe::Refused& e) {
      fmt::print(stderr, "PE {}: refused: {}\n", shmem_my_pe(), e.what());
      status = 2;
    }
  }
  return status;
}

}  // namespace shmoe::tools
