// shmoe MoE operators: the C++ API. Owning handles over the C API of shmoe/moe.h (whose comments
// give each buffer's shape and each contract), with errors as exceptions: a refused or failed
// call throws shmoe::Error carrying shmoe_moe_last_error()'s text and the status. The argument
// structs are the C ones with struct_size set, so the two languages share one vocabulary.
// Header-only, so the library's binary interface stays the C one.
#pragma once

#include <shmem.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shmoe/moe.h"
#include "shmoe/runtime.hpp"

namespace shmoe {

namespace detail {
// A C call's result, or Error.
inline int checked(int result) {
  if (result < 0) throw Error(shmoe_moe_last_error(), result);
  return result;
}

// A movable, non-copyable owner of a C handle.
template <typename Handle, void (*Destroy)(Handle)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle h) : h_(h) {}
  ~Owned() {
    if (h_ != nullptr) Destroy(h_);
  }
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Owned& operator=(Owned&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Handle get() const { return h_; }
  // Gives the handle up without destroying it (destruction is collective: an owner that cannot
  // call it on every PE at the same point, such as a garbage collector, leaves it to exit).
  Handle release() noexcept { return std::exchange(h_, nullptr); }

 private:
  Handle h_ = nullptr;
};

// A C struct of shmoe/moe.h with struct_size set and every other field 0 (its default).
template <typename C>
struct Extensible : C {
  Extensible() : C{} { this->struct_size = sizeof(C); }
};
}  // namespace detail

using MoeConfig = detail::Extensible<shmoe_moe_config_t>;
using DispatchArgs = detail::Extensible<shmoe_dispatch_args_t>;
using DispatchOutputs = detail::Extensible<shmoe_dispatch_outputs_t>;
using CombineArgs = detail::Extensible<shmoe_combine_args_t>;
using MoeTiming = detail::Extensible<shmoe_moe_timing_t>;
using MegaMoEConfig = detail::Extensible<shmoe_mega_moe_config_t>;
using MegaMoEInfo = detail::Extensible<shmoe_mega_moe_info_t>;

// Dispatch and combine on symmetric windows sized by the config (shmoe_moe_buffer_t). Collective
// to create and to destroy; every call collective.
class MoeBuffer {
 public:
  explicit MoeBuffer(const MoeConfig& config) {
    shmoe_moe_buffer_t h = nullptr;
    detail::checked(shmoe_moe_buffer_create(&config, &h));
    owned_ = Owned(h);
  }

  // What is wrong with `config` on n_pes PEs (shmoe_moe_config_check's text), or "" if nothing.
  // Local; needs no shmem_init.
  static std::string config_error(const MoeConfig& config, int n_pes) {
    return shmoe_moe_config_check(&config, n_pes) == SHMOE_MOE_OK ? std::string()
                                                                  : shmoe_moe_last_error();
  }

  // Symmetric heap bytes a buffer of `config` takes on each of n_pes PEs (0 for a config that
  // config_error refuses). Local; needs no shmem_init.
  static std::size_t symmetric_bytes(const MoeConfig& config, int n_pes) {
    return shmoe_moe_buffer_symmetric_bytes(&config, n_pes);
  }

  // Rows the outputs of a dispatch must hold.
  std::size_t recv_capacity() const { return shmoe_moe_recv_capacity(owned_.get()); }

  // dispatch's result on every PE when some PE's verdict was SHMOE_CALL_RETRY.
  static constexpr int kRetry = -1;

  // Returns the rows this PE received, or kRetry.
  int dispatch(const DispatchArgs& args, const DispatchOutputs& outputs) {
    const int rows = shmoe_moe_dispatch(owned_.get(), &args, &outputs);
    return rows == SHMOE_MOE_RETRY ? kRetry : detail::checked(rows);
  }

  void combine(const CombineArgs& args) { detail::checked(shmoe_moe_combine(owned_.get(), &args)); }

  // Shrink mode: a barrier of the live PEs that masks those that do not arrive in time.
  void sync_live(std::int32_t* pe_mask) {
    detail::checked(shmoe_moe_sync_live(owned_.get(), pe_mask));
  }

  // Shrink mode: every PE, masked or not, meets again; those that arrive in time are unmasked.
  void rejoin(std::int32_t* pe_mask) { detail::checked(shmoe_moe_rejoin(owned_.get(), pe_mask)); }
  // ... bringing the buffers of `others` to the same call counters in the same step.
  void rejoin(std::int32_t* pe_mask, const std::vector<shmoe_moe_buffer_t>& others) {
    detail::checked(shmoe_moe_rejoin_with(owned_.get(), pe_mask, others.data(),
                                          static_cast<int>(others.size())));
  }

  // The receive window: recv_capacity() rows in recv_x's layout (shmoe_moe_receive_window).
  void* receive_window() const {
    void* window = nullptr;
    std::size_t rows = 0;
    detail::checked(shmoe_moe_receive_window(owned_.get(), &window, &rows));
    return window;
  }

  // Gives back a receive block a dispatch took for the caller (shmoe_moe_release_block).
  void release_block(int block) { detail::checked(shmoe_moe_release_block(owned_.get(), block)); }
  // How many receive blocks the caller holds.
  int held_blocks() const { return shmoe_moe_held_blocks(owned_.get()); }

  // What the last dispatch or combine measured on this PE.
  MoeTiming last_timing() const {
    MoeTiming t;
    detail::checked(shmoe_moe_last_timing(owned_.get(), &t));
    return t;
  }

  // Each worker's whole-kernel time in the last dispatch or combine, microseconds, into `us`
  // (resized to the worker count; no allocation once it has that size).
  void last_worker_times(std::vector<double>& us) const {
    us.resize(static_cast<std::size_t>(last_timing().workers));
    detail::checked(
        shmoe_moe_last_worker_times(owned_.get(), us.data(), static_cast<int>(us.size())));
  }

  // How long this PE waited for each source PE in the last dispatch or combine, in microseconds
  // (shmoe_moe_last_source_waits).
  std::vector<double> last_source_waits() const {
    std::vector<double> us;
    last_source_waits(us);
    return us;
  }
  // ... into `us` (resized to the PE count; no allocation once it has that size).
  void last_source_waits(std::vector<double>& us) const {
    us.resize(static_cast<std::size_t>(shmem_n_pes()));
    detail::checked(
        shmoe_moe_last_source_waits(owned_.get(), us.data(), static_cast<int>(us.size())));
  }

  shmoe_moe_buffer_t handle() const { return owned_.get(); }
  shmoe_moe_buffer_t release() noexcept { return owned_.release(); }

 private:
  using Owned = detail::Owned<shmoe_moe_buffer_t, shmoe_moe_buffer_destroy>;
  Owned owned_;
};

// Rows of MX FP8 (the weight layout of MegaMoE).
inline std::size_t mx_row_bytes(int elems) {
  return shmoe_mx_row_bytes(elems);
}
inline std::vector<std::uint8_t> mx_quantize_rows(const float* src, std::size_t rows, int cols,
                                                  shmoe_fp8_format_t format) {
  std::vector<std::uint8_t> out(rows * mx_row_bytes(cols));
  detail::checked(shmoe_mx_quantize_rows(src, rows, cols, format, out.data()));
  return out;
}
inline std::vector<std::uint8_t> mx_quantize_bf16_rows(const std::uint16_t* src, std::size_t rows,
                                                       int cols, shmoe_fp8_format_t format) {
  std::vector<std::uint8_t> out(rows * mx_row_bytes(cols));
  detail::checked(shmoe_mx_quantize_bf16_rows(src, rows, cols, format, out.data()));
  return out;
}
inline std::vector<float> mx_dequantize_rows(const std::uint8_t* src, std::size_t rows, int cols,
                                             shmoe_fp8_format_t format) {
  std::vector<float> out(rows * static_cast<std::size_t>(cols > 0 ? cols : 0));
  detail::checked(shmoe_mx_dequantize_rows(src, rows, cols, format, out.data()));
  return out;
}

// FP8 token rows with fp32 scales per 128 channels (DeepEP's low-latency dispatch format).
inline std::size_t fp8_token_row_bytes(int cols) {
  return shmoe_fp8_token_row_bytes(cols);
}
inline std::vector<std::uint8_t> fp8_quantize_token_rows(const std::uint16_t* src, std::size_t rows,
                                                         int cols, bool round_scale) {
  std::vector<std::uint8_t> out(rows * fp8_token_row_bytes(cols));
  detail::checked(shmoe_fp8_quantize_token_rows(src, rows, cols, round_scale, out.data()));
  return out;
}

// shmoe_mega_moe_run's arguments (shmoe/moe.h).
struct MegaMoEArgs {
  const std::uint16_t* x = nullptr;  // BF16 bit patterns
  const std::int32_t* topk_idx = nullptr;
  const float* topk_weights = nullptr;
  int num_tokens = 0;
  std::uint16_t* y = nullptr;                          // written, BF16
  std::int32_t* num_recv_tokens_per_expert = nullptr;  // written, or null
};

// One stage a worker ran in a traced MegaMoE run (shmoe_mega_moe_last_trace).
struct MegaStageEvent {
  int worker = 0;
  const char* stage = "";  // the library's, valid for the process's life
  int index = -1;          // the wave, or -1
  double begin_us = 0, end_us = 0;
};

// A whole MoE layer (shmoe_mega_moe_t). w1 and w2: one pointer per local expert to its MX FP8
// rows (shmoe/moe.h).
class MegaMoE {
 public:
  MegaMoE(const MegaMoEConfig& config, const std::vector<const std::uint8_t*>& w1,
          const std::vector<const std::uint8_t*>& w2) {
    const auto expected =
        static_cast<std::size_t>(config.num_experts_per_pe > 0 ? config.num_experts_per_pe : 0);
    if (w1.size() != expected || w2.size() != expected) {
      throw Error("shmoe::MegaMoE: w1 and w2 need num_experts_per_pe=" +
                      std::to_string(config.num_experts_per_pe) + " pointers, not " +
                      std::to_string(w1.size()) + " and " + std::to_string(w2.size()),
                  SHMOE_MOE_REFUSED);
    }
    shmoe_mega_moe_t h = nullptr;
    detail::checked(shmoe_mega_moe_create(&config, w1.data(), w2.data(), &h));
    owned_ = Owned(h);
  }

  void run(const MegaMoEArgs& a) {
    detail::checked(shmoe_mega_moe_run(owned_.get(), a.x, a.topk_idx, a.topk_weights, a.num_tokens,
                                       a.y, a.num_recv_tokens_per_expert));
  }

  // The same bits through the unfused chain of operators.
  void run_unfused(const MegaMoEArgs& a) {
    detail::checked(shmoe_mega_moe_run_unfused(owned_.get(), a.x, a.topk_idx, a.topk_weights,
                                               a.num_tokens, a.y, a.num_recv_tokens_per_expert));
  }

  double last_kernel_us() const { return shmoe_mega_moe_last_kernel_us(owned_.get()); }

  static std::size_t symmetric_bytes(const MegaMoEConfig& config, int n_pes) {
    return shmoe_mega_moe_symmetric_bytes(&config, n_pes);
  }
  // ... with run_unfused's windows too.
  static std::size_t unfused_symmetric_bytes(const MegaMoEConfig& config, int n_pes) {
    return shmoe_mega_moe_unfused_symmetric_bytes(&config, n_pes);
  }

  // What is wrong with `config` on n_pes PEs (shmoe_mega_moe_config_check's text), or "" if
  // nothing. Local; needs no shmem_init.
  static std::string config_error(const MegaMoEConfig& config, int n_pes) {
    return shmoe_mega_moe_config_check(&config, n_pes) == SHMOE_MOE_OK ? std::string()
                                                                       : shmoe_moe_last_error();
  }

  // What the layer resolved at creation: weight form, schedule, workers, weight bytes, engine.
  MegaMoEInfo info() const {
    MegaMoEInfo i;
    detail::checked(shmoe_mega_moe_info(owned_.get(), &i));
    return i;
  }

  // Records every worker's stages in the following fused runs on this PE.
  void set_tracing(bool on) { detail::checked(shmoe_mega_moe_set_tracing(owned_.get(), on)); }
  // The stages of the last traced run on this PE, worker by worker.
  std::vector<MegaStageEvent> last_trace() const {
    const auto n = static_cast<std::size_t>(detail::checked(
        shmoe_mega_moe_last_trace(owned_.get(), 0, nullptr, nullptr, nullptr, nullptr, nullptr)));
    std::vector<int> worker(n), index(n);
    std::vector<const char*> stage(n);
    std::vector<double> begin(n), end(n);
    detail::checked(shmoe_mega_moe_last_trace(owned_.get(), n, worker.data(), stage.data(),
                                              index.data(), begin.data(), end.data()));
    std::vector<MegaStageEvent> events(n);
    for (std::size_t i = 0; i < n; ++i)
      events[i] = {worker[i], stage[i], index[i], begin[i], end[i]};
    return events;
  }

  shmoe_mega_moe_t handle() const { return owned_.get(); }
  shmoe_mega_moe_t release() noexcept { return owned_.release(); }

 private:
  using Owned = detail::Owned<shmoe_mega_moe_t, shmoe_mega_moe_destroy>;
  Owned owned_;
};

}  // namespace shmoe
