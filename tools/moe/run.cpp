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
#include <set>
#include <stdexcept>
#include <thread>

#include "dtype.hpp"
#include "harness.hpp"
#include "ordered_lines.hpp"
#include "run_csv.hpp"
#include "slow_pe.hpp"
#include "workload.hpp"

namespace shmoe::tools {
namespace {

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
    const double got = load_f32(c.dtype, b.x_out.data(), i);
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
  const char* bound = dtype == SHMOE_DTYPE_INT32      ? "0.5 + fp32 accumulation"
                      : dtype == SHMOE_DTYPE_FLOAT32  ? "(topk+1)*2^-24*sum|terms|"
                      : dtype == SHMOE_DTYPE_BFLOAT16 ? "2^-8*sum|terms| + accumulation"
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
                     dtype_name(c.dtype), o.warmup, o.loops);
    for (int p = 0; p < P; ++p)
      for (int w = 0; w < workers; ++w)
        f << fmt::format(",{:.3f}", full ? all_worker_us[p * workers + w] : all_comm_us[p]);
    f << "\n";
    fmt::print(
        "perf: {} {} pes={} bs={} h={} topk={} experts_per_pe={} dtype={} time_max={:.1f} us "
        "bandwidth={:.3f} GB/s per_pe={:.3f} GB/s csv={}\n",
        name, metric, P, c.bs, c.hidden, c.topk, c.experts_per_pe, dtype_name(c.dtype), max_us,
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
// fire after this PE is done; /proc tells, so --fail-pe P:stop needs P on this machine: one host,
// simulated hosts or network namespaces).
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

// One case on this PE, as a call object: the buffer and the tool's own buffers, the state the
// phases share, and one method per phase; operator() shows the order and the collective steps.
class CaseRun {
 public:
  CaseRun(const MoeRunOptions& o, const MoeCase& c, std::uint64_t seed);
  ~CaseRun() {
    if (back_ != nullptr) shmem_free(back_);  // collective: every PE allocated it
  }
  CaseRun(const CaseRun&) = delete;
  CaseRun& operator=(const CaseRun&) = delete;

  // The PE's status for the case: 0 when every output verified.
  int operator()() {
    iterate();                                // collective calls, checked as they come
    if (!pids_.empty()) rejoin_after_stop();  // collective: every PE, the stopped one too
    if (!failed_.empty()) return report_failure_on_purpose();
    report_verdict();  // collective unless a PE may be gone
    if (o_.perf && verdict_.ok) report_perf(o_, c_, perf_name(o_), timed_calls());  // collective
    return verdict_.ok ? 0 : 1;
  }

 private:
  int dispatch(const PeInputs& in);
  void combine(const PeInputs& in);
  std::pair<std::uint64_t, std::vector<PeInputs>> inputs_of_iteration(int it) const;
  std::vector<std::size_t> slots() const;
  void iterate();
  void verified_iteration(int it);
  void fail_on_purpose(int it);
  void rejoin_after_stop();
  int report_failure_on_purpose();
  void report_verdict();
  PerfSample timed_calls();

  // The operators' call number of iteration `it`, counted as shrink mode's mask warnings count
  // ("... of call N"): each iteration calls dispatch (and combine) once on this case's own
  // buffer, the library counts calls from 1, and a rejoin goes on from the furthest PE's count
  // (that of the PEs that made every iteration), so iteration `it` is call it + 1 on every PE.
  // "masked=[P] from call N" names the first call whose outputs leave P out: the call whose step
  // the warning says P missed, or the next one when that step was a combine's last (combine
  // reads: P's rows were all read, so the call completed with them), as tests/moe/shrink_cli.sh
  // checks.
  static int call_of(int it) { return it + 1; }

  const MoeRunOptions& o_;
  const MoeCase& c_;
  const std::uint64_t seed_;
  const int P_ = shmem_n_pes(), me_ = shmem_my_pe();
  MoeBuffer buffer_;
  const std::size_t row_bytes_;
  Buffers b_;
  std::byte* expand_x_ = nullptr;    // where dispatch's rows are read
  std::byte* expert_out_ = nullptr;  // where the experts' outputs go
  const shmoe_plane_t plane_;
  const bool check_dispatch_out_, do_combine_;
  // Shrink mode with the receive window as expand_x: the rows stay in their fixed slots.
  const bool in_slots_;
  // Shrink mode: the PEs this PE has masked, passed to every call.
  std::vector<std::int32_t> mask_;
  std::int32_t* pe_mask_ = nullptr;
  // --fail-pe P:stop: every PE's pid, and a word set at every other PE by the stopped PE once it
  // is back (symmetric, zeroed).
  std::vector<pid_t> pids_;
  long* back_ = nullptr;

  Verdict verdict_;
  double worst_combine_ = 0;
  int rows_ = 0;
  std::size_t engine_bytes_ = 0;
  PeInputs mine_;
  std::string failed_;   // this PE failed on purpose (--fail-pe): how
  std::string masking_;  // when and how fast this PE masked others
};

CaseRun::CaseRun(const MoeRunOptions& o, const MoeCase& c, std::uint64_t seed)
    : o_(o),
      c_(c),
      seed_(seed),
      buffer_(moe_config(o, c)),
      row_bytes_(static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype)),
      plane_(op_uses_double_plane(o) ? SHMOE_PLANE_DOUBLE : SHMOE_PLANE_CLASSIC),
      check_dispatch_out_(!op_is_combine(o.op)),
      do_combine_(op_is_combine(o.op) || o.op == MoeOp::kPipeline),
      in_slots_(o.shrink_ms > 0 && !o.copy_out),
      mask_(static_cast<std::size_t>(P_), 0) {
  // The outputs are required even when no row can arrive (--bs 0 gives a capacity of 0): a
  // buffer of at least one row is never null.
  const std::size_t min_rows = std::max<std::size_t>(buffer_.recv_capacity(), 1);
  if (o.copy_out) {
    b_.expand_x.resize(min_rows * row_bytes_);
    b_.expert_out.resize(min_rows * row_bytes_);
  }
  expand_x_ = o.copy_out ? b_.expand_x.data() : static_cast<std::byte*>(buffer_.receive_window());
  expert_out_ = o.copy_out ? b_.expert_out.data() : expand_x_;
  b_.x_out.resize(static_cast<std::size_t>(std::max(c.bs, 1)) * row_bytes_);
  b_.assist_info.resize(min_rows * 3);
  b_.ep_recv_count.resize(static_cast<std::size_t>(P_) * c.experts_per_pe);
  b_.expert_token_nums.resize(c.experts_per_pe);
  b_.expand_scales.resize(min_rows);
  if (o.shrink_ms > 0) pe_mask_ = mask_.data();
  if (o.fail_action == FailAction::kStop && !o.fail_pes.empty()) {
    pids_ = exchange_pids();  // collective
    back_ = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  }
}

int CaseRun::dispatch(const PeInputs& in) {
  DispatchArgs a;
  a.plane = plane_;
  a.x = in.x.data();
  a.topk_idx = in.expert_ids.data();
  a.topk_weights = in.scales.data();
  a.num_tokens = in.bs;
  a.pe_mask = pe_mask_;
  DispatchOutputs out;
  out.recv_x = expand_x_;
  out.recv_src_info = b_.assist_info.data();
  out.recv_layout_prefix = b_.ep_recv_count.data();
  out.num_recv_tokens_per_expert = b_.expert_token_nums.data();
  out.recv_weights = b_.expand_scales.data();
  return buffer_.dispatch(a, out);
}

void CaseRun::combine(const PeInputs& in) {
  CombineArgs a;
  a.plane = plane_;
  a.x = expert_out_;
  a.src_info = b_.assist_info.data();
  a.layout_prefix = b_.ep_recv_count.data();
  a.topk_idx = in.expert_ids.data();
  a.topk_weights = in.scales.data();
  a.num_tokens = in.bs;
  a.combined_x = b_.x_out.data();
  a.pe_mask = pe_mask_;
  buffer_.combine(a);
}

std::pair<std::uint64_t, std::vector<PeInputs>> CaseRun::inputs_of_iteration(int it) const {
  const std::uint64_t s = seed_ + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(it);
  std::vector<PeInputs> all;
  for (int pe = 0; pe < P_; ++pe) all.push_back(make_inputs(o_, c_, s, pe, P_));
  return {s, std::move(all)};
}

std::vector<std::size_t> CaseRun::slots() const {
  return in_slots_ ? fixed_slots(b_, P_, c_.bs) : std::vector<std::size_t>{};
}

void CaseRun::iterate() {
  for (int it = 0; it < o_.iterations && verdict_.ok; ++it) {
    if (o_.fails(me_) && it == o_.fail_iteration) return fail_on_purpose(it);
    verified_iteration(it);
  }
}

// Iteration `it`'s calls, checked against a reference without the PEs this PE has masked.
void CaseRun::verified_iteration(int it) {
  const auto [s, all] = inputs_of_iteration(it);
  mine_ = all[me_];
  const std::size_t masked_before = masked_pes(mask_).size();
  const auto t0 = std::chrono::steady_clock::now();
  rows_ = dispatch(mine_);
  engine_bytes_ += buffer_.last_timing().bytes_via_copy_engine;
  const std::vector<std::size_t> where = slots();
  if (check_dispatch_out_) {
    check_dispatch(b_, expand_x_, rows_, golden_dispatch(without(all, masked_pes(mask_)), c_, me_),
                   row_bytes_, where, verdict_);
  }
  if (do_combine_) {
    run_experts(b_, expand_x_, expert_out_, c_, me_, P_, rows_, row_bytes_, where);
    combine(mine_);
    engine_bytes_ += buffer_.last_timing().bytes_via_copy_engine;
    const PeInputs kept = without_experts_of(mine_, masked_pes(mask_), c_.experts_per_pe);
    worst_combine_ = std::max(worst_combine_, check_combine(b_, kept, c_, verdict_));
  }
  if (masked_pes(mask_).size() > masked_before) {
    masking_ += fmt::format(
        " masked=[{}] from call {} (iteration {}) within {:.0f} ms",
        fmt::join(masked_pes(mask_), ","), call_of(it), it,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// --fail-pe: this PE quits calling, or is stopped (or killed) somewhere in the first 500 us of
// the iteration's calls; once resumed, it finishes the calls it is in (the others no longer
// answer it, so it masks them). A kill that comes after the calls comes at the latest in join():
// the PE never goes on.
void CaseRun::fail_on_purpose(int it) {
  if (o_.fail_action == FailAction::kQuit) {
    failed_ = fmt::format("quit (stopped calling) at call {} (iteration {})", call_of(it), it);
    return;
  }
  const auto [s, all] = inputs_of_iteration(it);
  mine_ = all[me_];
  std::atomic<bool> calling{false};
  const int sig = o_.fail_action == FailAction::kKill ? SIGKILL : SIGSTOP;
  std::thread stopper = signal_after(calling, std::chrono::microseconds((s >> 7) % 500), sig);
  calling.store(true, std::memory_order_release);
  dispatch(mine_);
  run_experts(b_, expand_x_, expert_out_, c_, me_, P_, buffer_.last_timing().rows_received,
              row_bytes_, slots());
  // Stopped in the middle of its reads past the bound, its combine fails (the others masked it
  // and went on): that is the library's answer, not this run's failure.
  std::string combine_error;
  try {
    combine(mine_);
  } catch (const shmoe::Error& e) {
    combine_error = fmt::format(" (its combine failed: {})", e.what());
  }
  stopper.join();
  failed_ = fmt::format("stopped by SIGSTOP during call {} (iteration {}) and resumed{}",
                        call_of(it), it, combine_error);
}

// The lowest other PE resumes the stopped one once done; that one says when it is back (its
// calls of the iteration it was stopped in end at their bound), and every PE rejoins: one more
// iteration, checked with every PE live on every PE.
void CaseRun::rejoin_after_stop() {
  const int stopped = o_.fail_pes[0];  // stop takes one PE
  if (me_ != stopped) {
    if (me_ == (stopped == 0 ? 1 : 0))
      resume_when_stopped(pids_[static_cast<std::size_t>(stopped)]);
    shmem_long_wait_until(back_, SHMEM_CMP_EQ, 1);
  } else {
    for (int pe = 0; pe < P_; ++pe) {
      if (pe != me_) shmem_long_atomic_set(back_, 1, pe);
    }
  }
  buffer_.rejoin(mask_.data());
  if (!masked_pes(mask_).empty()) {
    verdict_.fail(
        fmt::format("PEs {} still masked after the rejoin", fmt::join(masked_pes(mask_), ",")));
  }
  verified_iteration(o_.iterations);
  masking_ += fmt::format(" rejoined: every PE live, call {} (iteration {}) checked",
                          call_of(o_.iterations), o_.iterations);
}

int CaseRun::report_failure_on_purpose() {
  fmt::print("PE {}: failed on purpose: {}{}\n", me_, failed_,
             pids_.empty() ? std::string()
                           : fmt::format("; rejoined: verify={}{}", verdict_.ok ? "pass" : "FAIL",
                                         verdict_.ok ? "" : " first mismatch: " + verdict_.detail));
  std::fflush(stdout);
  return verdict_.ok ? 0 : 1;
}

void CaseRun::report_verdict() {
  std::string checks = check_dispatch_out_ ? "dispatch_exact" : "";
  if (do_combine_) checks += std::string(checks.empty() ? "" : ",") + "combine_fp64";
  const bool double_plane = plane_ == SHMOE_PLANE_DOUBLE;
  const std::string op =
      op_name(o_.op) + (o_.op == MoeOp::kPipeline && double_plane ? "-doubleplane" : "");
  const std::string line = fmt::format(
      "PE {}: {} verify={}({}) bs={} h={} topk={} experts_per_pe={} dtype={} rows={} "
      "iterations={}{}{}{}",
      me_, op, verdict_.ok ? "pass" : "FAIL", checks, mine_.bs, c_.hidden, c_.topk,
      c_.experts_per_pe, dtype_name(c_.dtype), rows_, o_.iterations,
      do_combine_ ? combine_verdict(worst_combine_, c_.dtype) : "",
      (double_plane ? fmt::format(" copy_engine_bytes={}", engine_bytes_) : "") + masking_,
      verdict_.ok ? "" : " first mismatch: " + verdict_.detail);
  if (o_.fail_pes.empty()) {
    // Every PE is alive: PE 0 prints the lines in PE order and the case's summary.
    print_in_pe_order(line, verdict_.ok,
                      fmt::format("{} bs={} h={} topk={} experts_per_pe={} dtype={}", op, c_.bs,
                                  c_.hidden, c_.topk, c_.experts_per_pe, dtype_name(c_.dtype)));
  } else {
    fmt::print("{}\n", line);  // a PE may be gone: each prints its own
    std::fflush(stdout);
  }
}

// Timed calls reuse the last verified inputs; what is timed is what the op name says. What each
// call measured is read into vectors sized once, so the loop allocates nothing.
PerfSample CaseRun::timed_calls() {
  PerfSample sample;
  sample.worker_us.assign(static_cast<std::size_t>(buffer_.last_timing().workers), 0);
  sample.source_wait_us.assign(static_cast<std::size_t>(P_), 0);
  const auto delay =
      std::chrono::duration<double, std::micro>(me_ == o_.delay_pe ? o_.delay_us : 0);
  std::vector<double> w(sample.worker_us.size()), waits(sample.source_wait_us.size());
  std::vector<double> call_w(w.size()), call_waits(waits.size());
  for (int i = 0; i < o_.warmup + o_.loops; ++i) {
    double comm = 0, bytes = 0;
    std::fill(w.begin(), w.end(), 0.0);
    std::fill(waits.begin(), waits.end(), 0.0);
    auto add = [&] {
      const MoeTiming t = buffer_.last_timing();
      buffer_.last_worker_times(call_w);
      buffer_.last_source_waits(call_waits);
      for (std::size_t k = 0; k < w.size(); ++k) w[k] += call_w[k];
      for (std::size_t s = 0; s < waits.size(); ++s) waits[s] += call_waits[s];
      comm += t.comm_us;
      bytes += static_cast<double>(t.bytes_sent);
    };
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (!op_is_combine(o_.op)) {
      dispatch(mine_);
      add();
    }
    if (do_combine_) {
      combine(mine_);
      add();
    }
    if (i >= o_.warmup) {
      for (std::size_t k = 0; k < w.size(); ++k) sample.worker_us[k] += w[k] / o_.loops;
      for (std::size_t s = 0; s < waits.size(); ++s)
        sample.source_wait_us[s] += waits[s] / o_.loops;
      sample.comm_us += comm / o_.loops;
      sample.bytes += bytes / o_.loops;
    }
  }
  return sample;
}

}  // namespace

std::size_t symmetric_bytes_for(const MoeRunOptions& o, const MoeCase& c) {
  // Room beyond the operator's windows for the seed and the perf report's scratch.
  return MoeBuffer::symmetric_bytes(moe_config(o, c), o.pes) + (64u << 20);
}

std::size_t symmetric_bytes_needed(const MoeRunOptions& o) {
  std::size_t most = 0;
  for (const auto& c : o.cases) most = std::max(most, symmetric_bytes_for(o, c));
  return most;
}

int run_moe_pe(const MoeRunOptions& o) {
  return run_driver(
      o.seed,
      [&](std::uint64_t seed) {
        return fmt::format("shmoe-moe: {} on {} PEs, seed={}", op_name(o.op), shmem_n_pes(), seed);
      },
      o.cases.size(),
      [&](std::size_t i, std::uint64_t seed) { return CaseRun(o, o.cases[i], seed)(); });
}

}  // namespace shmoe::tools
