#include "deep_ep/primitives.hpp"

#include <fmt/format.h>
#include <shmem.h>

#include <cstring>
#include <stdexcept>
#include <utility>

namespace shmoe::deep_ep {

std::int64_t tensor_bytes(const shmoe_tensor_t& t) {
  if (t.data == nullptr) return 0;
  std::int64_t elements = 1;
  for (int d = 0; d < t.ndim; ++d) elements *= t.shape[d];
  return elements * static_cast<std::int64_t>(dtype_bytes(t.dtype));
}

SymmetricMemory::SymmetricMemory(std::size_t bytes, const char* what)
    : p_(static_cast<std::byte*>(shmem_calloc(bytes == 0 ? 1 : bytes, 1))), bytes_(bytes) {
  if (p_ == nullptr) {
    throw std::runtime_error(fmt::format(
        "{}: the symmetric heap cannot hold {} more bytes (set SHMEM_SYMMETRIC_SIZE larger)", what,
        bytes));
  }
}

SymmetricMemory::~SymmetricMemory() {
  if (p_ != nullptr) shmem_free(p_);
}

SymmetricMemory::SymmetricMemory(SymmetricMemory&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

SymmetricMemory& SymmetricMemory::operator=(SymmetricMemory&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) shmem_free(p_);
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Primitives& primitives_of(ElasticBuffer& b) {
  auto& e = b.extension();
  if (e == nullptr) e = std::make_unique<Primitives>();
  return static_cast<Primitives&>(*e);
}

}  // namespace shmoe::deep_ep
