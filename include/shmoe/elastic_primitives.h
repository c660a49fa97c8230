/* shmoe ElasticBuffer's primitives beside dispatch and combine (shmoe/elastic.h): DeepEP V2's
 * pipeline-parallel send and receive (PP), all-gather sessions (AGRS) and Engram's remote
 * storage. Each keeps its own symmetric memory, allocated by its collective configuration call
 * (shmoe_elastic_pp_set_config, shmoe_elastic_agrs_set_config, shmoe_elastic_engram_write) and
 * freed by the next one or by shmoe_elastic_buffer_destroy; each refuses to take more memory than
 * the buffer's num_bytes, as DeepEP's buffer does.
 *
 * The collective calls refuse on every PE or on none (status SHMOE_MOE_REFUSED, text in
 * shmoe_last_error(), naming the argument, its value and what is allowed). The one-sided calls
 * (pp_send, pp_recv, engram_fetch, the AGRS session calls) check on the calling PE only: a PE
 * that refuses moves nothing, and a peer waiting for it reports the hang after shmoe's hang
 * timeout (SHMOE_HANG_TIMEOUT) instead of waiting for ever. */
#ifndef SHMOE_ELASTIC_PRIMITIVES_H
#define SHMOE_ELASTIC_PRIMITIVES_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/elastic.h"
#include "shmoe/export.h"
#include "shmoe/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- PP: tensors between ring neighbours ---------------------------------------------------
 * Each PE receives from its two ring neighbours (rank - 1 and rank + 1 modulo the ranks; one
 * neighbour with two ranks) into num_max_inflight_tensors slots per neighbour, in send order. A
 * send waits for a free slot at its destination (one the destination has received out of), then
 * writes the tensor there and returns: it never waits for the receive itself. */

/* Bytes (a multiple of 2 MiB) DeepEP's buffer needs for PP of these settings. */
SHMOE_API int shmoe_elastic_pp_buffer_size_hint(int64_t num_max_tensor_bytes,
                                                int num_max_inflight_tensors, uint64_t* bytes);
/* Collective: the PP slots for tensors of at most num_max_tensor_bytes (rounded up to 32), every
 * PE alike; what was in flight under a previous configuration is dropped. */
SHMOE_API int shmoe_elastic_pp_set_config(shmoe_elastic_buffer_t buffer,
                                          int64_t num_max_tensor_bytes,
                                          int num_max_inflight_tensors);
/* Sends `t` (C-contiguous, any dtype, at most num_max_tensor_bytes) to dst_rank, a ring
 * neighbour. */
SHMOE_API int shmoe_elastic_pp_send(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* t,
                                    int dst_rank);
/* Receives src_rank's next tensor into `t`, which must have the bytes that src_rank sent. */
SHMOE_API int shmoe_elastic_pp_recv(shmoe_elastic_buffer_t buffer, const shmoe_tensor_t* t,
                                    int src_rank);

/* ---- AGRS: all-gather sessions ---------------------------------------------------------------
 * A session (create ... destroy) hands out the session memory in call order: an all-gather of
 * tensors of b_0, b_1, ... bytes takes a region of align(num_ranks * b_i, 32) bytes per tensor,
 * rank r's tensor at offset r * b_i, on every PE; the gathered tensor is that region, valid until
 * the session ends. Every PE makes the same calls with the same sizes. */

/* The session bytes all-gathers of tensors of these `n` byte counts take over num_ranks ranks. */
SHMOE_API int shmoe_elastic_agrs_session_bytes(int num_ranks, const int64_t* tensor_bytes, int n,
                                               uint64_t* bytes);
/* Bytes (a multiple of 2 MiB) DeepEP's buffer needs for sessions of num_max_session_bytes. */
SHMOE_API int shmoe_elastic_agrs_buffer_size_hint(uint64_t num_max_session_bytes, uint64_t* bytes);
/* Collective, outside a session: sessions of at most num_max_session_bytes (rounded up to 32)
 * and num_max_all_gathers_per_session all-gather calls (1..32). */
SHMOE_API int shmoe_elastic_agrs_set_config(shmoe_elastic_buffer_t buffer,
                                            int64_t num_max_session_bytes,
                                            int num_max_all_gathers_per_session);
/* Opens a session (on this PE; every PE opens the same sessions). */
SHMOE_API int shmoe_elastic_agrs_create_session(shmoe_elastic_buffer_t buffer);
/* Collective: closes the session once every PE has closed it (no PE writes the next session's
 * data into a PE still reading this one's). */
SHMOE_API int shmoe_elastic_agrs_destroy_session(shmoe_elastic_buffer_t buffer);
/* This PE's place in the regions of the next `n` tensors (of these byte counts) that one
 * all-gather will take: a tensor written there is gathered without a copy. out[i] is writable
 * for tensor_bytes[i] bytes until the session ends. */
SHMOE_API int shmoe_elastic_agrs_inplace_tensors(shmoe_elastic_buffer_t buffer,
                                                 const int64_t* tensor_bytes, int n, void** out);

/* Which all-gather to wait for. */
typedef struct {
  uint64_t session;
  int call;
} shmoe_elastic_agrs_ticket_t;

/* Gathers the `n` tensors (C-contiguous, any dtype; each in place or anywhere else) from every
 * PE: writes this PE's into every PE's regions and returns. gathered[i] is tensor i's region,
 * [num_ranks][bytes of tensor i]; it holds every PE's data once shmoe_elastic_agrs_wait(ticket)
 * has returned. */
SHMOE_API int shmoe_elastic_agrs_all_gather(shmoe_elastic_buffer_t buffer,
                                            const shmoe_tensor_t* tensors, int n, void** gathered,
                                            shmoe_elastic_agrs_ticket_t* ticket);
/* Waits until every PE's data of the ticket's all-gather has arrived (in its session). */
SHMOE_API int shmoe_elastic_agrs_wait(shmoe_elastic_buffer_t buffer,
                                      shmoe_elastic_agrs_ticket_t ticket);

/* ---- Engram: remote storage fetched by index --------------------------------------------------
 * Each PE holds num_entries rows of `hidden` values (bf16, or FP8 E4M3 with per-entry scales
 * every PE holds all of); global entry i is PE i / num_entries's row i % num_entries. */

/* DeepEP's (receive area, storage) bytes, each a multiple of 2 MiB, for num_entries rows of
 * `hidden` elements of element_bytes each and num_max_tokens fetched rows. */
SHMOE_API int shmoe_elastic_engram_storage_size_hint(int64_t num_entries, int hidden,
                                                     int64_t num_max_tokens, int element_bytes,
                                                     uint64_t bytes[2]);

typedef struct {
  size_t struct_size;
  /* [num_entries, hidden] bfloat16 or float8_e4m3fn: this PE's entries. */
  shmoe_tensor_t storage;
  /* FP8 only: [num_ranks * num_entries, num_sf_packs] of a 4-byte dtype (float32 or int32):
   * every entry's scales, the same on every PE. */
  shmoe_tensor_t sf;
  /* This PE refuses the call (its caller could not convert its arguments), or NULL. */
  const char* refusal;
} shmoe_elastic_engram_write_args_t;

/* Collective: every PE's storage (the same shape and dtype on every PE) becomes fetchable once
 * every PE has written; fetches of the previous storage must have been waited for. */
SHMOE_API int shmoe_elastic_engram_write(shmoe_elastic_buffer_t buffer,
                                         const shmoe_elastic_engram_write_args_t* args);
/* Starts fetching the entries `indices` names (int32 [num_tokens, num_entries_per_token]) from
 * the PEs that hold them. *result holds "data" [num_tokens, num_entries_per_token * hidden] in
 * the storage's dtype (each token's entries side by side) and, in FP8 mode, "sf" [num_tokens,
 * num_entries_per_token * num_sf_packs] in sf's dtype (column-major with rows padded to 4 when
 * use_tma_aligned_col_major_sf); their contents are valid once shmoe_elastic_engram_fetch_wait
 * has returned. */
SHMOE_API int shmoe_elastic_engram_fetch(shmoe_elastic_buffer_t buffer,
                                         const shmoe_tensor_t* indices,
                                         int use_tma_aligned_col_major_sf,
                                         shmoe_ep_result_t* result);
/* Waits until the fetch that made `result` has arrived. */
SHMOE_API int shmoe_elastic_engram_fetch_wait(shmoe_elastic_buffer_t buffer,
                                              shmoe_ep_result_t result);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_ELASTIC_PRIMITIVES_H */
