/* shmoe's DeepEP V1 runtimes: what deep_ep.Buffer calls (C++: shmoe::deep_ep::IntranodeBuffer in
 * src/deep_ep; Python: _shmoe.IntranodeBuffer). One header for V1, as DeepEP V1's runtime is one
 * class (deep_ep::Buffer) whose modes share their arrays and results (shmoe/tensor.h); V2's
 * ElasticBuffer is shmoe/elastic.h. Words are DeepEP's: a rank is a PE of the job.
 *
 * Normal (intranode) mode. Dispatch sends each token once to every rank is_token_in_rank names,
 * with its top-k indices and weights; each rank receives its rows ordered by source rank, then
 * token. It runs on shmoe's MoE dispatch with one "expert" per rank (shmoe/moe.h): the top-k
 * travels as each token's side data, and each rank's top-k width, num_worst_tokens and tokens per
 * expert in the call's header, so a dispatch is one operator call. Combine sums each token's rows
 * from every rank it went to, without weights, in float32 (plus the biases), rounded once to
 * bfloat16. The operators are sized for the tokens the ranks pass (a capacity of 64 tokens,
 * doubled as calls need): a call they cannot hold is retried on every rank after a collective
 * replan, which makes the handles of earlier dispatches stale.
 *
 * Every call but the layout is collective over the job's PEs; a refused call (status
 * SHMOE_MOE_REFUSED, text in shmoe_moe_last_error(), naming the argument, its value and what is
 * allowed) is refused on every PE and moves nothing. */
#ifndef SHMOE_DEEP_EP_H
#define SHMOE_DEEP_EP_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/export.h"
#include "shmoe/moe.h"
#include "shmoe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmoe_intranode_buffer* shmoe_intranode_buffer_t;

typedef struct {
  size_t struct_size;
  /* The operators' first capacity in tokens per rank (0: 64); it grows as calls need. */
  int num_max_tokens_per_rank;
} shmoe_intranode_buffer_config_t;

/* Local (the operators are made, collectively, by the first dispatch). */
SHMOE_API int shmoe_intranode_buffer_create(const shmoe_intranode_buffer_config_t* config,
                                            shmoe_intranode_buffer_t* buffer);
/* Collective: frees the operators. NULL is ignored. */
SHMOE_API int shmoe_intranode_buffer_destroy(shmoe_intranode_buffer_t buffer);
/* Local: gives this PE's operators up without the collective free, for a PE that cannot count on
 * every other PE destroying too (shrink mode); their symmetric memory stays until the job ends. */
SHMOE_API int shmoe_intranode_buffer_abandon(shmoe_intranode_buffer_t buffer);

typedef struct {
  size_t struct_size;
  shmoe_tensor_t topk_idx; /* int64 [num_tokens, num_topk]: experts, -1 for none */
  int num_experts;         /* a positive multiple of the ranks */
  const char* refusal;     /* as shmoe_intranode_dispatch_args_t's (local here) */
} shmoe_intranode_layout_args_t;

/* Local. *result holds num_tokens_per_rank int32 [ranks], num_tokens_per_expert int32
 * [num_experts] and is_token_in_rank bool [num_tokens, ranks]. */
SHMOE_API int shmoe_intranode_get_dispatch_layout(shmoe_intranode_buffer_t buffer,
                                                  const shmoe_intranode_layout_args_t* args,
                                                  shmoe_ep_result_t* result);

typedef struct {
  size_t struct_size;
  /* [num_tokens, hidden] of any dtype whose rows are whole 2-byte units. */
  shmoe_tensor_t x;
  /* DeepEP's FP8 scales (x an (values, scales) pair): refused, there is no SM90 FP8 path. */
  shmoe_tensor_t x_scales;
  /* int32 [ranks], bool [num_tokens, ranks], int32 [num_experts] (a positive multiple of the
   * ranks): get_dispatch_layout's; required without handle. */
  shmoe_tensor_t num_tokens_per_rank;
  shmoe_tensor_t is_token_in_rank;
  shmoe_tensor_t num_tokens_per_expert;
  /* int64 [num_tokens, num_topk] (-1..num_experts-1) and float32 [num_tokens, num_topk], both
   * or neither; not with handle. */
  shmoe_tensor_t topk_idx;
  shmoe_tensor_t topk_weights;
  /* A dispatch's result: dispatch x again on its routing (a cached dispatch), or NULL. */
  shmoe_ep_result_t handle;
  int expert_alignment; /* 0: 1 */
  int num_worst_tokens; /* 0: none; else the received arrays have this many rows */
  /* This PE refuses the call (its caller could not even convert its arguments): every PE is
   * refused, this PE with this text. NULL: no. */
  const char* refusal;
} shmoe_intranode_dispatch_args_t;

/* Collective. *result holds recv_x [rows, hidden] (x's dtype; rows: the tokens received, or
 * num_worst_tokens, zero-padded), and without handle: recv_topk_idx int64 [rows, num_topk] (the
 * local expert, or -1) and recv_topk_weights float32 [rows, num_topk] (0 where not local), when
 * topk_idx was given; num_recv_tokens_per_expert int32 [local experts] (each rounded up to
 * expert_alignment; [0] with num_worst_tokens); rank_prefix_matrix int32 [ranks, ranks],
 * channel_prefix_matrix and recv_channel_prefix_matrix int32 [ranks, 1], recv_src_idx int32
 * [received tokens] and send_head int32 [num_tokens, ranks] (DeepEP's handle, with
 * is_token_in_rank). The result is the handle of a cached dispatch and of combine while the
 * buffer keeps its operators. */
SHMOE_API int shmoe_intranode_dispatch(shmoe_intranode_buffer_t buffer,
                                       const shmoe_intranode_dispatch_args_t* args,
                                       shmoe_ep_result_t* result);

typedef struct {
  size_t struct_size;
  /* bfloat16 [at least the received tokens, the dispatch's hidden]. */
  shmoe_tensor_t x;
  /* float32 [at least the received tokens, num_topk], or none: summed like x. */
  shmoe_tensor_t topk_weights;
  /* bfloat16 [num_tokens, hidden] each, or none: added to the float32 sums before rounding. */
  shmoe_tensor_t bias0;
  shmoe_tensor_t bias1;
  shmoe_ep_result_t handle; /* the dispatch whose tokens come back (not a cached one) */
  const char* refusal;
} shmoe_intranode_combine_args_t;

/* Collective. *result holds combined_x bfloat16 [num_tokens, hidden] and, with topk_weights,
 * combined_topk_weights float32 [num_tokens, num_topk]. topk_weights must be given on every PE
 * or on none. */
SHMOE_API int shmoe_intranode_combine(shmoe_intranode_buffer_t buffer,
                                      const shmoe_intranode_combine_args_t* args,
                                      shmoe_ep_result_t* result);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_DEEP_EP_H */
