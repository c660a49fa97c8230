#include "shmem/live_contexts.hpp"

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace shmoe::live_contexts {
namespace {

// Readers (every context-taking call) share the lock; create and destroy are rare.
std::shared_mutex g_mutex;
std::unordered_set<shmem_ctx_t>& live() {
  static auto* set = new std::unordered_set<shmem_ctx_t>;  // never destroyed: calls at exit
  return *set;
}

}  // namespace

void add(shmem_ctx_t ctx) {
  std::unique_lock lock(g_mutex);
  live().insert(ctx);
}

bool contains(shmem_ctx_t ctx) {
  if (ctx == SHMEM_CTX_DEFAULT) return true;
  if (ctx == SHMEM_CTX_INVALID) return false;
  std::shared_lock lock(g_mutex);
  return live().count(ctx) != 0;
}

bool remove(shmem_ctx_t ctx) {
  std::unique_lock lock(g_mutex);
  return live().erase(ctx) != 0;
}

}  // namespace shmoe::live_contexts
