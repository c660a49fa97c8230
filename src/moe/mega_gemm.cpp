#include "moe/mega_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "numeric/mx.hpp"
#include "numeric/mx_matrix.hpp"

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#elif DNNL_CPU_THREADING_RUNTIME != DNNL_RUNTIME_SEQ
#error \
    "shmoe runs each oneDNN call on its calling thread alone: it needs an OMP or SEQ oneDNN build"
#endif

namespace shmoe::moe {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// oneDNN's OpenMP runtime sizes a call's thread team by the calling thread's own OpenMP setting,
// which starts at the core count: a worker that did not lower it would start a team on cores its
// partners are using.
void run_on_this_thread_only() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
#endif
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine kEngine(dnnl::engine::kind::cpu, 0);
  return kEngine;
}

// Streams are not to be shared between threads; each worker has its own.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// The kernels' scratch memory, per thread (scratchpad_mode::user): a worker runs one call at a
// time, and nothing is shared between workers.
void* thread_scratch(std::size_t bytes) {
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

bool has_bf16_dot_products(dnnl::cpu_isa isa) {
  const auto bits = static_cast<unsigned>(isa),
             bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (bits & bf16) == bf16;  // ISA values are nested bit sets: AMX includes AVX512-BF16
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

struct Kernel {
  std::uint64_t id = 0;  // unique in the process, unlike addresses
  dnnl::matmul primitive;
  memory::desc a, w, out, scratch;
};

// Memory objects of one kernel's arguments on one thread, pointed at each call's buffers: making
// them per call costs about as much as a small product itself.
struct BoundArgs {
  memory a, w, out, scratch;
};

BoundArgs& bound_args(const Kernel& kernel) {
  thread_local std::unordered_map<std::uint64_t, BoundArgs> by_kernel;
  auto it = by_kernel.find(kernel.id);
  if (it == by_kernel.end()) {
    const auto& eng = cpu_engine();
    BoundArgs b{memory(kernel.a, eng, DNNL_MEMORY_NONE), memory(kernel.w, eng, DNNL_MEMORY_NONE),
                memory(kernel.out, eng, DNNL_MEMORY_NONE),
                memory(kernel.scratch, eng, DNNL_MEMORY_NONE)};
    it = by_kernel.emplace(kernel.id, std::move(b)).first;
  }
  return it->second;
}

// Weight i's expansion to the input type, per thread, for tiles past kDirectRows.
std::byte* thread_expanded(std::size_t i, std::size_t bytes) {
  thread_local std::array<std::vector<std::byte>, GemmEngine::kMaxWeights> expanded;
  if (expanded[i].size() < bytes) expanded[i].resize(bytes);
  return expanded[i].data();
}

// Weight i's panel of the product, per thread.
float* thread_panel(std::size_t i, std::size_t floats) {
  thread_local std::array<std::vector<float>, GemmEngine::kMaxWeights> panels;
  if (panels[i].size() < floats) panels[i].resize(floats);
  return panels[i].data();
}

// Whether a weight packed in `whole` (dims {k, n}) holds every `cols` columns from column 0 as one
// contiguous run, laid out as oneDNN lays out a weight of that many columns (`panel`, and `tail`
// for the last columns): then a panel is the packed weight at an offset. oneDNN's bf16 layouts
// for AVX-512 block the columns by 64 outermost (BA16a64b2a); anything else runs whole.
bool panels_fit(int cols, const memory::desc& whole, const memory::desc& panel,
                const memory::desc& tail) {
  const auto& w = whole.data;
  if (w.format_kind != dnnl_blocked || w.ndims != 2) return false;
  const auto& b = w.format_desc.blocking;
  memory::dim col_block = 1;
  for (int i = 0; i < b.inner_nblks; ++i)
    if (b.inner_idxs[i] == 1) col_block *= b.inner_blks[i];
  if (cols % col_block != 0 || b.strides[1] != w.padded_dims[0] * col_block) return false;
  auto same_blocking = [&](const memory::desc& d) {
    const auto& o = d.data.format_desc.blocking;
    if (d.data.format_kind != dnnl_blocked || o.inner_nblks != b.inner_nblks ||
        o.strides[0] != b.strides[0] || o.strides[1] != b.strides[1])
      return false;
    for (int i = 0; i < b.inner_nblks; ++i)
      if (o.inner_blks[i] != b.inner_blks[i] || o.inner_idxs[i] != b.inner_idxs[i]) return false;
    return true;
  };
  return same_blocking(panel) && same_blocking(tail);
}

// A tile's rows of k elements (`elem` bytes each), zero-padded to `padded` for
// numeric/mx_matrix, per thread: zero bits are +0 in either type.
const void* thread_padded(const void* a, int m, int k, int padded, std::size_t elem) {
  thread_local std::vector<std::byte> rows;
  rows.assign(static_cast<std::size_t>(m) * padded * elem, std::byte{0});
  for (int r = 0; r < m; ++r) {
    std::memcpy(rows.data() + static_cast<std::size_t>(r) * padded * elem,
                static_cast<const std::byte*>(a) + static_cast<std::size_t>(r) * k * elem,
                k * elem);
  }
  return rows.data();
}

}  // namespace

struct GemmEngine::Weight::Impl {
  int n = 0, k = 0;
  WeightForm form = WeightForm::kPacked;
  memory packed;                 // kPacked
  std::size_t column_bytes = 0;  // kPacked: from one column block to the next, per column
  numeric::MxWeightMatrix fp8;   // kFp8
};

int GemmEngine::Weight::n() const {
  return impl_->n;
}
int GemmEngine::Weight::k() const {
  return impl_->k;
}
WeightForm GemmEngine::Weight::form() const {
  return impl_->form;
}
std::size_t GemmEngine::Weight::bytes() const {
  return impl_->form == WeightForm::kFp8 ? impl_->fp8.bytes() : impl_->packed.get_desc().get_size();
}

struct GemmEngine::Impl {
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  GemmInput input = has_bf16_dot_products(isa) ? GemmInput::kBf16 : GemmInput::kF32;
  memory::data_type type =
      input == GemmInput::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
  std::mutex mutex;
  std::map<std::pair<int, int>, memory::desc> layouts;  // (n, k) -> packed weights
  std::map<std::pair<int, int>, Cut> cuts;              // (n, k) -> packed weights' cut
  // (m, n, k, plain): plain kernels take the weight unpacked, [n][k] in the input type.
  std::map<std::tuple<int, int, int, bool>, std::unique_ptr<Kernel>> kernels;

  dnnl::matmul::primitive_desc describe_product(int m, int n, int k, const memory::desc& weights) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::desc a({m, k}, type, Tag::ab), out({m, n}, memory::data_type::f32, Tag::ab);
    return {dnnl::matmul::desc(a, weights, out), attr, cpu_engine()};
  }

  // The layout oneDNN wants the weights in, fixed per shape so that one packing serves every row
  // count (a 64-row product decides it). Called with the mutex held.
  const memory::desc& layout_locked(int n, int k) {
    auto it = layouts.find({n, k});
    if (it == layouts.end()) {
      const memory::desc any({k, n}, type, Tag::any);
      it = layouts.emplace(std::pair{n, k}, describe_product(64, n, k, any).weights_desc()).first;
    }
    return it->second;
  }
  memory::desc layout(int n, int k) {
    const std::lock_guard lock(mutex);
    return layout_locked(n, k);
  }

  // The cut of a weight of n x k packed in layout(n, k): GemmEngine::cut, or one panel where the
  // layout does not hold its panels as slices.
  Cut packed_cut(int n, int k) {
    const std::lock_guard lock(mutex);
    auto it = cuts.find({n, k});
    if (it == cuts.end()) {
      Cut c = cut(n, k, bytes_of(input));
      const int tail = n % c.cols == 0 ? c.cols : n % c.cols;
      if (c.cols < n && !panels_fit(c.cols, layout_locked(n, k), layout_locked(c.cols, k),
                                    layout_locked(tail, k))) {
        c = one_panel(n);
      }
      it = cuts.emplace(std::pair{n, k}, c).first;
    }
    return it->second;
  }

  memory::desc plain_layout(int n, int k) const { return {{k, n}, type, Tag::ba}; }

  const Kernel& kernel(int m, int n, int k, bool plain) {
    const std::lock_guard lock(mutex);
    auto& slot = kernels[{m, n, k, plain}];
    if (!slot) {
      static std::atomic<std::uint64_t> next_id{0};
      const auto pd = describe_product(m, n, k, plain ? plain_layout(n, k) : layout_locked(n, k));
      slot =
          std::make_unique<Kernel>(Kernel{++next_id, dnnl::matmul(pd), pd.src_desc(),
                                          pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()});
    }
    return *slot;  // kernels live as long as the engine
  }

  void run(const Kernel& kernel, const void* weights, const void* a, float* out) {
    BoundArgs& b = bound_args(kernel);
    b.a.set_data_handle(const_cast<void*>(a));
    b.w.set_data_handle(const_cast<void*>(weights));
    b.out.set_data_handle(out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, b.a.get()},
                               {DNNL_ARG_WEIGHTS, b.w.get()},
                               {DNNL_ARG_DST, b.out.get()},
                               {DNNL_ARG_SCRATCHPAD, b.scratch.get()}};
    const std::size_t scratch_bytes = kernel.scratch.get_size();
    if (scratch_bytes > 0) b.scratch.set_data_handle(thread_scratch(scratch_bytes));
    dnnl::error::wrap_c_api(dnnl_primitive_execute(kernel.primitive.get(), thread_stream().get(),
                                                   scratch_bytes > 0 ? 4 : 3, args),
                            "MegaMoE GEMM: oneDNN matmul failed");
    thread_stream().wait();
  }
};

GemmEngine::Cut GemmEngine::one_panel(int n) {
  const int rows = kPanelFloats / std::max(n, 1) / kWholeRows * kWholeRows;
  return {std::clamp(rows, kWholeRows, kChunkRows), n};
}

GemmEngine::Cut GemmEngine::cut(int n, int k, std::size_t elem) {
  const auto fit = kPanelBytes / (static_cast<std::size_t>(std::max(k, 1)) * elem) / 64 * 64;
  const int cols = static_cast<int>(std::max<std::size_t>(kMinPanelCols, fit));
  if (cols >= n) return one_panel(n);
  return {kPanelFloats / cols / kWholeRows * kWholeRows, cols};
}

GemmEngine::GemmEngine() : impl_(std::make_unique<Impl>()) {}
GemmEngine::~GemmEngine() = default;

GemmInput GemmEngine::input() const {
  return impl_->input;
}

GemmInput GemmEngine::input(const Weight& w, int m) const {
  if (w.form() != WeightForm::kFp8 || m > kDirectRows) return impl_->input;
  return w.impl_->fp8.row_type() == numeric::RowType::kBf16 ? GemmInput::kBf16 : GemmInput::kF32;
}

std::string GemmEngine::describe() const {
  const dnnl_version_t* v = dnnl::version();
  return fmt::format("oneDNN {}.{}.{}, {} inputs ({})", v->major, v->minor, v->patch,
                     impl_->input == GemmInput::kBf16 ? "bf16" : "fp32", isa_name(impl_->isa));
}

std::string GemmEngine::kernel_name(int m, int n, int k) const {
  return impl_->describe_product(m, n, k, impl_->layout(n, k)).impl_info_str();
}

void GemmEngine::expand_rows(const std::byte* rows, std::size_t stride, int m, int k,
                             numeric::Fp8Format f, GemmInput t, void* out) {
  const auto row_elems = static_cast<std::size_t>(k);
  for (int r = 0; r < m; ++r) {
    const auto* codes = reinterpret_cast<const std::uint8_t*>(rows + r * stride);
    const std::uint8_t* scales = codes + row_elems;
    if (t == GemmInput::kBf16) {
      numeric::dequantize_mx_bf16(codes, scales, row_elems, f,
                                  static_cast<std::uint16_t*>(out) + r * row_elems);
    } else {
      numeric::dequantize_mx(codes, scales, row_elems, f, static_cast<float*>(out) + r * row_elems);
    }
  }
}

GemmEngine::Weight GemmEngine::load(const std::byte* rows, std::size_t stride, int n, int k,
                                    numeric::Fp8Format f, WeightForm form) const {
  auto w = std::make_shared<Weight::Impl>();
  w->n = n;
  w->k = k;
  w->form = form;
  const auto elems = static_cast<std::size_t>(n) * k;
  if (form == WeightForm::kFp8) {
    w->fp8 = numeric::MxWeightMatrix(reinterpret_cast<const std::uint8_t*>(rows), stride, n, k, f);
  } else {
    run_on_this_thread_only();
    std::vector<std::byte> plain(elems * bytes_of(impl_->input));
    expand_rows(rows, stride, n, k, f, impl_->input, plain.data());
    // Row j of the plain matrix is output feature j: the [k][n] weight stored column by column.
    memory plain_mem(impl_->plain_layout(n, k), cpu_engine(), plain.data());
    w->packed = memory(impl_->layout(n, k), cpu_engine());
    w->column_bytes =
        static_cast<std::size_t>(w->packed.get_desc().data.padded_dims[0]) * bytes_of(impl_->input);
    dnnl::reorder(plain_mem, w->packed).execute(thread_stream(), plain_mem, w->packed);
    thread_stream().wait();
  }
  Weight out;
  out.impl_ = std::move(w);
  return out;
}

void GemmEngine::multiply(const Weight& w, const void* a, int m, float* out) const {
  const auto n = static_cast<std::size_t>(w.n());
  const Weight* ws[] = {&w};
  multiply(ws, a, m, [&](const Panel& p) {
    const auto cols = static_cast<std::size_t>(p.c1 - p.c0);
    for (int r = p.r0; r < p.r1; ++r) {
      std::memcpy(out + r * n + p.c0, p.out[0] + (r - p.r0) * cols, cols * sizeof(float));
    }
  });
}

void GemmEngine::multiply(std::span<const Weight* const> ws, const void* a, int m,
                          const Epilogue& epilogue) const {
  if (m <= 0) return;
  if (ws.empty() || ws.size() > kMaxWeights)
    throw std::invalid_argument(
        fmt::format("GemmEngine::multiply: {} weights, 1 to {} allowed", ws.size(), kMaxWeights));
  const Weight::Impl& first = *ws[0]->impl_;
  const int n = first.n, k = first.k;
  for (const Weight* w : ws) {
    if (w->impl_->n != n || w->impl_->k != k || w->impl_->form != first.form)
      throw std::invalid_argument("GemmEngine::multiply: weights of different shapes or forms");
  }
  if (first.form == WeightForm::kFp8 && m <= kDirectRows) {
    const int padded = first.fp8.padded_cols();
    if (padded != k) a = thread_padded(a, m, k, padded, bytes_of(input(*ws[0], m)));
    Panel p{0, m, 0, n};
    for (std::size_t i = 0; i < ws.size(); ++i) {
      float* out = thread_panel(i, static_cast<std::size_t>(m) * n);
      ws[i]->impl_->fp8.times_rows(a, m, out, static_cast<std::size_t>(n));
      p.out[i] = out;
    }
    return epilogue(p);
  }
  run_on_this_thread_only();
  std::array<const std::byte*, kMaxWeights> plain{};
  if (first.form == WeightForm::kFp8) {
    const auto t =
        impl_->input == GemmInput::kBf16 ? numeric::RowType::kBf16 : numeric::RowType::kF32;
    for (std::size_t i = 0; i < ws.size(); ++i) {
      std::byte* expanded =
          thread_expanded(i, static_cast<std::size_t>(n) * k * bytes_of(impl_->input));
      ws[i]->impl_->fp8.expand(t, expanded);
      plain[i] = expanded;
    }
  }
  // Expanded weights are plain rows, any columns of which are a slice.
  const Cut c =
      first.form == WeightForm::kFp8 ? cut(n, k, bytes_of(impl_->input)) : impl_->packed_cut(n, k);
  for (int r0 = 0; r0 < m; r0 += c.rows) {
    run_chunk(ws, first.form == WeightForm::kFp8 ? plain.data() : nullptr, a, r0,
              std::min(m, r0 + c.rows), c.cols, epilogue);
  }
}

void GemmEngine::run_chunk(std::span<const Weight* const> ws, const std::byte* const* plain,
                           const void* a, int r0, int r1, int panel_cols,
                           const Epilogue& epilogue) const {
  const int n = ws[0]->n(), k = ws[0]->k(), rows = r1 - r0;
  const std::size_t elem = bytes_of(impl_->input), row_bytes = static_cast<std::size_t>(k) * elem;
  const int width = rows <= kWholeRows ? n : panel_cols;
  // A chunk's rows go in two calls, a multiple of kWholeRows and the rest, so that waves of any
  // size need a bounded set of kernels (oneDNN makes one per row count).
  const int body = rows > kWholeRows ? rows / kWholeRows * kWholeRows : rows, rest = rows - body;
  const auto* chunk = static_cast<const std::byte*>(a) + static_cast<std::size_t>(r0) * row_bytes;
  for (int c0 = 0; c0 < n; c0 += width) {
    const int cols = std::min(width, n - c0);
    const Kernel& body_kernel = impl_->kernel(body, cols, k, plain != nullptr);
    const Kernel* rest_kernel =
        rest > 0 ? &impl_->kernel(rest, cols, k, plain != nullptr) : nullptr;
    Panel p{r0, r1, c0, c0 + cols};
    for (std::size_t i = 0; i < ws.size(); ++i) {
      const Weight::Impl& w = *ws[i]->impl_;
      const std::byte* base =
          plain != nullptr ? plain[i] : static_cast<const std::byte*>(w.packed.get_data_handle());
      const std::byte* panel = base + c0 * (plain != nullptr ? row_bytes : w.column_bytes);
      float* out = thread_panel(i, static_cast<std::size_t>(rows) * cols);
      impl_->run(body_kernel, panel, chunk, out);
      if (rest_kernel != nullptr)
        impl_->run(*rest_kernel, panel, chunk + body * row_bytes,
                   out + static_cast<std::size_t>(body) * cols);
      p.out[i] = out;
    }
    epilogue(p);
  }
}

}  // namespace shmoe::moe
