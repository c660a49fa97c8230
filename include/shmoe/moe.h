/* shmoe MoE operators: the C API (for C programs and language bindings; shmoe/moe.hpp wraps it
 * for C++). Link with -lshmoe, after shmem_init().
 *
 * Two operators, each behind an opaque handle, each with one name in every language (C
 * shmoe_<name>_t is C++ shmoe::<Name> and Python shmoe.<Name>):
 *   - shmoe_moe_buffer_t (MoeBuffer), expert-parallel dispatch and combine: dispatch sends each
 *     token to the PEs that own its top-k experts, combine brings the experts' outputs back and
 *     sums them, weighted, at the token's home PE.
 *   - shmoe_mega_moe_t (MegaMoE): a whole MoE layer (route, dispatch, MX FP8 quantization, GEMM1,
 *     SwiGLU, GEMM2, combine) as one call.
 * The words are DeepEP's (num_experts_per_pe, max_tokens_per_pe, hidden, num_topk, topk_idx,
 * topk_weights, recv_x, ...); docs/moe.md's glossary maps them to the seed's (bs, expand_x,
 * assist_info, ...).
 *
 * Every call except the queries (recv_capacity, receive_window, last_error, the MX and FP8
 * token-row helpers) is collective: all PEs make it, in the same order, with the same
 * configuration. A call returns SHMOE_MOE_OK (or a row count) on success and a negative
 * shmoe_moe_status_t otherwise; shmoe_moe_last_error() then says why, naming the call, the
 * parameter and the value. A refused call (bad input on any PE, PEs that disagree, a window too
 * small) is refused on every PE with the same text, so no PE is left waiting.
 */
#ifndef SHMOE_MOE_H
#define SHMOE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SHMOE_MOE_OK = 0,
  /* Refused: bad input or configuration (on every PE for a collective call). Nothing moved. */
  SHMOE_MOE_REFUSED = -1,
  /* Failed for another reason on this PE (out of memory, the symmetric heap is full, ...). */
  SHMOE_MOE_FAILED = -2,
  /* Not a failure: some PE's shmoe_moe_dispatch asked for a retry (SHMOE_CALL_RETRY), so every
   * PE's call returns this with nothing moved, and all can switch to another operator together. */
  SHMOE_MOE_RETRY = -3
} shmoe_moe_status_t;

/* The text of this thread's last failed call ("" if none failed). */
SHMOE_API const char* shmoe_moe_last_error(void);

/* ---- Extensible structs ------------------------------------------------------------------- */

/* Every struct passed to or filled by the MoE API starts with struct_size, which the caller sets
 * to sizeof the struct as its header declares it (SHMOE_STRUCT_INIT does, and zeroes the rest).
 * New fields are only ever appended, and 0 means "the default" for every field that has one, so
 * a caller built against an older header (a smaller struct_size) keeps working: the library reads
 * and writes only the caller's struct_size bytes and takes the defaults for the fields beyond.
 * A struct_size the library does not know (too small for the first version, or larger with
 * nonzero bytes past the fields it knows) is refused, naming both sizes. */
#define SHMOE_STRUCT_INIT(type) ((type){.struct_size = sizeof(type)})

/* ---- Dispatch and combine ----------------------------------------------------------------- */

/* The operator behind dispatch and combine: an MoE buffer (C++ shmoe::MoeBuffer, Python
 * shmoe.MoeBuffer), which owns the symmetric windows they move rows through. Expert e lives on
 * PE e / num_experts_per_pe. */
typedef struct shmoe_moe_buffer* shmoe_moe_buffer_t;

typedef enum {
  SHMOE_DTYPE_INT32 = 0,
  SHMOE_DTYPE_FLOAT16 = 1,
  SHMOE_DTYPE_BFLOAT16 = 2,
  SHMOE_DTYPE_FLOAT32 = 3,
  /* Element types of the ElasticBuffer's tensors (shmoe/elastic.h); an MoE buffer carries 0..3. */
  SHMOE_DTYPE_INT64 = 4,
  SHMOE_DTYPE_UINT8 = 5,
  SHMOE_DTYPE_FLOAT8_E4M3 = 6,
  SHMOE_DTYPE_BOOL = 7
} shmoe_dtype_t;

/* Local; needs no shmem_init. The type's name as torch and numpy spell it ("bfloat16",
 * "float8_e4m3fn", ...), or "?" for a value outside the enum. */
SHMOE_API const char* shmoe_dtype_name(shmoe_dtype_t dtype);

/* Classic: the workers move every row. Double: segments of at least double_plane_threshold bytes
 * go by the copy engine while the workers carry on. Both give the same results. */
typedef enum { SHMOE_PLANE_CLASSIC = 0, SHMOE_PLANE_DOUBLE = 1 } shmoe_plane_t;

typedef struct {
  size_t struct_size;
  int num_experts_per_pe;
  int max_tokens_per_pe; /* the most tokens any call passes on any PE */
  int hidden;            /* elements per token row */
  int num_topk;
  shmoe_dtype_t dtype;
  size_t max_recv_rows; /* 0: n_pes * max_tokens_per_pe * num_topk, which never overflows */
  int matrix_workers;   /* 0 and 0: the cores this PE can fairly use */
  int vector_workers;
  size_t double_plane_threshold; /* bytes; 0: 2 MiB */
  /* Dispatch's side channels (0 for neither): bytes of caller data that travel with each of a
   * token's rows (0..65536), and int32 values each PE adds to the call's header, which every PE
   * receives from every PE in the same step (0..65536). */
  int token_side_bytes;
  int header_ints;
  /* Shrink mode (elastic expert parallelism) when > 0: a dispatch, combine or
   * shmoe_moe_sync_live waits at most this long (1..the hang timeout, ms) for a PE its pe_mask
   * has live; one that has not arrived by then is masked and the call goes on without it. Each
   * PE's receive window then holds num_experts_per_pe x n_pes x max_tokens_per_pe rows, a fixed
   * slot per (local expert, source PE, token), so that PEs whose masks differ never misplace
   * rows (max_recv_rows must be 0). Across hosts too: combine reads rows in place where a
   * PE's heap is mapped here, and by gets (UCX) from a PE on another host. 0: off. */
  int shrink_timeout_ms;
  /* Receive blocks (0..64; 0: none; must be 0 in shrink mode): each holds recv_capacity rows in
   * recv_x's layout, in the symmetric heap. A dispatch given outputs->recv_block takes a free
   * one and the senders write its rows straight into it: the result needs no copy out of the
   * receive window, and stays valid, unlike the window's rows, over later dispatches until the
   * caller releases it (shmoe_moe_release_block). Each block adds recv_capacity x hidden
   * elements to the buffer's symmetric bytes. */
  int recv_blocks;
  /* 0: a receive block holds recv_x's packed layout. > 0 (at least max_tokens_per_pe x n_pes, as
   * a token names an expert once): local expert e's rows start at row e x this in a block, which
   * holds num_experts_per_pe x this rows (DeepEP's low-latency layout; the rest of each run is
   * left as it was). A combine takes its x packed, so such a block is no combine input. */
  int recv_block_expert_rows;
} shmoe_moe_config_t;

/* Local; needs no shmem_init (a launcher checks its options before it starts any PE). Applies to
 * config the rules shmoe_moe_buffer_create applies on n_pes PEs (except shrink_timeout_ms's upper
 * bound, the PE's SHMOE_HANG_TIMEOUT): SHMOE_MOE_OK, or SHMOE_MOE_REFUSED with
 * shmoe_moe_last_error() naming the first field that breaks one as this struct spells it
 * ("shmoe_moe_config_check: num_topk=5 is out of range (1..4, ...)"). */
SHMOE_API int shmoe_moe_config_check(const shmoe_moe_config_t* config, int n_pes);
/* Local; needs no shmem_init. Symmetric heap bytes a buffer of this config takes on each of n_pes
 * PEs (for SHMEM_SYMMETRIC_SIZE); 0 if shmoe_moe_config_check refuses the config. */
SHMOE_API size_t shmoe_moe_buffer_symmetric_bytes(const shmoe_moe_config_t* config, int n_pes);
/* Collective. Allocates the buffer's symmetric windows. */
SHMOE_API int shmoe_moe_buffer_create(const shmoe_moe_config_t* config, shmoe_moe_buffer_t* buffer);
/* Collective. */
SHMOE_API void shmoe_moe_buffer_destroy(shmoe_moe_buffer_t buffer);
/* Rows a dispatch's recv_x, recv_src_info and recv_weights must hold. */
SHMOE_API size_t shmoe_moe_recv_capacity(shmoe_moe_buffer_t buffer);

/* Local query. The receive window: recv_capacity rows of `hidden` elements in recv_x's layout,
 * where dispatch's rows land. Sets *window to it and *capacity_rows to its rows. Passed to a
 * dispatch as recv_x, the rows are not copied out: they are read where they landed; the experts
 * may then write their outputs over them in place, and a combine given the window as x (on every
 * PE) reads them from there (after a dispatch into a receive block too: x is then the rows the
 * caller wrote into the window in recv_x's layout). Its rows are valid until the next dispatch
 * on this buffer, and must not be written while a combine runs. This is the one statement of
 * the window's contract; the other languages refer to it. Refused if buffer, window or
 * capacity_rows is NULL. */
SHMOE_API int shmoe_moe_receive_window(shmoe_moe_buffer_t buffer, void** window,
                                       size_t* capacity_rows);

/* What a PE says of a dispatch or combine before any data moves; every PE learns every PE's. */
typedef enum {
  SHMOE_CALL_PROCEED = 0,
  /* its caller found its inputs wrong: every PE's call is refused, naming it */
  SHMOE_CALL_REFUSE = 1,
  SHMOE_CALL_RETRY = 2 /* dispatch only: it needs another buffer (larger, or of another shape) */
} shmoe_call_verdict_t;

/* A dispatch's inputs. x [num_tokens, hidden] of dtype; topk_idx [num_tokens, num_topk] (-1: no
 * expert); topk_weights [num_tokens, num_topk] or NULL, each travelling with its row. What a
 * layer over dispatch (such as DeepEP's normal mode) needs to learn in the same exchange:
 * token_side [num_tokens, token_side_bytes] (NULL when 0) travels with each of a token's rows;
 * header_ints [header_ints] (NULL when 0) goes to every PE in the call's header. With a verdict
 * other than SHMOE_CALL_PROCEED no other input is read. */
typedef struct {
  size_t struct_size;
  shmoe_plane_t plane;
  const void* x;
  const int32_t* topk_idx;
  const float* topk_weights; /* or NULL */
  int num_tokens;
  const void* token_side;
  const int32_t* header_ints;
  shmoe_call_verdict_t verdict;
  /* Shrink mode only (required there, NULL otherwise): [n_pes], nonzero for a masked PE, which
   * this call neither sends to nor waits for; the call adds the PEs it masked. This PE's own
   * entry must be 0. The rows of masked sources are left out of the outputs. Rows are copied
   * out compactly into recv_x, unless recv_x is the receive window: then they stay in their
   * fixed slots (the j-th row of local expert e from source PE s at
   * (e * n_pes + s) * max_tokens_per_pe + j), and recv_src_info, recv_weights and
   * recv_token_side are indexed the same way; recv_layout_prefix and num_recv_tokens_per_expert
   * count as always. */
  int32_t* pe_mask;
} shmoe_dispatch_args_t;

/* A dispatch's outputs on the receiving PE. recv_x [rows, hidden], grouped by local expert, then
 * source PE; recv_src_info [rows, 3] (source PE, source token, top-k slot); recv_layout_prefix
 * [num_experts_per_pe * n_pes], an inclusive prefix of the rows over (local expert, source PE);
 * num_recv_tokens_per_expert [num_experts_per_pe]; recv_weights [rows] (the weight of the top-k
 * slot each row serves) or NULL; recv_token_side [rows, token_side_bytes], all_header_ints
 * [n_pes, header_ints] (every PE's header ints, by PE) and all_counts [n_pes, n_pes,
 * num_experts_per_pe] (the rows each PE sends each PE's each local expert), each or NULL. */
typedef struct {
  size_t struct_size;
  void* recv_x;
  int32_t* recv_src_info;
  int32_t* recv_layout_prefix;
  int32_t* num_recv_tokens_per_expert;
  float* recv_weights;
  void* recv_token_side;
  int32_t* all_header_ints;
  int32_t* all_counts;
  /* Results in a receive block (config.recv_blocks > 0, recv_x NULL): the call takes a free
   * block, sets *recv_block to its index and *recv_block_x to its rows [rows, hidden] (recv_x's
   * layout), which are the caller's to read and write (the experts may write their outputs over
   * them) until it gives the block back with shmoe_moe_release_block; no PE writes a held block.
   * A combine given recv_block_x as x on every PE reads the rows where they lie, as from the
   * receive window. When every block is held the call is refused on every PE, naming
   * recv_blocks. A block lives in the buffer's window: destroying the buffer frees every block,
   * held or not, so results must be released or copied before. */
  int32_t* recv_block;
  void** recv_block_x;
} shmoe_dispatch_outputs_t;

/* Collective. Returns the rows received, SHMOE_MOE_RETRY on every PE when some PE's verdict was
 * SHMOE_CALL_RETRY, or another status < 0. */
SHMOE_API int shmoe_moe_dispatch(shmoe_moe_buffer_t buffer, const shmoe_dispatch_args_t* args,
                                 const shmoe_dispatch_outputs_t* outputs);

/* Local, from any thread (also while a call on the buffer runs). Gives back receive block
 * `block` that a dispatch took for the caller; its rows may be overwritten by any later dispatch.
 * Refused if block is out of range or not held. */
SHMOE_API int shmoe_moe_release_block(shmoe_moe_buffer_t buffer, int block);
/* Local query: how many receive blocks the caller holds (0 for a NULL buffer). */
SHMOE_API int shmoe_moe_held_blocks(shmoe_moe_buffer_t buffer);

/* A combine's inputs. x: the experts' outputs in dispatch's recv_x layout (or the receive
 * window), with that dispatch's recv_src_info and recv_layout_prefix; topk_idx and topk_weights
 * [num_tokens, num_topk]: this PE's own routing. Writes combined_x [num_tokens, hidden] = sum over
 * k of topk_weights[t, k] * (expert output of token t, slot k). combined_x_float32 (nonzero:
 * combined_x gets the fp32 sums, not rounded to dtype, for a caller that adds a bias before it
 * rounds); caller_mode (0..127, the same on every PE, or every PE's call is refused before
 * anything moves: a caller that decides by it what follows the call never diverges); verdict
 * (SHMOE_CALL_REFUSE: the caller found this PE's inputs wrong, every PE's call is refused naming
 * it and no other input is read; SHMOE_CALL_RETRY is not one of combine's). */
typedef struct {
  size_t struct_size;
  shmoe_plane_t plane;
  const void* x;
  const int32_t* src_info;
  const int32_t* layout_prefix;
  const int32_t* topk_idx;
  const float* topk_weights;
  int num_tokens;
  void* combined_x;
  int combined_x_float32;
  int caller_mode;
  shmoe_call_verdict_t verdict;
  /* Shrink mode only, as shmoe_dispatch_args_t's: a token's slots whose expert lives on a PE
   * masked when the call's rows are read are left out of its sum. The call must repeat the
   * routing of the last dispatch; x may be the receive window in its fixed-slot layout, or
   * dispatch's recv_x layout. */
  int32_t* pe_mask;
} shmoe_combine_args_t;

/* Collective. */
SHMOE_API int shmoe_moe_combine(shmoe_moe_buffer_t buffer, const shmoe_combine_args_t* args);

/* Shrink mode: a barrier of the PEs pe_mask has live (DeepEP's clean_low_latency_buffer), which
 * masks those that do not arrive within the bound. Collective over the live PEs. */
SHMOE_API int shmoe_moe_sync_live(shmoe_moe_buffer_t buffer, int32_t* pe_mask);

/* Shrink mode: a barrier of every PE, masked or not, for a PE that was masked and is back (a
 * stopped PE that resumed): the PEs that arrive within the bound are unmasked in pe_mask and go
 * on from the same call counters; the others are masked. Collective over all PEs, which must
 * make the same rejoins; a PE that misses one must not call it later. */
SHMOE_API int shmoe_moe_rejoin(shmoe_moe_buffer_t buffer, int32_t* pe_mask);
/* The same for a layer of several buffers: those in others[n_others] (at most 31 shrink-mode
 * buffers of the same PEs, the same on every PE) go on from the same call counters too, after
 * one bounded wait. */
SHMOE_API int shmoe_moe_rejoin_with(shmoe_moe_buffer_t buffer, int32_t* pe_mask,
                                    const shmoe_moe_buffer_t* others, int n_others);

/* What the last dispatch or combine on this buffer measured on this PE (local query; the library
 * fills the caller's struct_size bytes). */
typedef struct {
  size_t struct_size;
  double worker_us_max; /* the slowest worker, whole kernel */
  int workers;
  double comm_us;    /* payload and control protocol only */
  size_t bytes_sent; /* payload bytes this PE put into peers' windows */
  size_t bytes_via_copy_engine;
  int rows_received;
} shmoe_moe_timing_t;
SHMOE_API int shmoe_moe_last_timing(shmoe_moe_buffer_t buffer, shmoe_moe_timing_t* timing);
/* The last dispatch's or combine's whole-kernel time on each of this PE's workers, microseconds:
 * worker_us[w] for n_workers = shmoe_moe_timing_t's workers (worker_us_max is their largest; no
 * workers before the first call). Local query; refused if n_workers is another count. */
SHMOE_API int shmoe_moe_last_worker_times(shmoe_moe_buffer_t buffer, double* worker_us,
                                          int n_workers);
/* How long this PE waited, in microseconds, for each source PE's part of the last dispatch or
 * combine on this buffer (its header or entry, then its payload-done flag): wait_us[src] for the
 * n_pes PEs, n_pes = shmem_n_pes(). A PE the others wait for in every call is a slow PE; the
 * rows of all PEs form the wait matrix (local query; 0 everywhere before the first call). */
SHMOE_API int shmoe_moe_last_source_waits(shmoe_moe_buffer_t buffer, double* wait_us, int n_pes);

/* ---- MX FP8 rows (the weights of MegaMoE) ------------------------------------------------- */

typedef enum { SHMOE_FP8_E4M3 = 0, SHMOE_FP8_E5M2 = 1 } shmoe_fp8_format_t;

/* Bytes of one row of `elems` elements in MX FP8: the codes, one E8M0 scale per 32 elements,
 * padding to a multiple of 16. 0 if elems < 1. */
SHMOE_API size_t shmoe_mx_row_bytes(int elems);
/* Quantizes `rows` rows of `cols` fp32 values (OCP MX v1.0) into rows of shmoe_mx_row_bytes(cols)
 * bytes at dst. Local (not collective). */
SHMOE_API int shmoe_mx_quantize_rows(const float* src, size_t rows, int cols,
                                     shmoe_fp8_format_t format, uint8_t* dst);
/* As shmoe_mx_quantize_rows, from bfloat16 bit patterns (the token rows of an FP8 dispatch). */
SHMOE_API int shmoe_mx_quantize_bf16_rows(const uint16_t* src, size_t rows, int cols,
                                          shmoe_fp8_format_t format, uint8_t* dst);
/* The inverse: rows of shmoe_mx_row_bytes(cols) bytes to `rows` x `cols` fp32 values. */
SHMOE_API int shmoe_mx_dequantize_rows(const uint8_t* src, size_t rows, int cols,
                                       shmoe_fp8_format_t format, float* dst);

/* ---- FP8 token rows with fp32 block scales (DeepEP's low-latency dispatch format) ---------- */

/* A token row of `cols` channels, cols a positive multiple of 128: cols E4M3 codes, then
 * cols / 128 fp32 scales. Block b's scale is amax / 448 over its 128 channels (amax at least
 * 1e-4), or with round_scale the power of two at or above that; code i is E4M3(x_i / scale),
 * rounded to nearest even and saturated. Bytes of one row; 0 if cols is not such a multiple. */
SHMOE_API size_t shmoe_fp8_token_row_bytes(int cols);
/* Local. rows x cols bfloat16 bit patterns -> rows of shmoe_fp8_token_row_bytes(cols) bytes. */
SHMOE_API int shmoe_fp8_quantize_token_rows(const uint16_t* src, size_t rows, int cols,
                                            int round_scale, uint8_t* dst);
/* Local. Splits such rows: values [rows, cols], the E4M3 values unscaled as bfloat16 bit patterns
 * (exact), and scales [rows, cols / 128]; x is values * scale of its block. */
SHMOE_API int shmoe_fp8_unpack_token_rows(const uint8_t* src, size_t rows, int cols,
                                          uint16_t* values, float* scales);

/* ---- MegaMoE -------------------------------------------------------------------------------- */

typedef struct shmoe_mega_moe* shmoe_mega_moe_t;

/* How MegaMoE keeps the experts' weights. FP8: the codes and scales as given, 1.03 bytes per
 * parameter, read directly by the GEMMs of small batches (decode is bound by reading them); it
 * wins where an expert gets up to about 4 rows a call. BF16: expanded once to bfloat16 (fp32 where
 * the CPU has no bf16 dot products) and packed for oneDNN, 2 (4) bytes per parameter; it wins from
 * about 8 rows (at 6 the two are even). AUTO: FP8 where max_tokens_per_pe * num_topk <= 4 *
 * num_experts_per_pe, BF16 above. */
typedef enum {
  SHMOE_MEGA_WEIGHTS_AUTO = 0,
  SHMOE_MEGA_WEIGHTS_FP8 = 1,
  SHMOE_MEGA_WEIGHTS_BF16 = 2
} shmoe_mega_weights_t;

/* Who applies SwiGLU to a matrix worker's waves and writes their outputs back. OVERLAPPED: its
 * vector workers, overlapping the next GEMMs (pays only with cores to run them on). INLINE: the
 * matrix worker itself, wave after wave. SOLO: no workers, the calling thread does every part
 * (where a PE has under two cores). AUTO: OVERLAPPED where this PE's share of its host's cores
 * runs all its workers at once, SOLO under two cores, INLINE in between. */
typedef enum {
  SHMOE_MEGA_SCHEDULE_AUTO = 0,
  SHMOE_MEGA_SCHEDULE_OVERLAPPED = 1,
  SHMOE_MEGA_SCHEDULE_INLINE = 2,
  SHMOE_MEGA_SCHEDULE_SOLO = 3
} shmoe_mega_schedule_t;

typedef struct {
  size_t struct_size;    /* see "Extensible structs" */
  int max_tokens_per_pe; /* the most tokens any call passes on any PE */
  int hidden;
  int intermediate_hidden; /* even: GEMM1's output is split in two halves for SwiGLU */
  int num_topk;
  int num_experts_per_pe;
  shmoe_fp8_format_t format;
  size_t max_recv_rows; /* 0: n_pes * max_tokens_per_pe * num_topk, which never overflows */
  int matrix_workers;   /* 0 and 0: 1 and 2; otherwise vector_workers = 2 * matrix */
  int vector_workers;
  int wave_rows; /* rows per GEMM tile, 1..4096; 0: automatic (shmoe_mega_moe_info says which) */
  shmoe_mega_weights_t weights;   /* 0: SHMOE_MEGA_WEIGHTS_AUTO */
  shmoe_mega_schedule_t schedule; /* 0: SHMOE_MEGA_SCHEDULE_AUTO */
} shmoe_mega_moe_config_t;

/* Local; needs no shmem_init. Applies to config the rules shmoe_mega_moe_create applies on n_pes
 * PEs: SHMOE_MOE_OK, or SHMOE_MOE_REFUSED with shmoe_moe_last_error() naming the first field that
 * breaks one as this struct spells it ("shmoe_mega_moe_config_check: intermediate_hidden=3 must be
 * even ..."). */
SHMOE_API int shmoe_mega_moe_config_check(const shmoe_mega_moe_config_t* config, int n_pes);

/* What a MegaMoE resolved at creation (local query; the library fills the caller's struct_size
 * bytes). */
typedef struct {
  size_t struct_size;
  shmoe_mega_weights_t weights;   /* FP8 or BF16, never AUTO */
  shmoe_mega_schedule_t schedule; /* never AUTO */
  int matrix_workers;
  int vector_workers;
  size_t weight_bytes;  /* the local experts' weights in that form */
  char gemm_engine[96]; /* the GEMM engine in words, NUL-terminated (cut to fit) */
  int wave_rows; /* rows per GEMM tile: the config's, or if 0 128 with OVERLAPPED, else 512 */
} shmoe_mega_moe_info_t;

/* Collective. w1 and w2 hold num_experts_per_pe pointers, one per local expert, to MX FP8 rows
 * (shmoe_mx_quantize_rows) along the reduction dimension: w1[e] is intermediate_hidden rows of
 * hidden elements, w2[e] hidden rows of intermediate_hidden / 2. The weights are copied
 * (config.weights says in which form) at creation and may be freed after it. */
SHMOE_API int shmoe_mega_moe_create(const shmoe_mega_moe_config_t* config, const uint8_t* const* w1,
                                    const uint8_t* const* w2, shmoe_mega_moe_t* mega);
/* Collective. */
SHMOE_API void shmoe_mega_moe_destroy(shmoe_mega_moe_t mega);
/* Collective. x [num_tokens, hidden] BF16 bit patterns; topk_idx [num_tokens, num_topk] (-1:
 * none); topk_weights [num_tokens, num_topk]. Writes y [num_tokens, hidden] BF16 and, if not
 * NULL, num_recv_tokens_per_expert [num_experts_per_pe] (rows each local expert received). */
SHMOE_API int shmoe_mega_moe_run(shmoe_mega_moe_t mega, const uint16_t* x, const int32_t* topk_idx,
                                 const float* topk_weights, int num_tokens, uint16_t* y,
                                 int32_t* num_recv_tokens_per_expert);
/* As shmoe_mega_moe_run, through the unfused chain of operators (the same bits; for checks and
 * comparisons). */
SHMOE_API int shmoe_mega_moe_run_unfused(shmoe_mega_moe_t mega, const uint16_t* x,
                                         const int32_t* topk_idx, const float* topk_weights,
                                         int num_tokens, uint16_t* y,
                                         int32_t* num_recv_tokens_per_expert);
/* Local: microseconds the last run spent in its kernel on this PE (0 before the first). */
SHMOE_API double shmoe_mega_moe_last_kernel_us(shmoe_mega_moe_t mega);
/* Symmetric heap bytes each of n_pes PEs needs for this config (SHMEM_SYMMETRIC_SIZE). */
SHMOE_API size_t shmoe_mega_moe_symmetric_bytes(const shmoe_mega_moe_config_t* config, int n_pes);
/* The same for a MegaMoE that also calls shmoe_mega_moe_run_unfused (whose chain adds the windows
 * of a dispatch and a combine buffer, made at its first call). 0 for a refused config. */
SHMOE_API size_t shmoe_mega_moe_unfused_symmetric_bytes(const shmoe_mega_moe_config_t* config,
                                                        int n_pes);
/* Local query: what the layer resolved at creation. */
SHMOE_API int shmoe_mega_moe_info(shmoe_mega_moe_t mega, shmoe_mega_moe_info_t* info);
/* Local: record (on nonzero) or stop recording every worker's stages in the following fused runs
 * on this PE. */
SHMOE_API int shmoe_mega_moe_set_tracing(shmoe_mega_moe_t mega, int on);
/* Local query: the stages the last traced run recorded on this PE, worker by worker: event i ran
 * on worker[i], was stage[i] (a string of the library's, valid for the process's life) with
 * index[i] (the wave, or -1), from begin_us[i] to end_us[i] (microseconds of the host's steady
 * clock, which its PEs share). Writes at most capacity events; returns how many there are (call
 * with capacity 0 and NULL arrays to size them), or a status < 0. */
SHMOE_API int shmoe_mega_moe_last_trace(shmoe_mega_moe_t mega, size_t capacity, int* worker,
                                        const char** stage, int* index, double* begin_us,
                                        double* end_us);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_MOE_H */
