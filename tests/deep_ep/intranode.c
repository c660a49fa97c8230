/* shmoe/deep_ep.h's normal-mode runtime from C, against an independent reference: every PE
 * computes every PE's tokens and routing from the same formulas, so it knows which rows it must
 * receive, in which order (source rank, then token), and what its combine must return (each token
 * summed over the ranks it went to, plus a bias; small integers, exact in bfloat16). Then the
 * argument checks: a bad topk_idx on PE 1 and a float32 combine x on the last PE are refused on
 * every PE, the refusing PE naming the argument and the others naming the PE, and the buffer goes
 * on working. */
#include <shmem.h>
#include <shmoe/deep_ep.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor2.h"

enum { kHidden = 16, kTopk = 2, kLocal = 2 };

static int failures = 0;
static void check(int ok, const char* what) {
  if (!ok && failures++ < 10) fprintf(stderr, "PE %d: %s\n", shmem_my_pe(), what);
}

static int tokens_of(int pe) {
  return 5 + 3 * pe;
}
static int64_t expert_of(int pe, int t, int k, int experts) {
  return (int64_t)((pe * 7 + t * 3 + k * 5) % (experts + 1)) - 1; /* -1: none */
}
static float value_of(int pe, int t, int h) {
  return (float)((pe * 13 + t * 5 + h) % 64 - 32);
}
static uint16_t bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact for these small integers */
}
static int goes_to(int pe, int t, int rank, int experts) {
  for (int k = 0; k < kTopk; ++k) {
    const int64_t e = expert_of(pe, t, k, experts);
    if (e >= 0 && e / kLocal == rank) return 1;
  }
  return 0;
}

static shmoe_tensor_t get(shmoe_ep_result_t r, const char* name) {
  shmoe_tensor_t t;
  check(shmoe_ep_result_get(r, name, &t), name);
  return t;
}

/* Both PEs' messages of a refused call: the refusing one names `what`, the others the PE. */
static void expect_refused(int status, int refuser, const char* what) {
  char text[256];
  snprintf(text, sizeof text, "PE %d", refuser);
  check(status == SHMOE_MOE_REFUSED, "a bad argument was not refused");
  const char* got = shmoe_moe_last_error();
  if (strstr(got, shmem_my_pe() == refuser ? what : text) == NULL) {
    fprintf(stderr, "PE %d: refusal says: %s\n", shmem_my_pe(), got);
    check(0, "the refusal does not name the argument or the refusing PE");
  }
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = kLocal * n, T = tokens_of(me);
  shmoe_intranode_buffer_config_t config = SHMOE_STRUCT_INIT(shmoe_intranode_buffer_config_t);
  shmoe_intranode_buffer_t buffer = NULL;
  check(shmoe_intranode_buffer_create(&config, &buffer) == SHMOE_MOE_OK, "create");

  uint16_t* x = malloc(sizeof(uint16_t) * T * kHidden);
  int64_t* idx = malloc(sizeof(int64_t) * T * kTopk);
  float* w = malloc(sizeof(float) * T * kTopk);
  uint16_t* bias = malloc(sizeof(uint16_t) * T * kHidden);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < kHidden; ++h) {
      x[t * kHidden + h] = bf16(value_of(me, t, h));
      bias[t * kHidden + h] = bf16((float)h);
    }
    for (int k = 0; k < kTopk; ++k) {
      idx[t * kTopk + k] = expert_of(me, t, k, experts);
      w[t * kTopk + k] = 0.25f * (float)(k + 1);
    }
  }

  shmoe_intranode_layout_args_t la = SHMOE_STRUCT_INIT(shmoe_intranode_layout_args_t);
  la.topk_idx = tensor2(idx, SHMOE_DTYPE_INT64, T, kTopk);
  la.num_experts = experts;
  shmoe_ep_result_t layout = NULL;
  check(shmoe_intranode_get_dispatch_layout(buffer, &la, &layout) == SHMOE_MOE_OK, "layout");
  const bool* in_rank = get(layout, "is_token_in_rank").data;
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < n; ++j) check(in_rank[t * n + j] == goes_to(me, t, j, experts), "in_rank");
  }

  shmoe_intranode_dispatch_args_t da = SHMOE_STRUCT_INIT(shmoe_intranode_dispatch_args_t);
  da.x = tensor2(x, SHMOE_DTYPE_BFLOAT16, T, kHidden);
  da.num_tokens_per_rank = get(layout, "num_tokens_per_rank");
  da.is_token_in_rank = get(layout, "is_token_in_rank");
  da.num_tokens_per_expert = get(layout, "num_tokens_per_expert");
  da.topk_idx = tensor2(idx, SHMOE_DTYPE_INT64, T, kTopk);
  da.topk_weights = tensor2(w, SHMOE_DTYPE_FLOAT32, T, kTopk);
  shmoe_ep_result_t handle = NULL;
  check(shmoe_intranode_dispatch(buffer, &da, &handle) == SHMOE_MOE_OK, "dispatch");
  if (handle == NULL) {
    fprintf(stderr, "PE %d: dispatch: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  const shmoe_tensor_t recv_x = get(handle, "recv_x");
  const uint16_t* rx = recv_x.data;
  const int64_t* ri = get(handle, "recv_topk_idx").data;
  const int32_t* src_idx = get(handle, "recv_src_idx").data;
  int64_t row = 0;
  for (int src = 0; src < n; ++src) {
    for (int t = 0; t < tokens_of(src); ++t) {
      if (!goes_to(src, t, me, experts)) continue;
      check(row < recv_x.shape[0], "fewer rows received than sent");
      if (row >= recv_x.shape[0]) break;
      check(src_idx[row] == t, "recv_src_idx");
      for (int h = 0; h < kHidden; ++h) {
        check(rx[row * kHidden + h] == bf16(value_of(src, t, h)), "recv_x");
      }
      for (int k = 0; k < kTopk; ++k) {
        const int64_t e = expert_of(src, t, k, experts);
        check(ri[row * kTopk + k] == (e >= 0 && e / kLocal == me ? e - me * kLocal : -1),
              "recv_topk_idx");
      }
      ++row;
    }
  }
  check(row == recv_x.shape[0], "more rows received than sent");

  /* Combine: the experts return their rows; each token comes back summed over its ranks. */
  shmoe_intranode_combine_args_t ca = SHMOE_STRUCT_INIT(shmoe_intranode_combine_args_t);
  ca.x = recv_x;
  ca.bias0 = tensor2(bias, SHMOE_DTYPE_BFLOAT16, T, kHidden);
  ca.handle = handle;
  shmoe_ep_result_t combined = NULL;
  check(shmoe_intranode_combine(buffer, &ca, &combined) == SHMOE_MOE_OK, "combine");
  const uint16_t* cx = combined ? get(combined, "combined_x").data : NULL;
  for (int t = 0; cx != NULL && t < T; ++t) {
    int ranks = 0;
    for (int j = 0; j < n; ++j) ranks += goes_to(me, t, j, experts);
    for (int h = 0; h < kHidden; ++h) {
      check(cx[t * kHidden + h] == bf16(value_of(me, t, h) * (float)ranks + (float)h),
            "combined_x");
    }
  }
  shmoe_ep_result_release(combined);

  /* A topk_idx out of range on PE 1: refused on every PE, moving nothing. */
  const int64_t saved = idx[0];
  if (me == 1) idx[0] = experts;
  shmoe_ep_result_t refused = NULL;
  expect_refused(shmoe_intranode_dispatch(buffer, &da, &refused), 1, "topk_idx[0][0]");
  check(refused == NULL, "a refused dispatch returned a result");
  idx[0] = saved;
  /* A float32 x in the last PE's combine. */
  float* wrong = calloc((size_t)recv_x.shape[0] * kHidden + 1, sizeof(float));
  if (me == n - 1) ca.x = tensor2(wrong, SHMOE_DTYPE_FLOAT32, recv_x.shape[0], kHidden);
  ca.bias0.data = NULL;
  expect_refused(shmoe_intranode_combine(buffer, &ca, &refused), n - 1, "x (float32");
  /* The buffer goes on: a cached dispatch on the handle gives the same rows. */
  shmoe_intranode_dispatch_args_t cached = SHMOE_STRUCT_INIT(shmoe_intranode_dispatch_args_t);
  cached.x = da.x;
  cached.handle = handle;
  shmoe_ep_result_t again = NULL;
  check(shmoe_intranode_dispatch(buffer, &cached, &again) == SHMOE_MOE_OK, "cached dispatch");
  if (again != NULL) {
    const shmoe_tensor_t ax = get(again, "recv_x");
    check(ax.shape[0] == recv_x.shape[0] &&
              memcmp(ax.data, rx, (size_t)ax.shape[0] * kHidden * 2) == 0,
          "cached dispatch rows");
  }
  shmoe_ep_result_release(again);
  shmoe_ep_result_release(handle);
  shmoe_ep_result_release(layout);
  check(shmoe_intranode_buffer_destroy(buffer) == SHMOE_MOE_OK, "destroy");
  free(wrong);
  free(x);
  free(idx);
  free(w);
  free(bias);
  printf("PE %d/%d: %s\n", me, n, failures ? "FAILED" : "ok");
  shmem_finalize();
  return failures ? 1 : 0;
}
