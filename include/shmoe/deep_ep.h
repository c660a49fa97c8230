/* shmoe's DeepEP V1 runtimes: what deep_ep.Buffer calls (C++: shmoe::deep_ep::IntranodeBuffer and
 * LowLatencyBuffer in src/deep_ep; Python: _shmoe.IntranodeBuffer and _shmoe.LowLatencyBuffer).
 * One header for V1, as DeepEP V1's runtime is one
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
 * replan, which makes the handles of earlier dispatches stale. Over several hosts (DeepEP's
 * internode mode: its RDMA ranks are the hosts, ranks host-major) the same operators move the rows,
 * by stores within a host and UCX puts between hosts; the layout and the handle then carry
 * DeepEP's internode arrays too. FP8 x travels as (values, scales): each token's row is its values
 * then its scales, split again on arrival.
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
/* Local: how many dispatches so far returned recv_x in a receive block the senders wrote (no
 * copy; SHMOE_DEEP_EP_RECV_BLOCKS) and how many copied it out of the receive window (every
 * block held, FP8 scales, num_worst_tokens beyond a block, a cached dispatch). Either may be NULL.
 */
SHMOE_API int shmoe_intranode_buffer_result_counts(shmoe_intranode_buffer_t buffer,
                                                   int64_t* in_blocks, int64_t* copied);

typedef struct {
  size_t struct_size;
  shmoe_tensor_t topk_idx; /* int64 [num_tokens, num_topk]: experts, -1 for none */
  int num_experts;         /* a positive multiple of the ranks */
  const char* refusal;     /* as shmoe_intranode_dispatch_args_t's (local here) */
} shmoe_intranode_layout_args_t;

/* Local. *result holds num_tokens_per_rank int32 [ranks], num_tokens_per_expert int32
 * [num_experts] and is_token_in_rank bool [num_tokens, ranks]; with more than one host also
 * num_tokens_per_rdma_rank int32 [hosts] (the tokens going to some rank of each host). */
SHMOE_API int shmoe_intranode_get_dispatch_layout(shmoe_intranode_buffer_t buffer,
                                                  const shmoe_intranode_layout_args_t* args,
                                                  shmoe_ep_result_t* result);

typedef struct {
  size_t struct_size;
  /* [num_tokens, hidden] of any dtype whose rows are whole 2-byte units. */
  shmoe_tensor_t x;
  /* DeepEP's FP8 scales, x an (values, scales) pair: float32 or int32 [num_tokens, any], travelling
   * with x's rows (the rows of both together must be whole 2-byte units); or none. */
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
  /* int32 [hosts], get_dispatch_layout's over several hosts; checked when given, else unused. */
  shmoe_tensor_t num_tokens_per_rdma_rank;
} shmoe_intranode_dispatch_args_t;

/* Collective. *result holds recv_x [rows, hidden] (x's dtype; rows: the tokens received, or
 * num_worst_tokens, zero-padded), and without handle: recv_topk_idx int64 [rows, num_topk] (the
 * local expert, or -1) and recv_topk_weights float32 [rows, num_topk] (0 where not local), when
 * topk_idx was given; num_recv_tokens_per_expert int32 [local experts] (each rounded up to
 * expert_alignment; [0] with num_worst_tokens); rank_prefix_matrix int32 [ranks, ranks],
 * channel_prefix_matrix and recv_channel_prefix_matrix int32 [ranks, 1], recv_src_idx int32
 * [received tokens] and send_head int32 [num_tokens, ranks] (DeepEP's handle, with
 * is_token_in_rank). With x_scales, recv_x_scales [rows, x_scales' columns] of its dtype. Over more
 * than one host also DeepEP's internode handle arrays (one channel): rdma_channel_prefix_matrix
 * int32 [hosts, 1] (tokens sent to each host), recv_rdma_channel_prefix_matrix [hosts, 1] and
 * recv_rdma_rank_prefix_sum [hosts] (rows received from each host, and their inclusive prefix
 * sum), recv_gbl_rank_prefix_sum [ranks] (inclusive prefix sum of the rows from each rank),
 * recv_src_meta [rows, 2] (each row's source rank and token) and send_rdma_head [num_tokens,
 * hosts] (each token's place among those sent to a host, or -1). The result is the handle of a
 * cached dispatch (of any x with the same tokens) and of combine while the buffer keeps its
 * operators. */
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

/* ---- Low-latency mode ----------------------------------------------------------------------
 *
 * Dispatch sends each token to the ranks of its top-k experts (expert e lives on rank
 * e / (num_experts / ranks)) into DeepEP's expert-major layout: [local experts,
 * num_max_dispatch_tokens_per_rank x ranks, hidden], each expert's rows grouped by source rank,
 * then token. With use_fp8 the rows travel as DeepEP's message rows (hidden E4M3 codes, then
 * hidden / 128 float32 scales, shmoe_fp8_quantize_token_rows) and come back as E4M3 values and
 * their scales (power-of-two scales with round_scale; with use_ue8m0 their exponent bytes, four to
 * an int32, the first in the lowest byte). Combine sums each token's expert outputs with its
 * weights in float32, rounded once to bfloat16 (use_logfmt is accepted and changes nothing: its
 * 10-bit format saves RDMA bandwidth, which shared memory does not need).
 *
 * The operators of each shape (num_max_dispatch_tokens_per_rank, hidden, num_experts, num_topk)
 * are made, collectively, by its first dispatch. Every call is collective over the job's PEs and
 * agrees on its arguments first: a refused call (SHMOE_MOE_REFUSED, text in
 * shmoe_moe_last_error(), naming the argument, its value and what is allowed) is refused on every
 * PE and moves nothing. */

typedef struct shmoe_low_latency_buffer* shmoe_low_latency_buffer_t;

typedef struct {
  size_t struct_size;
  int reserved; /* 0 */
  /* DeepEP's shrink mode when > 0 (shmoe_low_latency_shrink_timeout_ms gives DeepEP's setting):
   * no call waits for a rank longer than this many ms; one that has not arrived by then is masked
   * (a mask of [ranks] int32 per buffer, 1: masked) and the calls go on without it. The calls
   * agree on nothing beforehand: a PE refuses its own bad arguments alone (the others mask it).
   * The create is then collective: it makes the operators of the hinted shapes of this job's size
   * up front (room for 11 experts per token; calls with fewer pad with -1), since a failed rank
   * would hold up their collective making later; a shape first used later is made at its first
   * call while no rank is masked, else refused. */
  int shrink_timeout_ms;
  /* [num_hinted_shapes, 4]: (num_max_dispatch_tokens_per_rank, hidden, ranks, num_experts) asked
   * of the size hint, the same on every PE (agreed). */
  const int32_t* hinted_shapes;
  int num_hinted_shapes;
} shmoe_low_latency_buffer_config_t;

/* Local: *ms = the value of SHMOE_SHRINK_TIMEOUT_MS, `text` as the caller read it from its
 * environment (NULL: unset, 10000), refused unless an int in 1..2^31-1. (The caller reads it:
 * shmoe reads its own variables through its settings table, and this one is DeepEP's.) */
SHMOE_API int shmoe_low_latency_shrink_timeout_ms(const char* text, int* ms);

/* Local, or collective in shrink mode (the operators are made by the first dispatch of each
 * shape). */
SHMOE_API int shmoe_low_latency_buffer_create(const shmoe_low_latency_buffer_config_t* config,
                                              shmoe_low_latency_buffer_t* buffer);
/* Collective: frees the operators. NULL is ignored. */
SHMOE_API int shmoe_low_latency_buffer_destroy(shmoe_low_latency_buffer_t buffer);
/* Local: gives this PE's operators up without the collective free (their symmetric memory stays
 * until the job ends). */
SHMOE_API int shmoe_low_latency_buffer_abandon(shmoe_low_latency_buffer_t buffer);
/* Local: how many dispatches so far returned recv_x in a receive block the senders wrote (BF16,
 * outside shrink mode; SHMOE_DEEP_EP_RECV_BLOCKS) and how many copied it out of the receive
 * window (every block held, FP8, shrink mode). Either may be NULL. */
SHMOE_API int shmoe_low_latency_buffer_result_counts(shmoe_low_latency_buffer_t buffer,
                                                     int64_t* in_blocks, int64_t* copied);

typedef struct {
  size_t struct_size;
  shmoe_tensor_t x;        /* bfloat16 [num_tokens, hidden], hidden a positive multiple of 128 */
  shmoe_tensor_t topk_idx; /* int64 [num_tokens, num_topk] (1..num_experts wide): -1 for none */
  int num_max_dispatch_tokens_per_rank; /* at least num_tokens on every PE */
  int num_experts;                      /* a positive multiple of the ranks */
  /* int32 [local experts], or none: the rows each local expert received are added to it. */
  shmoe_tensor_t cumulative_local_expert_recv_stats;
  /* int64 [ranks], or none: the nanoseconds this PE waited for each rank are added to it. */
  shmoe_tensor_t dispatch_wait_recv_cost_stats;
  int use_fp8, round_scale, use_ue8m0; /* use_ue8m0 needs use_fp8 and round_scale */
  const char* refusal;                 /* as shmoe_intranode_dispatch_args_t's */
} shmoe_low_latency_dispatch_args_t;

/* Collective. *result holds recv_x [local experts, slots, hidden] (bfloat16, or float8_e4m3 with
 * use_fp8; slots = num_max_dispatch_tokens_per_rank x ranks; the rows past each expert's count are
 * undefined), with use_fp8 recv_x_scales (float32 [local experts, slots, hidden / 128], or with
 * use_ue8m0 int32 [local experts, slots, ceil(hidden / 512)]), recv_count int32 [local experts],
 * src_info int32 [local experts, slots] (each row's source token, -1 past the count) and
 * layout_range int64 [local experts, ranks] ((begin << 32) | count of the rows from each rank,
 * begin counted from the expert's first row). The result is the handle of combine while the
 * buffer lives. */
SHMOE_API int shmoe_low_latency_dispatch(shmoe_low_latency_buffer_t buffer,
                                         const shmoe_low_latency_dispatch_args_t* args,
                                         shmoe_ep_result_t* result);

typedef struct {
  size_t struct_size;
  /* bfloat16 [local experts, slots, hidden]: the experts' outputs in dispatch's recv_x layout;
   * not read with zero_copy (the combine buffer is). */
  shmoe_tensor_t x;
  shmoe_tensor_t topk_idx;                     /* int64 [num_tokens, num_topk]: the dispatch's */
  shmoe_tensor_t topk_weights;                 /* float32 [num_tokens, num_topk] */
  shmoe_ep_result_t handle;                    /* the dispatch whose tokens come back */
  shmoe_tensor_t out;                          /* bfloat16 [num_tokens, hidden], or none */
  shmoe_tensor_t combine_wait_recv_cost_stats; /* as dispatch_wait_recv_cost_stats */
  int zero_copy;                               /* x is the handle's shape's combine buffer */
  int use_logfmt;                              /* accepted, changes nothing */
  const char* refusal;
} shmoe_low_latency_combine_args_t;

/* Collective. *result holds combined_x bfloat16 [num_tokens, hidden], unless out was given (then
 * written there, and the result holds no array). */
SHMOE_API int shmoe_low_latency_combine(shmoe_low_latency_buffer_t buffer,
                                        const shmoe_low_latency_combine_args_t* args,
                                        shmoe_ep_result_t* result);

/* Local. *combine_buffer: bfloat16 [local experts, slots, hidden] of the handle's shape, which a
 * zero_copy combine reads; memory of the buffer, valid while it lives. */
SHMOE_API int shmoe_low_latency_get_next_combine_buffer(shmoe_low_latency_buffer_t buffer,
                                                        shmoe_ep_result_t handle,
                                                        shmoe_tensor_t* combine_buffer);

/* Shrink mode, local: mask (nonzero) or unmask rank_to_mask for the following calls (a PE cannot
 * mask itself); copy the mask into mask_status (int32 [ranks]); unmask every rank. Unmasking a
 * masked rank, or clearing the mask, makes the next clean a rejoin. */
SHMOE_API int shmoe_low_latency_update_mask(shmoe_low_latency_buffer_t buffer, int rank_to_mask,
                                            int mask);
SHMOE_API int shmoe_low_latency_query_mask(shmoe_low_latency_buffer_t buffer,
                                           shmoe_tensor_t mask_status);
SHMOE_API int shmoe_low_latency_clean_mask(shmoe_low_latency_buffer_t buffer);

/* Collective: DeepEP's clean_low_latency_buffer. In shrink mode the arguments are checked locally
 * and the call is a barrier of the live ranks (masking those that miss the bound), or a rejoin
 * of every rank (shmoe_moe_rejoin_with) after an unmask. Otherwise nothing to zero (the operators
 * keep no flags between calls): the arguments are checked and agreed on. */
SHMOE_API int shmoe_low_latency_clean(shmoe_low_latency_buffer_t buffer,
                                      int num_max_dispatch_tokens_per_rank, int hidden,
                                      int num_experts, const char* refusal);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_DEEP_EP_H */
