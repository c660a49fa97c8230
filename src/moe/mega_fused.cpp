// The fused MegaMoE operator: one launch of M matrix and 2M vector workers per PE.
//
// Call g, in order of what each worker kind does:
//  vector 0   header: routing counts, parameters and input errors to every PE (HeaderExchange),
//             then the plan (where each of this PE's rows lands) and this PE's waves.
//  vectors    quantize this PE's tokens (MX FP8, one E8M0 scale per 32 elements), then push each
//             (token, slot) row into its place in the destination's window as a put-with-signal
//             that adds 1 to its wave's arrival counter (the signal lands after the row).
//  matrix m   for its waves j = m, m + M, ...: wait until the wave's rows have all arrived, then
//             MegaSchedule::kOverlapped: run GEMM1 into hand-over slot j % 2, then GEMM2 on the
//             previous wave once the vector workers have applied SwiGLU to it: GEMM1 of wave j
//             overlaps SwiGLU of wave j - 1, and GEMM2 of wave j - 1 overlaps the write-back of
//             wave j - 2;
//             MegaSchedule::kInline (fewer cores than workers): GEMM1 with SwiGLU and
//             re-quantization as its epilogue, then GEMM2 with the write-back as its epilogue,
//             of wave j itself, before wave j + 1.
//  vectors    (kOverlapped; worker 2m + h takes half h of matrix m's tiles) SwiGLU and
//             re-quantize, then write each output row straight into its source PE's combine
//             window at (token, slot).
//  vector 0   after all have quieted: combine-done g to every PE.
//  vectors    wait for every PE's combine-done g, then reduce this PE's tokens: top-k rows
//             weighted, fp32, increasing slot -> BF16.
//
// MegaSchedule::kSolo: no workers; the calling thread does the parts above in that order (plan,
// quantize and dispatch every token, every wave inline, combine-done, reduce). The protocol
// between PEs is the same, so PEs may differ in schedule.
//
// Nothing is reset between calls: flags carry the generation and arrival counters only grow (this
// PE remembers what each counter held when its wave last completed). A PE's rows for call g + 1
// are written only after every PE's header of g + 1 arrived, i.e. after every PE finished call g.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/backoff.hpp"
#include "moe/combine_reduce.hpp"
#include "moe/mega_state.hpp"

namespace shmoe::moe {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until a hand-over word (see TileSlots) shows `uses` uses of its slot.
void wait_for_use(std::uint32_t& word, std::uint64_t uses, const char* what, std::size_t wave) {
  shmoe::WakeWord(&word).wait_for(
      static_cast<std::uint32_t>(2 * uses), shmoe::wait_policy().spin_iterations,
      [&] { return fmt::format("MegaMoE: waiting for {} (local wave {})", what, wave); });
}

void publish_use(std::uint32_t& word, std::uint64_t uses) {
  shmoe::WakeWord(&word).publish(static_cast<std::uint32_t>(2 * uses));
}

// Uses of slot j % 2 up to and including the worker's j-th wave.
std::uint64_t uses(std::size_t j) {
  return j / 2 + 1;
}

// The share of its kind's work one thread does: part `index` of `count` (waves of the matrix
// workers, tokens of the vector workers), recorded in the trace as worker `worker`.
struct Part {
  int worker = 0, index = 0, count = 1;
};

Part part_of(const kernel::KernelContext& w) {
  return {w.worker_id(), w.kind_id(), w.kind_count()};
}

// GEMM2's epilogue on one worker: each output row rounded straight into its source PE's combine
// window at (token, slot) where that window is mapped here (this PE's own, or a PE of this host),
// else into a staging row (one per row of the GEMM's chunk) that is put there once written.
class CombineWriter {
 public:
  explicit CombineWriter(const MegaMoE::State& s)
      : s_(s), row_bytes_(static_cast<std::size_t>(s.cfg.model_dim) * 2) {
    for (int pe = 0; pe < s.n_pes; ++pe)
      mapped_.push_back(static_cast<std::byte*>(shmem_ptr(s.combine_rows, pe)));
    every_mapped_ = std::find(mapped_.begin(), mapped_.end(), nullptr) == mapped_.end();
    if (!every_mapped_)
      staging_.resize(static_cast<std::size_t>(GemmEngine::kChunkRows) * s.cfg.model_dim);
  }

  // Output row r of `wave` goes to the source of received row wave.row0 + r. On one host every
  // row is written in place, and nothing follows it. Past the cache where another PE's reduction
  // reads the row; through it where this PE's own does (it then finds the row in cache: the
  // write-back and the reduction took 0.11 instead of 0.15 ms per PE per call at model_dim 512,
  // decode) or a staging row is read back at once by the put.
  OutRows rows_of(const Wave& wave) {
    OutRows rows{[this, &wave](int r) {
                   const RowMeta meta = s_.received_meta(wave.row0 + r);
                   std::byte* mapped = mapped_[static_cast<std::size_t>(meta.src_pe)];
                   if (mapped == nullptr) return OutRow{staging_row(r)};
                   return OutRow{reinterpret_cast<std::uint16_t*>(mapped + s_.combine_offset(meta)),
                                 meta.src_pe != s_.me};
                 },
                 {}};
    if (!every_mapped_) {
      rows.written = [this, &wave](int r) {
        const RowMeta meta = s_.received_meta(wave.row0 + r);
        if (mapped_[static_cast<std::size_t>(meta.src_pe)] == nullptr)
          shmem_putmem(s_.combine_rows + s_.combine_offset(meta), staging_row(r), row_bytes_,
                       meta.src_pe);
      };
    }
    return rows;
  }

 private:
  std::uint16_t* staging_row(int r) {
    return staging_.data() +
           static_cast<std::size_t>(r % GemmEngine::kChunkRows) * s_.cfg.model_dim;
  }

  const MegaMoE::State& s_;
  const std::size_t row_bytes_;
  std::vector<std::uint16_t> staging_;  // another host's rows of one chunk
  std::vector<std::byte*> mapped_;      // [pe]: its combine window here, or null (another host)
  bool every_mapped_ = false;           // one host: no row goes through staging_
};

class FusedCall {
 public:
  FusedCall(MegaMoE::State& s, const MegaMoEArgs& in, std::uint64_t g) : s_(s), in_(in), g_(g) {}

  // One worker's part of the call (MegaSchedule kOverlapped and kInline).
  void operator()(kernel::KernelContext& w) {
    const Part me = part_of(w);
    const bool planner = w.kind() == kernel::WorkerKind::kVector && me.index == 0;
    if (planner) {
      plan_or_fail(me.worker);
      publish_use(s_.plan_published, 1);
    }
    // Each vector worker dispatches the tokens it quantized itself, so the others need only the
    // plan. They wait for it on its word rather than at a barrier: the header exchange takes a
    // few microseconds, and a worker asleep at a barrier costs a wake-up, tens in a VM.
    if (w.kind() == kernel::WorkerKind::kVector) quantize_my_tokens(me);
    if (!planner) wait_for_use(s_.plan_published, 1, "vector worker 0's call plan", 0);
    if (!s_.error.empty()) return;
    if (w.kind() == kernel::WorkerKind::kMatrix) {
      matrix_pipeline(me);
    } else {
      push_rows(me);
      vector_pipeline(me);
    }
    shmem_quiet();  // whichever worker wrote rows back (MegaSchedule), before combine-done
    w.barrier();
    if (w.kind() == kernel::WorkerKind::kMatrix) return;
    // Every vector worker waits for every PE's combine-done itself rather than at a third
    // barrier: a worker asleep there costs a wake-up, tens of microseconds in a VM, per call.
    finish_combine(me);
    reduce(me);
  }

  // The whole call on the calling thread (MegaSchedule::kSolo), as one part of everything.
  void solo() {
    const Part all;
    plan_or_fail(all.worker);
    if (!s_.error.empty()) return;
    quantize_my_tokens(all);
    push_rows(all);
    matrix_inline(all);
    shmem_quiet();
    finish_combine(all);
    reduce(all);
  }

 private:
  const MegaMoEConfig& cfg() const { return s_.cfg; }

  void plan_or_fail(int worker) {
    try {
      plan(worker);
    } catch (const std::exception& e) {  // the others wait for the plan: let them stop too
      s_.error = fmt::format("MegaMoE: planning call #{} failed: {}", g_, e.what());
    }
  }

  void plan(int worker) {
    auto scope = s_.trace.scope(worker, "header+plan");
    const int L = cfg().experts_per_pe;
    *s_.headers.mine(g_, s_.me) = mega_header(s_, in_, s_.headers.counts(g_, s_.me));
    const auto headers = s_.headers.exchange(g_, s_.me, "MegaMoE header");
    s_.error = first_call_error("MegaMoE", headers, s_.me, s_.experts(), cfg().tokens, "tokens",
                                "the operator's configured tokens");
    if (!s_.error.empty()) return;
    s_.error =
        plan_routes(s_.headers, g_, s_.me, s_.n_pes, L, in_.expert_ids, in_.tokens, cfg().topk,
                    s_.recv_cap, "MegaMoE", "max_recv_rows (MAX_RECEIVED_TOKENS)", s_.plan);
    if (!s_.error.empty()) return;
    std::vector<std::int64_t> rows(L);
    for (int e = 0; e < L; ++e) rows[e] = s_.plan.expert_rows(s_.me, e);
    s_.waves = cut_waves(rows, cfg().wave_rows);
    if (in_.expert_token_counts != nullptr) {  // optional (shmoe_mega_moe_run)
      for (int e = 0; e < L; ++e) in_.expert_token_counts[e] = static_cast<std::int32_t>(rows[e]);
    }
    address_waves(headers);
  }

  // Where each destination's expert blocks start, their first wave, and its wave rows (its
  // header's), to address the arrival counters there.
  void address_waves(const std::vector<const CallHeader*>& headers) {
    const int P = s_.n_pes, L = cfg().experts_per_pe;
    block_start_.assign(static_cast<std::size_t>(P) * L, 0);
    block_wave_.assign(static_cast<std::size_t>(P) * L, 0);
    wave_rows_.assign(static_cast<std::size_t>(P), cfg().wave_rows);
    first_wave_.assign(static_cast<std::size_t>(P) + 1, 0);
    for (int dst = 0; dst < P; ++dst) {
      if (headers[dst] != nullptr) wave_rows_[dst] = headers[dst]->wave_rows;
      std::int64_t start = 0, wave = 0;
      for (int e = 0; e < L; ++e) {
        block_start_[dst * L + e] = start;
        block_wave_[dst * L + e] = wave;
        const std::int64_t n = s_.plan.expert_rows(dst, e);
        start += n;
        wave += (n + wave_rows_[dst] - 1) / wave_rows_[dst];
      }
      first_wave_[dst + 1] = first_wave_[dst] + static_cast<std::size_t>(wave);
    }
  }

  // Rounded up, so that a few tokens go to vector worker 0 first: it is awake (it planned the
  // call) while the pool may still be waking the others.
  std::pair<std::size_t, std::size_t> my_tokens(const Part& p) const {
    const auto T = static_cast<std::size_t>(in_.tokens);
    const auto id = static_cast<std::size_t>(p.index), n = static_cast<std::size_t>(p.count);
    return {(T * id + n - 1) / n, (T * (id + 1) + n - 1) / n};
  }

  void quantize_my_tokens(const Part& p) {
    // Bad input is refused after the header exchange; until then, touch nothing it points at.
    if (in_.tokens < 0 || in_.tokens > cfg().tokens || (in_.tokens > 0 && in_.x == nullptr)) return;
    auto scope = s_.trace.scope(p.worker, "quantize");
    const auto [t0, t1] = my_tokens(p);
    const std::size_t stride = s_.row_slot;
    quantize_tokens(s_.shape, in_.x + t0 * cfg().model_dim, t1 - t0,
                    s_.my_rows.data() + t0 * stride, stride);
  }

  // Rows of this worker's tokens to their destinations, then each destination wave's arrival
  // counter once, by the rows this worker put in it, after a fence (the rows land first). A
  // put-with-signal per row needs no fence, but its atomic add on a line every sender adds to
  // cost about 40 ns a row on one host (a third of the dispatch stage at 2048 tokens); over UCX the
  // fence is one flush per call. The puts are blocking: the next slot of the same token
  // rewrites the source's side-band.
  void push_rows(const Part& p) {
    auto scope = s_.trace.scope(p.worker, "dispatch");
    const int L = cfg().experts_per_pe, k = cfg().topk;
    const std::size_t stride = s_.row_slot, row_bytes = s_.shape.token_row().bytes();
    std::vector<std::uint32_t> added(first_wave_.back(), 0);  // [first_wave_[dst] + wave]
    const auto [t0, t1] = my_tokens(p);
    for (std::size_t t = t0; t < t1; ++t) {
      for (int slot = 0; slot < k; ++slot) {
        const std::size_t i = t * k + slot;
        const std::int64_t pos = s_.plan.positions[i];
        if (pos < 0) continue;
        const int e = in_.expert_ids[i], dst = e / L;
        // The row's side-band rides behind it in the same put.
        std::byte* mine = s_.my_rows.data() + t * stride;
        const RowMeta meta{s_.me, static_cast<std::int32_t>(t), slot, 1.0f};
        std::memcpy(mine + row_bytes, &meta, sizeof meta);
        const std::int64_t wave = block_wave_[e] + (pos - block_start_[e]) / wave_rows_[dst];
        shmem_putmem(s_.recv_rows + static_cast<std::size_t>(pos) * stride, mine,
                     row_bytes + sizeof meta, dst);
        ++added[first_wave_[dst] + static_cast<std::size_t>(wave)];
      }
    }
    shmem_fence();
    for (int dst = 0; dst < s_.n_pes; ++dst) {
      const std::size_t first = first_wave_[dst];
      for (std::size_t v = first; v < first_wave_[dst + 1]; ++v) {
        if (added[v] != 0) shmem_signal_add(s_.arrivals(v - first), added[v], dst);
      }
    }
  }

  // Matrix part p's waves: p.index, p.index + p.count, ...
  std::vector<std::size_t> waves_of(const Part& p) const {
    std::vector<std::size_t> mine;
    for (std::size_t v = static_cast<std::size_t>(p.index); v < s_.waves.size();
         v += static_cast<std::size_t>(p.count))
      mine.push_back(v);
    return mine;
  }

  // Output rows [r0, r1) of a wave straight into their source PEs' combine windows.
  void write_back(const Wave& wave, const std::uint16_t* out, int r0, int r1) {
    const std::size_t row_bytes = static_cast<std::size_t>(cfg().model_dim) * 2;
    for (int r = r0; r < r1; ++r) {
      const RowMeta meta = s_.received_meta(wave.row0 + r);
      shmem_putmem(s_.combine_rows + s_.combine_offset(meta),
                   out + static_cast<std::size_t>(r) * cfg().model_dim, row_bytes, meta.src_pe);
    }
  }

  void wait_for_rows(std::size_t v) {
    const Wave& wave = s_.waves[v];
    std::atomic_ref<std::uint64_t> arrived(*s_.arrivals(v));
    const std::uint64_t target = s_.arrivals_seen[v] + static_cast<std::uint64_t>(wave.rows);
    shmoe::wait_until([&] { return arrived.load(std::memory_order_acquire) >= target; },
                      [&] {
                        return fmt::format(
                            "MegaMoE #{} wave {} (local expert {}, rows {}..{}): {} of {} rows "
                            "arrived",
                            g_, v, wave.expert, wave.row0, wave.row0 + wave.rows - 1,
                            arrived.load() - s_.arrivals_seen[v], wave.rows);
                      });
    s_.arrivals_seen[v] = target;
  }

  // MegaSchedule::kInline: each wave from its rows to its combine windows on this worker, SwiGLU
  // and re-quantization in GEMM1's epilogue and the write-back in GEMM2's, block by block while
  // the GEMM's output is in cache (expert_ffn.hpp).
  void matrix_inline(const Part& p) {
    TileSlots& t = *s_.slots[p.index];
    const std::size_t stride = s_.row_slot;
    FfnScratch& scratch = t.scratch;
    CombineWriter combine(s_);
    for (const std::size_t v : waves_of(p)) {
      const Wave& wave = s_.waves[v];
      const int id = static_cast<int>(v);
      const EpilogueTrace epilogue{&s_.trace, p.worker, id};
      {
        auto scope = s_.trace.scope(p.worker, "wait rows", id);
        wait_for_rows(v);
      }
      {
        auto scope = s_.trace.scope(p.worker, "gemm1", id);
        gemm1_swiglu(s_.shape, s_.gemm, s_.weights[wave.expert],
                     s_.recv_rows + static_cast<std::size_t>(wave.row0) * stride, stride, wave.rows,
                     t.gemm2_in.data(), scratch, epilogue);
      }
      auto scope = s_.trace.scope(p.worker, "gemm2", id);
      gemm2_rows(s_.shape, s_.gemm, s_.weights[wave.expert], t.gemm2_in.data(), wave.rows,
                 combine.rows_of(wave), scratch, epilogue);
    }
  }

  void matrix_pipeline(const Part& part) {
    if (cfg().schedule == MegaSchedule::kInline) return matrix_inline(part);
    TileSlots& t = *s_.slots[part.index];
    const auto mine = waves_of(part);
    const std::size_t stride = s_.row_slot;
    FfnScratch& scratch = t.scratch;
    auto gemm2 = [&](std::size_t j) {
      const Wave& wave = s_.waves[mine[j]];
      const int p = static_cast<int>(j % 2);
      for (int half = 0; half < 2; ++half) {
        wait_for_use(t.words.act_done[p][half], uses(j), "SwiGLU", mine[j]);
        if (j >= 2) wait_for_use(t.words.out_free[p][half], uses(j - 2), "write-back", mine[j - 2]);
      }
      auto scope = s_.trace.scope(part.worker, "gemm2", static_cast<int>(mine[j]));
      gemm2_tile(s_.shape, s_.gemm, s_.weights[wave.expert], t.act[p].data(), wave.rows,
                 t.out[p].data(), scratch);
      publish_use(t.words.out_full[p], uses(j));
    };
    for (std::size_t j = 0; j < mine.size(); ++j) {
      const std::size_t v = mine[j];
      const Wave& wave = s_.waves[v];
      {
        auto scope = s_.trace.scope(part.worker, "wait rows", static_cast<int>(v));
        wait_for_rows(v);
      }
      {
        auto scope = s_.trace.scope(part.worker, "gemm1", static_cast<int>(v));
        const int p = static_cast<int>(j % 2);
        gemm1_tile(s_.shape, s_.gemm, s_.weights[wave.expert],
                   s_.recv_rows + static_cast<std::size_t>(wave.row0) * stride, stride, wave.rows,
                   t.h[p].data(), scratch);
        publish_use(t.words.h_full[p], uses(j));
      }
      if (j >= 1) gemm2(j - 1);
    }
    if (!mine.empty()) gemm2(mine.size() - 1);
  }

  void vector_pipeline(const Part& part) {
    const int m = part.index / 2, half = part.index % 2;
    if (cfg().schedule == MegaSchedule::kInline || m >= cfg().workers.matrix) return;
    TileSlots& t = *s_.slots[m];
    const auto mine = waves_of({-1, m, cfg().workers.matrix});
    auto halves = [&](const Wave& wave) {
      const int mid = wave.rows / 2;
      return half == 0 ? std::pair{0, mid} : std::pair{mid, wave.rows};
    };
    auto write_back_half = [&](std::size_t j) {
      const Wave& wave = s_.waves[mine[j]];
      const int p = static_cast<int>(j % 2);
      wait_for_use(t.words.out_full[p], uses(j), "GEMM2", mine[j]);
      auto scope = s_.trace.scope(part.worker, "write-back", static_cast<int>(mine[j]));
      const auto [r0, r1] = halves(wave);
      write_back(wave, t.out[p].data(), r0, r1);
      publish_use(t.words.out_free[p][half], uses(j));
    };
    for (std::size_t j = 0; j < mine.size(); ++j) {
      const Wave& wave = s_.waves[mine[j]];
      const int p = static_cast<int>(j % 2);
      wait_for_use(t.words.h_full[p], uses(j), "GEMM1", mine[j]);
      {
        auto scope = s_.trace.scope(part.worker, "swiglu", static_cast<int>(mine[j]));
        const auto [r0, r1] = halves(wave);
        swiglu_quantize(s_.shape, t.h[p].data(), r0, r1, t.act[p].data());
      }
      publish_use(t.words.act_done[p][half], uses(j));
      if (j >= 1) write_back_half(j - 1);
    }
    if (!mine.empty()) write_back_half(mine.size() - 1);
  }

  // Vector worker 0 tells every PE that this PE's rows are written; each vector worker then waits
  // until every PE has said so.
  void finish_combine(const Part& p) {
    auto scope = s_.trace.scope(p.worker, "combine wait");
    if (p.index == 0) {
      shmem_fence();
      s_.combine_done.raise_at_every_pe(s_.me, g_);
    }
    s_.combine_done.wait_for_every_pe(g_, "MegaMoE combine");
  }

  void reduce(const Part& p) {
    auto scope = s_.trace.scope(p.worker, "reduce");
    const auto [t0, t1] = my_tokens(p);
    const std::size_t row_bytes = static_cast<std::size_t>(cfg().model_dim) * 2;
    reduce_weighted_rows({DType::kBFloat16, cfg().model_dim, cfg().topk, s_.combine_rows, row_bytes,
                          in_.expert_ids, in_.routing_weights, in_.y},
                         t0, t1);
  }

  MegaMoE::State& s_;
  const MegaMoEArgs& in_;
  const std::uint64_t g_;
  std::vector<std::int64_t> block_start_, block_wave_;  // [dst * L + expert]
  std::vector<int> wave_rows_;                          // [dst]
  std::vector<std::size_t> first_wave_;  // [dst + 1]: dst's waves from here in every dst's list
};

}  // namespace

void MegaMoE::run(const MegaMoEArgs& args) {
  State& s = *state_;
  const std::uint64_t g = ++s.generation;
  s.error.clear();
  // The hand-over words count from zero in every call (no worker runs between calls).
  for (auto& t : s.slots) t->words = {};
  s.plan_published = 0;
  FusedCall call(s, args, g);
  const bool solo = s.cfg.schedule == MegaSchedule::kSolo;
  s.trace.start(solo ? 1 : s.cfg.workers.total());
  const auto t0 = Clock::now();
  if (solo) {
    call.solo();
  } else {
    s.pool->launch(s.cfg.workers, [&](kernel::KernelContext& w) { call(w); });
  }
  s.kernel_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (!s.error.empty()) throw Refused(s.error);
}

}  // namespace shmoe::moe
