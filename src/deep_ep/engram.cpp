// Engram: each PE's storage in symmetric memory, fetched by index. A write is collective (it
// agrees on the storage's shape, which every PE must share, then copies this PE's rows in and
// ends in a barrier, so every PE's rows are there before anyone fetches); a fetch reads each
// entry's row from the PE that holds it: from a mapped peer's storage directly, from a peer on
// another host with a get that the fetch's wait (a quiet) completes. The FP8 scales every PE
// holds are copied from this PE's own copy.
#include <fmt/format.h>
#include <shmem.h>

#include <cstring>
#include <memory>
#include <string>

#include "deep_ep/checks.hpp"
#include "deep_ep/primitives.hpp"
#include "moe/moe.hpp"
#include "shmoe/runtime.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kWrite = "ElasticBuffer.engram_write";
constexpr const char* kFetch = "ElasticBuffer.engram_fetch";
constexpr std::int64_t kSfRowAlign = 4;  // TMA's 16 bytes of 4-byte packs

// The checks of a write: storage [entries, hidden] bf16 or FP8, sf iff FP8.
std::string write_refusal(const shmoe_elastic_engram_write_args_t& a, int n) {
  Checks checks(kWrite);
  if (a.refusal != nullptr) checks.refuse(a.refusal);
  checks.tensor(a.storage, "storage", {SHMOE_DTYPE_BFLOAT16, SHMOE_DTYPE_FLOAT8_E4M3}, {{}, {}});
  if (checks.any()) return checks.why();
  checks.range("storage.shape[0] (num_entries)", a.storage.shape[0], 1);
  checks.range("storage.shape[1] (hidden)", a.storage.shape[1], 1);
  const bool fp8 = a.storage.dtype == SHMOE_DTYPE_FLOAT8_E4M3;
  if (fp8) {
    checks.tensor(a.sf, "sf", {SHMOE_DTYPE_FLOAT32, SHMOE_DTYPE_INT32},
                  {{a.storage.shape[0] * n}, {1, true}});
  } else if (checks.given(a.sf)) {
    checks.refuse("sf is given with bfloat16 storage; scales go with float8_e4m3fn storage only");
  }
  return checks.why();
}

}  // namespace

void engram_write(ElasticBuffer& b, const shmoe_elastic_engram_write_args_t& a) {
  const std::string why = write_refusal(a, b.num_ranks());
  const bool ok = why.empty();
  agree(SHMEM_TEAM_WORLD, kWrite, why,
        {{"storage.shape[0] (num_entries)", ok ? a.storage.shape[0] : 0},
         {"storage.shape[1] (hidden)", ok ? a.storage.shape[1] : 0},
         {"storage's dtype (bfloat16 or float8_e4m3fn)", ok ? a.storage.dtype : 0},
         {"sf.shape[1] (num_sf_packs)", ok && a.sf.data != nullptr ? a.sf.shape[1] : 0}});
  b.require_fits(kWrite, static_cast<std::uint64_t>(tensor_bytes(a.storage)),
                 "the storage's bytes (ElasticBuffer.get_engram_storage_size_hint)");
  primitives_of(b).engram.write(b, a);
}

void Engram::write(const ElasticBuffer& b, const shmoe_elastic_engram_write_args_t& a) {
  n_ = b.num_ranks();
  me_ = b.rank();
  const auto bytes = static_cast<std::size_t>(tensor_bytes(a.storage));
  if (storage_.get() == nullptr || storage_.bytes() != bytes) {
    storage_ = SymmetricMemory();  // collective: frees the previous storage first
    storage_ = SymmetricMemory(bytes, kWrite);
  }
  std::memcpy(storage_.get(), a.storage.data, bytes);
  num_entries_ = a.storage.shape[0];
  hidden_ = a.storage.shape[1];
  dtype_ = a.storage.dtype;
  row_bytes_ = hidden_ * static_cast<std::int64_t>(dtype_bytes(dtype_));
  sf_packs_ = a.sf.data != nullptr ? a.sf.shape[1] : 0;
  sf_dtype_ = a.sf.dtype;
  sf_.resize(static_cast<std::size_t>(tensor_bytes(a.sf)));
  if (!sf_.empty()) std::memcpy(sf_.data(), a.sf.data, sf_.size());
  shmem_barrier_all();  // every PE's rows are in place before any PE fetches
}

shmoe_ep_result* Engram::fetch(const shmoe_tensor_t& indices, bool col_major_sf) const {
  Checks checks(kFetch);
  if (!written()) checks.refuse("nothing to fetch: engram_write comes first");
  checks.tensor(indices, "indices", {SHMOE_DTYPE_INT32}, {{}, {}});
  const std::int64_t total = static_cast<std::int64_t>(n_) * num_entries_;
  const auto* idx = static_cast<const std::int32_t*>(indices.data);
  const std::int64_t tokens = checks.any() ? 0 : indices.shape[0];
  const std::int64_t per_token = checks.any() ? 0 : indices.shape[1];
  for (std::int64_t i = 0; i < tokens * per_token && !checks.any(); ++i) {
    if (idx[i] < 0 || idx[i] >= total) {
      checks.refuse(
          fmt::format("indices[{}][{}]={} is out of range (0..{}: num_ranks x "
                      "num_entries - 1)",
                      i / per_token, i % per_token, idx[i], total - 1));
    }
  }
  if (checks.any()) throw moe::Refused(checks.why());
  auto result = std::make_unique<shmoe_ep_result>();
  auto* data =
      static_cast<std::byte*>(result->add("data", dtype_, {tokens, per_token * hidden_}).data);
  std::vector<std::byte*> mapped(static_cast<std::size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    mapped[static_cast<std::size_t>(p)] = static_cast<std::byte*>(shmem_ptr(storage_.get(), p));
  }
  const auto row = static_cast<std::size_t>(row_bytes_);
  for (std::int64_t i = 0; i < tokens * per_token; ++i) {
    const auto owner = static_cast<std::size_t>(idx[i] / num_entries_);
    const std::int64_t at = (idx[i] % num_entries_) * row_bytes_;
    std::byte* dst = data + static_cast<std::size_t>(i) * row;
    if (mapped[owner] != nullptr) {
      std::memcpy(dst, mapped[owner] + at, row);
    } else {
      shmem_getmem_nbi(dst, storage_.get() + at, row, static_cast<int>(owner));
    }
  }
  if (sf_packs_ > 0) {
    const std::int64_t cols = per_token * sf_packs_;
    shmoe_tensor_t& sf = col_major_sf
                             ? result->add_column_major("sf", sf_dtype_, tokens, cols, kSfRowAlign)
                             : result->add("sf", sf_dtype_, {tokens, cols});
    auto* out = static_cast<std::uint32_t*>(sf.data);
    const auto* table = reinterpret_cast<const std::uint32_t*>(sf_.data());
    for (std::int64_t t = 0; t < tokens; ++t) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int64_t entry = idx[t * per_token + c / sf_packs_];
        out[t * sf.strides[0] + c * sf.strides[1]] = table[entry * sf_packs_ + c % sf_packs_];
      }
    }
  }
  return result.release();
}

}  // namespace shmoe::deep_ep
