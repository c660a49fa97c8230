/* shmoe ElasticBuffer: DeepEP V2's expert-parallel dispatch and combine (deep_ep.ElasticBuffer's
 * runtime; C++: shmoe::ElasticBuffer in shmoe/elastic.hpp). Words are DeepEP's: a rank is a PE,
 * the scale-up domain is the PEs of one host (their heaps are mapped: a put is a store), the
 * scale-out domain the hosts (rows between hosts go through UCX); ranks are host-major.
 *
 * Dispatch sends each token once to every rank that holds one of its top-k experts (expert e
 * lives on rank e / num_local_experts), with its top-k indices and weights; each rank receives
 * its rows ordered by source rank, then by token. In expand mode a token's row is laid out once
 * per local expert it picked, experts in order, each expert's rows starting at a multiple of
 * expert_alignment. Combine sends each received token's bf16 rows back to its source rank, which
 * sums them in fp32, from the biases, in DeepEP's order (each rank's partial at its largest top-k
 * slot; see shmoe_elastic_combine), and rounds once to bf16.
 *
 * Every call is collective over the job's PEs; a refused call (status SHMOE_MOE_REFUSED, text in
 * shmoe_last_error(), naming the argument, its value and what is allowed) is refused on every PE
 * and moves nothing. Results are shmoe_ep_result_t (shmoe/tensor.h). */
#ifndef SHMOE_ELASTIC_H
#define SHMOE_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/export.h"
#include "shmoe/moe.h"
#include "shmoe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmoe_elastic_buffer* shmoe_elastic_buffer_t;

/* The buffer's size: num_bytes of symmetric memory per PE, or (num_bytes 0) the size hint of the
 * MoE settings: what a dispatch of num_max_tokens_per_rank tokens of `hidden` elements (bf16, or
 * with use_fp8_dispatch 1-byte values and a float32 scale per 128) with num_topk experts, and its
 * combine, need. A call that does not fit is refused naming both sizes. */
typedef struct {
  size_t struct_size;
  uint64_t num_bytes;
  int num_max_tokens_per_rank;
  int hidden;
  int num_topk;
  int use_fp8_dispatch;
  /* Hybrid: with more than one host, the logical domains are (hosts, PEs per host) and combine
   * sums each host's partials first (DeepEP's hybrid arithmetic); otherwise (1, PEs). */
  int allow_hybrid_mode;
  /* Whether a rank may reduce its own rows before sending them back (see combine). */
  int allow_multiple_reduction;
  /* Receive order is deterministic whatever this says (source rank, then token). */
  int deterministic;
} shmoe_elastic_buffer_config_t;

/* Bytes (a multiple of 2 MiB) of the config's MoE settings over `num_ranks` ranks. */
SHMOE_API int shmoe_elastic_buffer_size_hint(const shmoe_elastic_buffer_config_t* config,
                                             int num_ranks, uint64_t* bytes);
/* Bytes of symmetric heap (SHMEM_SYMMETRIC_SIZE) a job needs for one buffer of this config over
 * `num_ranks` ranks: its window (num_bytes, or the size hint), room for a primitive's memory (at
 * most as much), the receive blocks dispatch lands recv_x in (with num_max_tokens_per_rank and
 * hidden given: SHMOE_DEEP_EP_RECV_BLOCKS of ranks x num_max_tokens_per_rank x hidden x 2 bytes;
 * without them, blocks get what room the heap has) and 64 MiB for its headers and counts. */
SHMOE_API int shmoe_elastic_buffer_heap_size(const shmoe_elastic_buffer_config_t* config,
                                             int num_ranks, uint64_t* bytes);
/* Collective: the buffer over every PE of the job (shmem_init'ed). */
SHMOE_API int shmoe_elastic_buffer_create(const shmoe_elastic_buffer_config_t* config,
                                          shmoe_elastic_buffer_t* buffer);
/* Collective: frees the buffer's symmetric memory; the shmoe job goes on. NULL is ignored. */
SHMOE_API int shmoe_elastic_buffer_destroy(shmoe_elastic_buffer_t buffer);
/* (scale-out, scale-up) ranks: physical (hosts, PEs per host), or logical (see
 * allow_hybrid_mode). */
SHMOE_API int shmoe_elastic_buffer_domain_size(shmoe_elastic_buffer_t buffer, int logical,
                                               int sizes[2]);
/* Local: how many dispatches so far returned recv_x in a receive block its senders wrote (no
 * copy; SHMOE_DEEP_EP_RECV_BLOCKS) and how many copied it out of the buffer (every block held,
 * x with scales, rows beyond a block). Either may be NULL. */
SHMOE_API int shmoe_elastic_buffer_result_counts(shmoe_elastic_buffer_t buffer, int64_t* in_blocks,
                                                 int64_t* copied);

typedef struct {
  size_t struct_size;
  /* [num_tokens, hidden] of any dtype (bf16; 1-byte values with sf in FP8 mode). */
  shmoe_tensor_t x;
  /* [num_tokens, num_scales] of any dtype: the scales travelling with x's rows, or none. */
  shmoe_tensor_t sf;
  /* [num_tokens, num_topk] int64 or int32: expert indices, -1 for none. Not given with handle. */
  shmoe_tensor_t topk_idx;
  /* [num_tokens, num_topk] float32, or none. */
  shmoe_tensor_t topk_weights;
  /* [num_local_experts] int32: each local expert's received tokens are added to it, or none. */
  shmoe_tensor_t cumulative_local_expert_recv_stats;
  /* A dispatch's result: dispatch again on its routing (cached), or NULL. */
  shmoe_ep_result_t handle;
  int num_experts;
  int num_max_tokens_per_rank; /* 0: the handle's, else the buffer's */
  int expert_alignment;        /* 0: the handle's, else 1 */
  /* Without CPU sync the arrays have their worst-case rows (num_recv_tokens says how many hold
   * tokens); a cached dispatch sizes them as its handle's dispatch did. */
  int do_cpu_sync;
  int do_expand;
  int do_zero_padding;
  int use_tma_aligned_col_major_sf;
  /* Whether the result keeps its own copy of topk_idx ("topk_idx"), as DeepEP's handle does. */
  int do_handle_copy;
  /* This PE refuses the call (its caller could not even convert its arguments): every PE is
   * refused, this PE with this text. NULL: no. */
  const char* refusal;
} shmoe_elastic_dispatch_args_t;

/* Collective. *result holds: recv_x [rows, hidden] (x's dtype), recv_sf (FP8), recv_topk_idx
 * int64 [rows, num_topk] (local expert index or -1; not in expand mode), recv_topk_weights
 * float32 ([rows, num_topk], or [expanded rows] in expand mode; when weights were given),
 * topk_idx (with do_handle_copy), psum_num_recv_tokens_per_scaleup_rank int32 [scale-up ranks],
 * psum_num_recv_tokens_per_expert int32 [num_local_experts], num_recv_tokens_per_expert int32
 * (aligned counts), num_unaligned_recv_tokens_per_expert int32, recv_src_metadata int32
 * [received tokens, 2 + num_topk] (source rank * num_max_tokens_per_rank + token, the slot it
 * arrived in, then each top-k slot's expanded row or -1), dst_buffer_slot_idx int32 [num_tokens,
 * num_topk] (the slot each top-k choice's token takes at its rank, or -1), num_recv_tokens and
 * num_expanded_tokens (int64, 0-d). A cached dispatch's result holds recv_x, recv_sf,
 * recv_topk_idx and recv_topk_weights. */
SHMOE_API int shmoe_elastic_dispatch(shmoe_elastic_buffer_t buffer,
                                     const shmoe_elastic_dispatch_args_t* args,
                                     shmoe_ep_result_t* result);

typedef struct {
  size_t struct_size;
  /* bf16 rows in the layout of handle's recv_x: [at least received rows, hidden]. */
  shmoe_tensor_t x;
  /* float32 weights to send back: [rows, num_topk], or [expanded rows] in expand mode; none. */
  shmoe_tensor_t topk_weights;
  /* bf16 [num_tokens, hidden] each, or none. */
  shmoe_tensor_t bias0;
  shmoe_tensor_t bias1;
  /* The dispatch whose tokens come back (not a cached dispatch's result). */
  shmoe_ep_result_t handle;
  const char* refusal;
} shmoe_elastic_combine_args_t;

/* Collective. Each source token's fp32 accumulator starts at bias0 + bias1 and adds, in top-k
 * slot order, one bf16 partial per rank (placed at that rank's largest slot): the rank's rows of
 * the token summed in fp32 and rounded (expand mode with allow_multiple_reduction; without it
 * every expanded row is its own partial at its slot). In hybrid mode a host's partials are first
 * summed the same way into one per host. Weights are not applied: with topk_weights, each slot's
 * weight travels back from the rank that holds its expert (0 for -1). *result holds combined_x
 * bf16 [num_tokens, hidden] and combined_topk_weights float32 [num_tokens, num_topk]. */
SHMOE_API int shmoe_elastic_combine(shmoe_elastic_buffer_t buffer,
                                    const shmoe_elastic_combine_args_t* args,
                                    shmoe_ep_result_t* result);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_ELASTIC_H */
