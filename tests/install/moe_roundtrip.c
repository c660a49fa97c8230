/* The MoE C API (shmoe/moe.h) from a program built outside shmoe: a dispatch, an "expert" that
 * scales each row by its expert's number plus one, and a combine, checked against a reference
 * each PE computes from the routing every PE uses (a pure function of the PE, token and slot).
 * Token t of PE s carries x[t][j] = 1000 s + 10 t + j. The round trip runs twice: through a buffer
 * of the program's, then in place in the operator's receive window (dispatched into it, scaled
 * there, combined from it). Also checks refusals (bs above max_bs on every PE, a bad dtype, a NULL
 * handle or output). Prints "PE r/N: ok" when all matched. */
#include <shmem.h>
#include <shmoe/moe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kExpertsPerPe = 2, kMaxBs = 5, kHidden = 8, kTopk = 2 };

static int tokens_of(int pe) {
  return 3 + pe % 3;
}
/* Token 1's second slot goes nowhere, to cover -1. */
static int expert_of(int pe, int t, int k, int experts) {
  return (t == 1 && k == 1) ? -1 : (pe * 7 + t * 3 + k) % experts;
}
static float scale_of(int k) {
  return 0.5f + 0.25f * (float)k;
}
static float x_of(int pe, int t, int j) {
  return (float)(1000 * pe + 10 * t + j);
}

static int failures = 0;
static void check(int ok, const char* what, int a, int b) {
  if (!ok && failures++ < 10) fprintf(stderr, "PE %d: %s (%d, %d)\n", shmem_my_pe(), what, a, b);
}

/* shmoe_moe_dispatch over the arrays of this test. */
static int dispatch(shmoe_moe_buffer_t moe, const float* x, const int32_t* ids, const float* scales,
                    int bs, float* recv_x, int32_t* assist, int32_t* recv_count,
                    int32_t* token_nums) {
  shmoe_dispatch_args_t args = SHMOE_STRUCT_INIT(shmoe_dispatch_args_t);
  args.x = x;
  args.topk_idx = ids;
  args.topk_weights = scales;
  args.num_tokens = bs;
  shmoe_dispatch_outputs_t outs = SHMOE_STRUCT_INIT(shmoe_dispatch_outputs_t);
  outs.recv_x = recv_x;
  outs.recv_src_info = assist;
  outs.recv_layout_prefix = recv_count;
  outs.num_recv_tokens_per_expert = token_nums;
  return shmoe_moe_dispatch(moe, &args, &outs);
}

/* Dispatch into expand_x, the expert over its rows in place, combine from it; every step checked
 * against the reference. Collective. */
static void roundtrip(shmoe_moe_buffer_t moe, const float* x, const int32_t* ids,
                      const float* scales, int bs, float* expand_x, int32_t* assist) {
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = n * kExpertsPerPe;
  int32_t recv_count[kExpertsPerPe * 64], token_nums[kExpertsPerPe];
  float out[kMaxBs * kHidden];
  if (n > 64) shmem_global_exit(2);
  const int rows = dispatch(moe, x, ids, scales, bs, expand_x, assist, recv_count, token_nums);
  if (rows < 0) {
    fprintf(stderr, "PE %d: shmoe_moe_dispatch: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }

  /* Every (expert l of this PE, source s) range of rows holds exactly the rows s routed there. */
  int expected_rows = 0, begin = 0;
  for (int l = 0; l < kExpertsPerPe; ++l) {
    const int expert = me * kExpertsPerPe + l;
    int expert_rows = 0;
    for (int s = 0; s < n; ++s) {
      int expected = 0;
      for (int t = 0; t < tokens_of(s); ++t)
        for (int k = 0; k < kTopk; ++k) expected += expert_of(s, t, k, experts) == expert;
      const int end = recv_count[l * n + s];
      check(end - begin == expected, "rows from a source to an expert", end - begin, expected);
      for (int r = begin; r < end && r < rows; ++r) {
        const int src = assist[r * 3], t = assist[r * 3 + 1], k = assist[r * 3 + 2];
        check(src == s, "row's source PE", src, s);
        check(t >= 0 && t < tokens_of(s) && k >= 0 && k < kTopk, "row's token and slot", t, k);
        if (t < 0 || t >= tokens_of(s) || k < 0 || k >= kTopk) continue;
        check(expert_of(s, t, k, experts) == expert, "row routed to this expert", t, k);
        for (int j = 0; j < kHidden; ++j)
          check(expand_x[r * kHidden + j] == x_of(s, t, j), "row data", r, j);
        /* The expert: its number plus one, times the row. */
        for (int j = 0; j < kHidden; ++j) expand_x[r * kHidden + j] *= (float)(expert + 1);
      }
      begin = end > begin ? end : begin;
      expert_rows += expected;
    }
    check(token_nums[l] == expert_rows, "expert_token_nums", token_nums[l], expert_rows);
    expected_rows += expert_rows;
  }
  check(rows == expected_rows, "rows received", rows, expected_rows);

  shmoe_combine_args_t combine = SHMOE_STRUCT_INIT(shmoe_combine_args_t);
  combine.x = expand_x;
  combine.src_info = assist;
  combine.layout_prefix = recv_count;
  combine.topk_idx = ids;
  combine.topk_weights = scales;
  combine.num_tokens = bs;
  combine.combined_x = out;
  if (shmoe_moe_combine(moe, &combine) != SHMOE_MOE_OK) {
    fprintf(stderr, "PE %d: shmoe_moe_combine: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  for (int t = 0; t < bs; ++t) {
    for (int j = 0; j < kHidden; ++j) {
      float want = 0;
      for (int k = 0; k < kTopk; ++k) {
        const int e = expert_of(me, t, k, experts);
        if (e >= 0) want += scale_of(k) * (float)(e + 1) * x_of(me, t, j);
      }
      check(out[t * kHidden + j] == want, "combined row", t, j);
    }
  }
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = n * kExpertsPerPe;
  shmoe_moe_config_t config = SHMOE_STRUCT_INIT(shmoe_moe_config_t);
  config.num_experts_per_pe = kExpertsPerPe;
  config.max_tokens_per_pe = kMaxBs;
  config.hidden = kHidden;
  config.num_topk = kTopk;
  config.dtype = SHMOE_DTYPE_FLOAT32;
  shmoe_moe_buffer_t moe = NULL;
  if (shmoe_moe_buffer_create(&config, &moe) != SHMOE_MOE_OK) {
    fprintf(stderr, "PE %d: shmoe_moe_buffer_create: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }

  const int bs = tokens_of(me);
  float x[kMaxBs * kHidden], scales[kMaxBs * kTopk];
  int32_t ids[kMaxBs * kTopk];
  for (int t = 0; t < bs; ++t) {
    for (int j = 0; j < kHidden; ++j) x[t * kHidden + j] = x_of(me, t, j);
    for (int k = 0; k < kTopk; ++k) {
      ids[t * kTopk + k] = expert_of(me, t, k, experts);
      scales[t * kTopk + k] = scale_of(k);
    }
  }

  const size_t cap = shmoe_moe_recv_capacity(moe);
  float* expand_x = malloc(cap * kHidden * sizeof(float));
  int32_t* assist = malloc(cap * 3 * sizeof(int32_t));
  if (expand_x == NULL || assist == NULL) shmem_global_exit(2);
  roundtrip(moe, x, ids, scales, bs, expand_x, assist);

  /* In place: the rows stay in the window they landed in, the expert overwrites them there, and
   * the combine reads them from it. */
  void* window = NULL;
  size_t window_rows = 0;
  if (shmoe_moe_receive_window(moe, &window, &window_rows) != SHMOE_MOE_OK) {
    fprintf(stderr, "PE %d: shmoe_moe_receive_window: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  check(window != NULL, "the receive window is not NULL", 0, 0);
  check(window_rows == cap, "the window holds recv_capacity rows", (int)window_rows, (int)cap);
  roundtrip(moe, x, ids, scales, bs, (float*)window, assist);

  /* A refused call: refused on every PE, with the parameter named, and the buffer still usable. */
  int32_t recv_count[kExpertsPerPe * 64], token_nums[kExpertsPerPe];
  const int refused =
      dispatch(moe, x, ids, scales, kMaxBs + 1, expand_x, assist, recv_count, token_nums);
  check(refused == SHMOE_MOE_REFUSED, "num_tokens > max_tokens_per_pe is refused", refused,
        SHMOE_MOE_REFUSED);

  /* Bad arguments: refused with the call, the parameter and the value named. */
  shmoe_moe_config_t bad = config;
  bad.dtype = (shmoe_dtype_t)7;
  shmoe_moe_buffer_t unused = NULL;
  check(shmoe_moe_buffer_create(&bad, &unused) == SHMOE_MOE_REFUSED, "dtype 7 is refused", 7, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_buffer_create: config->dtype=7") != NULL,
        "the refusal names the call, dtype and 7", 0, 0);
  check(dispatch(NULL, x, ids, scales, bs, expand_x, assist, recv_count, token_nums) ==
            SHMOE_MOE_REFUSED,
        "a NULL handle is refused", 0, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_dispatch: buffer is NULL") != NULL,
        "the refusal names the NULL handle", 0, 0);

  check(shmoe_moe_receive_window(NULL, &window, &window_rows) == SHMOE_MOE_REFUSED,
        "a NULL handle is refused by shmoe_moe_receive_window", 0, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_receive_window: buffer is NULL") != NULL,
        "the refusal names the NULL handle", 0, 0);
  check(shmoe_moe_receive_window(moe, NULL, &window_rows) == SHMOE_MOE_REFUSED,
        "a NULL window is refused", 0, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_receive_window: window is NULL") != NULL,
        "the refusal names window", 0, 0);
  check(shmoe_moe_receive_window(moe, &window, NULL) == SHMOE_MOE_REFUSED,
        "a NULL capacity_rows is refused", 0, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_receive_window: capacity_rows is NULL") != NULL,
        "the refusal names capacity_rows", 0, 0);

  /* The waits of the last call: one non-negative value per PE, nothing for this PE itself (its
   * own flags are raised before it waits); a wrong count is refused by name. */
  double waits[64];
  check(n <= 64 && shmoe_moe_last_source_waits(moe, waits, n) == SHMOE_MOE_OK,
        "shmoe_moe_last_source_waits", n, 0);
  for (int src = 0; src < n && src < 64; ++src)
    check(waits[src] >= 0 && (src != me || waits[src] < 1e6), "a wait", src, (int)waits[src]);
  check(shmoe_moe_last_source_waits(moe, waits, n + 1) == SHMOE_MOE_REFUSED,
        "n_pes = n + 1 is refused", n + 1, 0);
  check(strstr(shmoe_moe_last_error(), "shmoe_moe_last_source_waits: n_pes=") != NULL,
        "the refusal names n_pes", 0, 0);

  shmoe_moe_buffer_destroy(moe);
  free(expand_x);
  free(assist);
  if (failures == 0) printf("PE %d/%d: ok\n", me, n);
  shmem_finalize();
  return failures != 0;
}
