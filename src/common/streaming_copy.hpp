// Copies that bypass the caches: for payloads larger than the last-level cache, where ordinary
// stores would first read every destination line (the write-allocate) and evict lines still in
// use. glibc's memcpy does the same for one large copy; this serves many row-sized copies that
// together are large (MoE dispatch at prefill), which memcpy cannot know about.
#pragma once

#include <cstddef>

namespace shmoe {

// Past this many bytes moved in one go, non-temporal stores win; measured on the shared mapping
// on this project's machines (2-core EPYC VMs, whose reported L3 size is not trustworthy, so it
// is not read): 22 GB/s against memcpy's 14 GB/s at 64 MiB, but slower below the cache size.
inline constexpr std::size_t kStreamingCopyThreshold = std::size_t{16} << 20;

// Copies with non-temporal stores (memcpy where the CPU has none). They are not ordered against
// later stores, not even locked ones, until an sfence: fence_non_temporal() after the last copy
// and before the flag that publishes them.
void copy_non_temporal(void* dst, const void* src, std::size_t bytes);

// Orders every earlier non-temporal store of this thread before its later stores.
void fence_non_temporal();

}  // namespace shmoe
