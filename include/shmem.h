/* shmoe: the OpenSHMEM 1.5 C API.
 *
 * The functions are declared in shmoe/functions.h (typed families stamped from the type tables
 * of shmoe/type_tables.h and shmoe/collective_types.h); pshmem.h declares the same functions
 * under the profiling interface's names, pshmem_*. The type-generic names are in
 * shmoe/generic.h.
 */
#ifndef SHMEM_H
#define SHMEM_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/collective_types.h"
#include "shmoe/type_tables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Constants ------------------------------------------------------------------------- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "shmoe"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CTX_SERIALIZED (1L << 0)
#define SHMEM_CTX_PRIVATE (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE (1L << 1)

#define SHMEM_SYNC_VALUE (-1L)
#define SHMEM_SYNC_SIZE 128
#define SHMEM_BCAST_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_BARRIER_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_COLLECT_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALL_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 16
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* ---- Handles ----------------------------------------------------------------------------- */
typedef struct shmoe_ctx* shmem_ctx_t;
extern struct shmoe_ctx shmoe_ctx_default;
#define SHMEM_CTX_DEFAULT (&shmoe_ctx_default)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)

/* ---- Team handles ------------------------------------------------------------------------ */
typedef struct shmoe_team* shmem_team_t;
extern struct shmoe_team shmoe_team_world, shmoe_team_shared;
#define SHMEM_TEAM_WORLD (&shmoe_team_world)
#define SHMEM_TEAM_SHARED (&shmoe_team_shared)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

typedef struct {
  int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

/* The active set is {PE_start + i * 2^logPE_stride : 0 <= i < PE_size}. shmoe keeps its own
 * symmetric scratch for active sets, so pSync and pWrk are accepted and never read or written. A
 * job may use any number of distinct active sets; SHMOE_MAX_ACTIVE_SETS of them can have calls in
 * progress at the same time (a call on a further one waits until one of those has none). */
#define SHMOE_MAX_ACTIVE_SETS 16

#if defined(__cplusplus)
#define SHMOE_NORETURN [[noreturn]]
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define SHMOE_NORETURN _Noreturn
#elif defined(__GNUC__)
#define SHMOE_NORETURN __attribute__((noreturn))
#else
#define SHMOE_NORETURN
#endif

/* ---- Functions ----------------------------------------------------------------------------- */
#define SHMOE_PREFIX
#include "shmoe/functions.h"
#undef SHMOE_PREFIX

#ifdef __cplusplus
}
#endif

#include "shmoe/generic.h"

#endif /* SHMEM_H */
