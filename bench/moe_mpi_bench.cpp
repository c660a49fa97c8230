// shmoe's dispatch and combine against Open MPI's MPI_Alltoallv on the same rows and routing, in
// one job that mpirun starts (MPI and OpenSHMEM in the same processes: shmoe bootstraps over the
// PMIx server mpirun runs). Each round times, in turn (the order rotating round by round), LOOPS
// dispatch + combine pairs of
//   window:  shmoe, dispatch's rows left in its receive window and combined from there;
//   owned:   shmoe into results the caller owns (what DeepEP's API returns): a receive block that
//            the dispatch takes for the caller, which the senders write the rows into (no copy),
//            combined from there, then released;
//   mpi:     what an MPI user writes: count and pack each (token, top-k slot) row by destination
//            PE (then by local expert), MPI_Alltoall of the counts, MPI_Alltoallv of the rows and
//            of their (token, slot, expert, weight) records; back by MPI_Alltoallv, then the
//            weighted sum per token in fp32, rounded to bfloat16. Its receiver keeps rows grouped
//            by source PE: the regrouping by expert that shmoe's layout includes is not charged.
// A call's time is the slowest PE's (MPI_Barrier before each call); a round's is the median over
// its loops. Rank 0 prints each round, then the median over rounds of each time and the ratios
// mpi/window and mpi/owned (above 1: shmoe is faster) with their range over rounds. Every
// combine's output is checked against an fp64 sum of the same rows (identity experts).
//   mpirun -np 2 build/bench/moe_mpi_bench [--tokens 128] [--hidden 7168] [--topk 8]
//       [--experts-per-pe 8] [--loops 10] [--rounds 7] [--max-recv-rows N]
// bench/moe_mpi_bench.sh runs it at decode and prefill shapes on 2 and 4 PEs.
#include <mpi.h>
#include <shmem.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "shmoe/moe.hpp"
#include "timing.hpp"

namespace {

using shmoe::bench::median;

struct Shape {
  int tokens = 128, hidden = 7168, topk = 8, experts_per_pe = 8, loops = 10, rounds = 7;
  long max_recv_rows = 0;  // 0: tokens * topk * 5 / 4 (uniform routing's mean plus a margin)
  int n = 1, rank = 0;
  int num_experts() const { return n * experts_per_pe; }
  std::size_t row_bytes() const { return static_cast<std::size_t>(hidden) * 2; }
};

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t float_to_bf16(float f) {  // round to nearest even (no NaN in these data)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// This PE's tokens: bfloat16 rows, top-k distinct experts each, weights in (0, 1).
struct Routing {
  std::vector<std::uint16_t> x;
  std::vector<std::int32_t> topk_idx;
  std::vector<float> weights;

  explicit Routing(const Shape& s) {
    std::mt19937_64 rng(std::random_device{}() ^ (0x9e3779b97f4a7c15ull * (s.rank + 1)));
    std::normal_distribution<float> value;
    std::uniform_real_distribution<float> weight(0.01f, 1.0f);
    x.resize(static_cast<std::size_t>(s.tokens) * s.hidden);
    for (auto& v : x) v = float_to_bf16(value(rng));
    std::vector<std::int32_t> experts(static_cast<std::size_t>(s.num_experts()));
    std::iota(experts.begin(), experts.end(), 0);
    for (int t = 0; t < s.tokens; ++t) {
      for (int k = 0; k < s.topk; ++k) {  // a partial Fisher-Yates shuffle: distinct experts
        std::uniform_int_distribution<int> pick(k, s.num_experts() - 1);
        std::swap(experts[k], experts[pick(rng)]);
        topk_idx.push_back(experts[k]);
        weights.push_back(weight(rng));
      }
    }
  }
};

// What the combine must give: sum over k of weight * x row, in fp64, and the bound a bfloat16
// result of an fp32 sum meets (half a bfloat16 ulp of the value, plus the fp32 sum's rounding).
bool combined_ok(const Shape& s, const Routing& r, const std::vector<std::uint16_t>& y) {
  for (int t = 0; t < s.tokens; ++t)
    for (int h = 0; h < s.hidden; ++h) {
      double ref = 0, mag = 0;
      for (int k = 0; k < s.topk; ++k) {
        const std::size_t i = static_cast<std::size_t>(t) * s.topk + k;
        const double term =
            double(r.weights[i]) * bf16_to_float(r.x[std::size_t(t) * s.hidden + h]);
        ref += term;
        mag += std::fabs(term);
      }
      const double got = bf16_to_float(y[std::size_t(t) * s.hidden + h]);
      if (std::fabs(got - ref) > std::ldexp(std::fabs(ref), -8) + std::ldexp(mag, -20))
        return false;
    }
  return true;
}

// shmoe's operators on one buffer; `owned` picks where dispatch's rows go.
class ShmoeRun {
 public:
  ShmoeRun(const Shape& s, const Routing& r) : s_(s), r_(r), buffer_(config(s)) {
    const std::size_t cap = buffer_.recv_capacity();
    src_info_.resize(cap * 3);
    recv_weights_.resize(cap);
    layout_prefix_.resize(static_cast<std::size_t>(s.experts_per_pe) * s.n);
    per_expert_.resize(static_cast<std::size_t>(s.experts_per_pe));
    combined_.resize(static_cast<std::size_t>(s.tokens) * s.hidden);
  }

  static shmoe::MoeConfig config(const Shape& s) {
    shmoe::MoeConfig c;
    c.num_experts_per_pe = s.experts_per_pe;
    c.max_tokens_per_pe = s.tokens;
    c.hidden = s.hidden;
    c.num_topk = s.topk;
    c.dtype = SHMOE_DTYPE_BFLOAT16;
    c.max_recv_rows = static_cast<std::size_t>(
        s.max_recv_rows > 0 ? s.max_recv_rows : long(s.tokens) * s.topk * 5 / 4);
    c.recv_blocks = 1;  // each owned result is released after its combine
    return c;
  }

  void dispatch(bool owned) {
    recv_x_ = owned ? nullptr : buffer_.receive_window();
    shmoe::DispatchArgs a;
    a.x = r_.x.data();
    a.topk_idx = r_.topk_idx.data();
    a.topk_weights = r_.weights.data();
    a.num_tokens = s_.tokens;
    shmoe::DispatchOutputs o;
    o.recv_x = recv_x_;
    o.recv_src_info = src_info_.data();
    o.recv_layout_prefix = layout_prefix_.data();
    o.num_recv_tokens_per_expert = per_expert_.data();
    o.recv_weights = recv_weights_.data();
    if (owned) {
      o.recv_block = &block_;
      o.recv_block_x = &recv_x_;
    }
    if (buffer_.dispatch(a, o) < 0) throw std::runtime_error("dispatch: max_recv_rows too small");
  }

  void combine() {
    shmoe::CombineArgs a;
    a.x = recv_x_;
    a.src_info = src_info_.data();
    a.layout_prefix = layout_prefix_.data();
    a.topk_idx = r_.topk_idx.data();
    a.topk_weights = r_.weights.data();
    a.num_tokens = s_.tokens;
    a.combined_x = combined_.data();
    buffer_.combine(a);
    if (block_ >= 0) buffer_.release_block(std::exchange(block_, -1));  // the caller drops it
  }

  const std::vector<std::uint16_t>& combined() const { return combined_; }

 private:
  const Shape& s_;
  const Routing& r_;
  shmoe::MoeBuffer buffer_;
  void* recv_x_ = nullptr;
  std::int32_t block_ = -1;  // the owned result's receive block, held until after its combine
  std::vector<std::uint16_t> combined_;
  std::vector<std::int32_t> src_info_, layout_prefix_, per_expert_;
  std::vector<float> recv_weights_;
};

// The same exchange written with MPI collectives.
class MpiRun {
 public:
  MpiRun(const Shape& s, const Routing& r) : s_(s), r_(r) {
    MPI_Type_contiguous(static_cast<int>(s.row_bytes()), MPI_BYTE, &row_type_);
    MPI_Type_commit(&row_type_);
    MPI_Type_contiguous(4, MPI_INT32_T, &record_type_);
    MPI_Type_commit(&record_type_);
    const std::size_t rows = static_cast<std::size_t>(s.tokens) * s.topk;
    send_rows_.resize(rows * s.hidden);
    back_rows_.resize(rows * s.hidden);
    send_records_.resize(rows);
    combined_.resize(static_cast<std::size_t>(s.tokens) * s.hidden);
    acc_.resize(combined_.size());
  }
  ~MpiRun() {
    MPI_Type_free(&row_type_);
    MPI_Type_free(&record_type_);
  }
  MpiRun(const MpiRun&) = delete;
  MpiRun& operator=(const MpiRun&) = delete;

  void dispatch() {
    pack();
    MPI_Alltoall(send_counts_.data(), 1, MPI_INT, recv_counts_.data(), 1, MPI_INT, MPI_COMM_WORLD);
    recv_displs_ = exclusive_prefix(recv_counts_);
    const std::size_t received =
        static_cast<std::size_t>(recv_displs_.back() + recv_counts_.back());
    recv_rows_.resize(received * s_.hidden);
    recv_records_.resize(received);
    MPI_Alltoallv(send_records_.data(), send_counts_.data(), send_displs_.data(), record_type_,
                  recv_records_.data(), recv_counts_.data(), recv_displs_.data(), record_type_,
                  MPI_COMM_WORLD);
    MPI_Alltoallv(send_rows_.data(), send_counts_.data(), send_displs_.data(), row_type_,
                  recv_rows_.data(), recv_counts_.data(), recv_displs_.data(), row_type_,
                  MPI_COMM_WORLD);
  }

  void combine() {  // the experts are identities: their outputs are the received rows
    MPI_Alltoallv(recv_rows_.data(), recv_counts_.data(), recv_displs_.data(), row_type_,
                  back_rows_.data(), send_counts_.data(), send_displs_.data(), row_type_,
                  MPI_COMM_WORLD);
    std::fill(acc_.begin(), acc_.end(), 0.0f);
    for (std::size_t i = 0; i < send_records_.size(); ++i) {
      const auto& rec = send_records_[i];
      float w;
      std::memcpy(&w, &rec[3], 4);
      float* out = &acc_[static_cast<std::size_t>(rec[0]) * s_.hidden];
      const std::uint16_t* row = &back_rows_[i * s_.hidden];
      for (int h = 0; h < s_.hidden; ++h) out[h] += w * bf16_to_float(row[h]);
    }
    for (std::size_t i = 0; i < acc_.size(); ++i) combined_[i] = float_to_bf16(acc_[i]);
  }

  const std::vector<std::uint16_t>& combined() const { return combined_; }

 private:
  static std::vector<int> exclusive_prefix(const std::vector<int>& c) {
    std::vector<int> p(c.size(), 0);
    for (std::size_t i = 1; i < c.size(); ++i) p[i] = p[i - 1] + c[i - 1];
    return p;
  }

  // Counting sort of the (token, slot) rows by destination PE, then local expert.
  void pack() {
    const int epp = s_.experts_per_pe, experts = s_.num_experts();
    std::vector<int> per_expert(static_cast<std::size_t>(experts) + 1, 0);
    for (const std::int32_t e : r_.topk_idx) ++per_expert[static_cast<std::size_t>(e) + 1];
    std::partial_sum(per_expert.begin(), per_expert.end(), per_expert.begin());
    send_counts_.assign(static_cast<std::size_t>(s_.n), 0);
    for (int pe = 0; pe < s_.n; ++pe)
      send_counts_[pe] = per_expert[std::size_t(pe + 1) * epp] - per_expert[std::size_t(pe) * epp];
    send_displs_ = exclusive_prefix(send_counts_);
    recv_counts_.assign(send_counts_.size(), 0);
    for (int t = 0; t < s_.tokens; ++t)
      for (int k = 0; k < s_.topk; ++k) {
        const std::size_t i = static_cast<std::size_t>(t) * s_.topk + k;
        const int e = r_.topk_idx[i];
        const std::size_t at = static_cast<std::size_t>(per_expert[e]++);
        std::memcpy(&send_rows_[at * s_.hidden], &r_.x[std::size_t(t) * s_.hidden], s_.row_bytes());
        std::int32_t w;
        std::memcpy(&w, &r_.weights[i], 4);
        send_records_[at] = {t, k, e % epp, w};
      }
  }

  const Shape& s_;
  const Routing& r_;
  MPI_Datatype row_type_{}, record_type_{};
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
  std::vector<std::uint16_t> send_rows_, recv_rows_, back_rows_, combined_;
  std::vector<std::array<std::int32_t, 4>> send_records_, recv_records_;
  std::vector<float> acc_;
};

enum Mode { kWindow, kOwned, kMpi, kModes };
const char* const kModeNames[kModes] = {"window", "owned", "mpi"};

// One mode's LOOPS pairs: the medians of the slowest PE's dispatch and combine times (ms), after
// checking the last combine's output on every PE.
std::array<double, 2> time_mode(Mode m, const Shape& s, const Routing& r, ShmoeRun& shmoe_run,
                                MpiRun& mpi_run) {
  std::vector<double> d, c;
  for (int i = 0; i < s.loops; ++i) {
    std::array<double, 2> local{};
    MPI_Barrier(MPI_COMM_WORLD);
    local[0] = shmoe::bench::ms_of(
        [&] { m == kMpi ? mpi_run.dispatch() : shmoe_run.dispatch(m == kOwned); });
    MPI_Barrier(MPI_COMM_WORLD);
    local[1] = shmoe::bench::ms_of([&] { m == kMpi ? mpi_run.combine() : shmoe_run.combine(); });
    std::array<double, 2> slowest{};
    MPI_Allreduce(local.data(), slowest.data(), 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    d.push_back(slowest[0]);
    c.push_back(slowest[1]);
  }
  int ok = combined_ok(s, r, m == kMpi ? mpi_run.combined() : shmoe_run.combined()) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) {
    if (s.rank == 0) std::fprintf(stderr, "moe_mpi_bench: %s combined wrong rows\n", kModeNames[m]);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return {median(d), median(c)};
}

// Median and range over the rounds of a / b.
void print_ratio(const char* name, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> q;
  for (std::size_t i = 0; i < a.size(); ++i) q.push_back(a[i] / b[i]);
  const auto [lo, hi] = std::minmax_element(q.begin(), q.end());
  std::printf("  %-22s %5.2f (%.2f..%.2f)\n", name, median(q), *lo, *hi);
}

void report(const Shape& s, const std::array<std::array<std::vector<double>, 2>, kModes>& t) {
  std::printf(
      "%d PEs, %d tokens, hidden %d, top-%d, %d experts per PE, bfloat16; "
      "medians over %d rounds of %d loops (ms):\n",
      s.n, s.tokens, s.hidden, s.topk, s.experts_per_pe, s.rounds, s.loops);
  for (int m = 0; m < kModes; ++m)
    std::printf("  %-7s dispatch %9.3f  combine %9.3f\n", kModeNames[m], median(t[m][0]),
                median(t[m][1]));
  std::printf("ratios, round by round (above 1: shmoe is faster):\n");
  const char* const op[2] = {"dispatch", "combine"};
  for (int o = 0; o < 2; ++o) {
    print_ratio((std::string(op[o]) + " mpi/window").c_str(), t[kMpi][o], t[kWindow][o]);
    print_ratio((std::string(op[o]) + " mpi/owned").c_str(), t[kMpi][o], t[kOwned][o]);
  }
}

void run(Shape& s) {
  const Routing r(s);
  ShmoeRun shmoe_run(s, r);
  MpiRun mpi_run(s, r);
  std::array<std::array<std::vector<double>, 2>, kModes> t;
  for (int m = 0; m < kModes; ++m) {  // one untimed pass each: first touches, first connections
    Shape once = s;
    once.loops = 1;
    time_mode(Mode(m), once, r, shmoe_run, mpi_run);
  }
  for (int round = 0; round < s.rounds; ++round) {
    std::array<double, 2> per[kModes];
    for (int i = 0; i < kModes; ++i) {  // the order rotates: each mode leads in turn
      const Mode m = Mode((round + i) % kModes);
      per[m] = time_mode(m, s, r, shmoe_run, mpi_run);
    }
    if (s.rank == 0)
      std::printf("round %d: window %.3f + %.3f, owned %.3f + %.3f, mpi %.3f + %.3f ms\n", round,
                  per[kWindow][0], per[kWindow][1], per[kOwned][0], per[kOwned][1], per[kMpi][0],
                  per[kMpi][1]);
    for (int m = 0; m < kModes; ++m)
      for (int o = 0; o < 2; ++o) t[m][o].push_back(per[m][o]);
  }
  if (s.rank == 0) report(s, t);
}

}  // namespace

int main(int argc, char** argv) {
  Shape s;
  CLI::App app("shmoe's dispatch and combine against MPI_Alltoallv, under mpirun");
  app.add_option("--tokens", s.tokens, "tokens per PE")->check(CLI::Range(1, 1 << 16));
  app.add_option("--hidden", s.hidden, "elements per row")->check(CLI::Range(8, 1 << 16));
  app.add_option("--topk", s.topk, "experts per token")->check(CLI::Range(1, 16));
  app.add_option("--experts-per-pe", s.experts_per_pe)->check(CLI::Range(1, 64));
  app.add_option("--loops", s.loops, "timed pairs per mode and round")->check(CLI::Range(1, 10000));
  app.add_option("--rounds", s.rounds)->check(CLI::Range(1, 1000));
  app.add_option("--max-recv-rows", s.max_recv_rows, "rows a PE's window holds (0: 1.25x the mean)")
      ->check(CLI::Range(0L, 1L << 30));
  CLI11_PARSE(app, argc, argv);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.n);
  if (s.topk > s.num_experts()) {
    if (s.rank == 0)
      std::fprintf(stderr, "moe_mpi_bench: --topk=%d is above the %d experts\n", s.topk,
                   s.num_experts());
    MPI_Finalize();
    return 2;
  }
  // The heap the buffer needs, unless the caller sized it.
  const std::size_t heap =
      shmoe::MoeBuffer::symmetric_bytes(ShmoeRun::config(s), s.n) + (64u << 20);
  setenv("SHMEM_SYMMETRIC_SIZE", std::to_string(heap).c_str(), 0);
  shmem_init();
  run(s);
  shmem_finalize();
  MPI_Finalize();
  return 0;
}
