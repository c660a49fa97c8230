// The contexts shmem_ctx_create made and shmem_ctx_destroy has not destroyed. Every call that
// takes a context asks here before it touches one, so a garbage pointer, a destroyed context or a
// second destroy is refused by name instead of read (a crash, or silent use of freed memory).
#pragma once

#include "shmem.h"

namespace shmoe::live_contexts {

void add(shmem_ctx_t ctx);
// Whether ctx is a live context this PE created, or SHMEM_CTX_DEFAULT. Never dereferences ctx.
bool contains(shmem_ctx_t ctx);
// Removes ctx; false if it was not live.
bool remove(shmem_ctx_t ctx);

}  // namespace shmoe::live_contexts
