#include "deep_ep/result.hpp"

#include <shmem.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/settings.hpp"
#include "shmem/runtime.hpp"
#include "shmoe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {

std::size_t dtype_bytes(shmoe_dtype_t t) {
  switch (t) {
    case SHMOE_DTYPE_INT64:
      return 8;
    case SHMOE_DTYPE_INT32:
    case SHMOE_DTYPE_FLOAT32:
      return 4;
    case SHMOE_DTYPE_FLOAT16:
    case SHMOE_DTYPE_BFLOAT16:
      return 2;
    case SHMOE_DTYPE_UINT8:
    case SHMOE_DTYPE_FLOAT8_E4M3:
    case SHMOE_DTYPE_BOOL:
      return 1;
  }
  return 0;
}

std::shared_ptr<std::byte[]> ArrayMemory::take(std::size_t bytes) {
  constexpr std::size_t kPooled = std::size_t{64} << 10;  // below this malloc reuses well
  if (bytes < kPooled) return std::shared_ptr<std::byte[]>(new std::byte[bytes == 0 ? 1 : bytes]);
  std::size_t size = kPooled;
  while (size < bytes) size *= 2;  // a size class: calls' results vary in rows
  std::shared_ptr<common::BlockPool> pool;
  {
    std::lock_guard lock(mutex_);
    auto& p = pools_[size];
    if (!p) p = std::make_shared<common::BlockPool>(size);
    pool = p;
  }
  common::BlockMemory block = pool->take();
  std::byte* data = block.release();
  return std::shared_ptr<std::byte[]>(data,
                                      [pool](std::byte* d) { pool->give(common::BlockMemory(d)); });
}

std::shared_ptr<std::byte[]> BlockLender::lend(const std::shared_ptr<BlockLender>& self, int block,
                                               void* rows) {
  hold_heap_mapping();
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(rows), [self, block](std::byte*) {
    self->give_back(block);
    drop_heap_mapping();
  });
}

BlockLender::BlockLender(MoeBuffer* op, int blocks)
    : BlockLender(
          blocks, [op] { return op->held_blocks(); },
          [op](int block) { op->release_block(block); }) {}

BlockLender::BlockLender(int blocks, std::function<int()> held, std::function<void(int)> give_back)
    : blocks_(blocks), held_(std::move(held)), give_back_(std::move(give_back)) {}

bool BlockLender::has_free() {
  std::lock_guard lock(mutex_);
  return !retired_ && held_() < blocks_;
}

void BlockLender::retire() {
  std::lock_guard lock(mutex_);
  retired_ = true;
}

void BlockLender::give_back(int block) {
  std::lock_guard lock(mutex_);
  if (retired_) return;
  try {
    give_back_(block);
  } catch (const Error&) {  // cannot happen: the block was taken for this memory alone
  }
}

std::int64_t most(std::int64_t mine) {
  auto* sym = static_cast<long*>(shmem_malloc(2 * sizeof(long)));
  if (sym == nullptr) throw std::runtime_error("deep_ep: the symmetric heap is full");
  sym[0] = static_cast<long>(mine);
  shmem_long_max_reduce(SHMEM_TEAM_WORLD, sym + 1, sym, 1);
  const std::int64_t most = sym[1];
  shmem_free(sym);
  return most;
}

int blocks_that_fit(MoeConfig c, int n, const char* call) {
  if (settings::deep_ep_recv_blocks() == 0) return 0;
  c.recv_blocks = 0;
  const std::size_t base = MoeBuffer::symmetric_bytes(c, n);
  c.recv_blocks = 1;
  return blocks_that_fit(base, MoeBuffer::symmetric_bytes(c, n) - base, call);
}

int blocks_that_fit(std::size_t base, std::size_t block, const char* call) {
  const std::size_t free = largest_free(call);
  return free <= base ? 0 : blocks_within((free - base) / 2, block);
}

std::size_t largest_free(const char* call) {
  Runtime& rt = runtime(call);
  std::lock_guard lock(rt.heap_mutex());
  return rt.allocator().largest_free_block();
}

int blocks_within(std::size_t bytes, std::size_t block) {
  const auto want = static_cast<std::size_t>(settings::deep_ep_recv_blocks());
  return block == 0 ? 0 : static_cast<int>(std::min(want, bytes / block));
}

void retire_blocks(MoeBuffer& op, BlockLender& lender) {
  if (lender.blocks() == 0) {
    lender.retire();
    return;
  }
  bool held = true;
  try {
    held = most(op.held_blocks()) > 0;
  } catch (const std::runtime_error&) {
    // No room for the reduction (alike on every rank): leave the window as if a block were held.
  }
  lender.retire();
  if (held) (void)op.release();
}

void Landing::aim(DispatchOutputs& outs, void* otherwise) {
  if (direct_) {
    outs.recv_block = &block_;
    outs.recv_block_x = &rows_;
  } else {
    outs.recv_x = otherwise;
  }
}

std::shared_ptr<std::byte[]> Landing::lend(int got, ResultCounts& counts) {
  if (got == MoeBuffer::kRetry) return nullptr;
  counts.count(direct_);
  return direct_ ? BlockLender::lend(lender_, block_, rows_) : nullptr;
}

Array Result::fresh(const std::string& name, shmoe_dtype_t dtype, std::int64_t elements,
                    bool zero) {
  Array a;
  a.name = name;
  const auto bytes = static_cast<std::size_t>(elements) * dtype_bytes(dtype);
  a.memory = memory_ ? memory_->take(bytes)
                     : std::shared_ptr<std::byte[]>(new std::byte[bytes == 0 ? 1 : bytes]);
  if (zero) std::memset(a.memory.get(), 0, bytes);
  a.tensor.data = a.memory.get();
  a.tensor.dtype = dtype;
  return a;
}

shmoe_tensor_t& Result::add(const std::string& name, shmoe_dtype_t dtype,
                            std::initializer_list<std::int64_t> shape, bool zero) {
  std::int64_t elements = 1;
  for (std::int64_t s : shape) elements *= s;
  Array a = fresh(name, dtype, elements, zero);
  a.tensor.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t s : shape) a.tensor.shape[d++] = s;
  std::int64_t stride = 1;
  for (d = a.tensor.ndim - 1; d >= 0; --d) {
    a.tensor.strides[d] = stride;
    stride *= a.tensor.shape[d];
  }
  arrays_.push_back(std::move(a));
  return arrays_.back().tensor;
}

shmoe_tensor_t& Result::add_over(const std::string& name, shmoe_dtype_t dtype,
                                 std::initializer_list<std::int64_t> shape,
                                 std::shared_ptr<std::byte[]> memory, void* data) {
  shmoe_tensor_t& t = add(name, dtype, {0});
  Array& a = arrays_.back();
  a.memory = std::move(memory);
  t.data = data;
  t.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t s : shape) t.shape[d++] = s;
  std::int64_t stride = 1;
  for (d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

shmoe_tensor_t& Result::add_column_major(const std::string& name, shmoe_dtype_t dtype,
                                         std::int64_t rows, std::int64_t cols,
                                         std::int64_t row_align, bool zero) {
  const std::int64_t padded = (rows + row_align - 1) / row_align * row_align;
  Array a = fresh(name, dtype, padded * cols, zero);
  a.tensor.ndim = 2;
  a.tensor.shape[0] = rows;
  a.tensor.shape[1] = cols;
  a.tensor.strides[0] = 1;
  a.tensor.strides[1] = padded;
  arrays_.push_back(std::move(a));
  return arrays_.back().tensor;
}

const shmoe_tensor_t* Result::find(const std::string& name) const {
  for (const Array& a : arrays_) {
    if (a.name == name) return &a.tensor;
  }
  return nullptr;
}

}  // namespace shmoe::deep_ep
