/* shmoe's own calls beside OpenSHMEM's: the one agreement that collective calls use to refuse on
 * every PE or on none, the live allocations of the symmetric heap, and the text of the last
 * refusal. Link with -lshmoe, after shmem_init(). Language bindings build their collective calls
 * on these (shmoe/runtime.hpp wraps them for C++).
 */
#ifndef SHMOE_RUNTIME_H
#define SHMOE_RUNTIME_H

#include <shmem.h>
#include <stddef.h>
#include <stdint.h>

#include "shmoe/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The text of this thread's last refused or failed shmoe_ call ("" if none failed). The MoE
 * calls of shmoe/moe.h record theirs here too (shmoe_moe_last_error is the same text). */
SHMOE_API const char* shmoe_last_error(void);

/* The most values one agreement compares. */
#define SHMOE_AGREE_MAX_VALUES 8

/* Collective over `team`: every member says whether it refuses the call named `call` (`refusal`
 * is its reason, or NULL), and passes `n_values` values (0..SHMOE_AGREE_MAX_VALUES) that every
 * member must pass alike, named by value_names. Returns 0 on every member when no member
 * refused and every value agrees; otherwise -1 on every member, with shmoe_last_error() saying
 * why: "CALL: REASON" on a refusing member, "CALL: PE p refused the call: REASON" on the others
 * (p the lowest refusing member's number in the team), or "CALL: the PEs disagree on NAME
 * (values from A to B; this PE passed C)". Costs one team reduction of
 * 1 + 2 * SHMOE_AGREE_MAX_VALUES words; a refusal's text travels only when there is one. -1 at
 * once, on this PE alone, for an invalid team or arguments (n_values out of range, a NULL
 * name). */
SHMOE_API int shmoe_agree(shmem_team_t team, const char* call, const char* refusal,
                          const int64_t* values, const char* const* value_names, int n_values);

/* Local: whether [p, p + bytes) lies inside one live allocation of this PE's symmetric heap
 * (from shmem_malloc and its kin). 1 if it does, with *start and *size (either may be NULL) set
 * to that allocation's start and size (rounded up to the allocator's 16-byte granule); 0 if not
 * (a freed allocation, stack or malloc memory, a symmetric global, a range that runs past its
 * allocation). */
SHMOE_API int shmoe_heap_allocation(const void* p, size_t bytes, void** start, size_t* size);

/* shmem_init_thread(requested, provided) for a job that another framework started (e.g.
 * torch.distributed): this process is PE `rank` of `size`; PE 0 runs the config store at `store`
 * ("HOST:PORT", a port the others can reach; port 0 only for a job of one PE) and every PE
 * proves `job_key` (32 to 1024 printable characters, the same on every PE, handed out by the
 * framework, never on a command line). No launcher variable is read. Returns 0, or -1 on this
 * PE alone with shmoe_last_error() naming the bad argument (rank out of 0..size-1, a malformed
 * store or key, shmoe started already); a failure to reach the other PEs ends the process as
 * shmem_init's does. */
SHMOE_API int shmoe_init_from(int rank, int size, const char* store, const char* job_key,
                              int requested, int* provided);

/* shmoe_init_from, but no PE runs the config store: it already runs apart at `store` (e.g.
 * `shmoerun --store-only`, started by the framework with the same key), so no PE's loss, PE 0's
 * included, takes the store with it (with SHMOE_PE_LOSS=continue the others go on). `store`
 * must name its port. Returns as shmoe_init_from does. */
SHMOE_API int shmoe_init_joining(int rank, int size, const char* store, const char* job_key,
                                 int requested, int* provided);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_RUNTIME_H */
