/* A caller built against an older or a newer shmoe/moe.h (the extensible structs' contract,
 * "Extensible structs" there): structs that end where their first version ended work, with the
 * later fields at their defaults; a newer caller's zeroed extra fields are accepted and set ones
 * refused, naming the sizes; a struct_size below the first version is refused. Each old struct
 * is allocated at exactly its size, so a library that read past it would be caught by
 * AddressSanitizer (the asan stage of CI runs this test). Inputs are fresh random per run; each
 * PE checks its combined rows against its own reference (identity experts: a token's result is
 * the sum of its weights times its row, exact in fp32 for rows of k / 8 and weights 2^-j). */
#include <shmem.h>
#include <shmoe/moe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kExperts = 2, kMaxTokens = 9, kHidden = 24, kTopk = 2 };

/* The first versions of the structs, as an older header declared them. */
typedef struct {
  size_t struct_size;
  int num_experts_per_pe, max_tokens_per_pe, hidden, num_topk;
  shmoe_dtype_t dtype;
  size_t max_recv_rows;
  int matrix_workers, vector_workers;
  size_t double_plane_threshold;
} config_v1_t;
typedef struct {
  size_t struct_size;
  shmoe_plane_t plane;
  const void* x;
  const int32_t* topk_idx;
  const float* topk_weights;
  int num_tokens;
} dispatch_args_v1_t;
typedef struct {
  size_t struct_size;
  void* recv_x;
  int32_t *recv_src_info, *recv_layout_prefix, *num_recv_tokens_per_expert;
  float* recv_weights;
} dispatch_outputs_v1_t;
typedef struct {
  size_t struct_size;
  shmoe_plane_t plane;
  const void* x;
  const int32_t *src_info, *layout_prefix, *topk_idx;
  const float* topk_weights;
  int num_tokens;
  void* combined_x;
} combine_args_v1_t;

/* A newer header's config: one field more. */
typedef struct {
  shmoe_moe_config_t now;
  int64_t future_field;
} config_next_t;

static int failures = 0;
static void check(int ok, const char* what) {
  if (!ok && failures++ < 10) fprintf(stderr, "PE %d: %s\n", shmem_my_pe(), what);
}

static void* exactly(size_t bytes) {
  void* p = calloc(1, bytes);
  if (p == NULL) shmem_global_exit(2);
  return p;
}

static void old_caller_round_trip(void) {
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = n * kExperts;
  config_v1_t* config = exactly(sizeof *config);
  config->struct_size = sizeof *config;
  config->num_experts_per_pe = kExperts;
  config->max_tokens_per_pe = kMaxTokens;
  config->hidden = kHidden;
  config->num_topk = kTopk;
  config->dtype = SHMOE_DTYPE_FLOAT32;
  shmoe_moe_buffer_t buffer = NULL;
  if (shmoe_moe_buffer_create((const shmoe_moe_config_t*)config, &buffer) != SHMOE_MOE_OK) {
    fprintf(stderr, "PE %d: an old config: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  const size_t cap = shmoe_moe_recv_capacity(buffer);
  check(cap == (size_t)n * kMaxTokens * kTopk, "the default receive capacity");

  const int tokens = 1 + rand() % kMaxTokens;
  float x[kMaxTokens * kHidden], weights[kMaxTokens * kTopk], out[kMaxTokens * kHidden];
  int32_t idx[kMaxTokens * kTopk];
  for (int i = 0; i < tokens * kHidden; ++i) x[i] = (float)(rand() % 255 - 127) / 8;
  for (int t = 0; t < tokens; ++t) {
    const int first = rand() % experts;
    idx[t * kTopk] = first;
    idx[t * kTopk + 1] = rand() % 4 == 0 ? -1 : (first + 1 + rand() % (experts - 1)) % experts;
    for (int k = 0; k < kTopk; ++k) weights[t * kTopk + k] = 1.0f / (float)(1 << (rand() % 3));
  }
  float* recv_x = exactly(cap * kHidden * sizeof(float));
  int32_t* src_info = exactly(cap * 3 * sizeof(int32_t));
  int32_t* prefix = exactly((size_t)experts * sizeof(int32_t));
  int32_t nums[kExperts];

  dispatch_args_v1_t* args = exactly(sizeof *args);
  args->struct_size = sizeof *args;
  args->x = x;
  args->topk_idx = idx;
  args->topk_weights = weights;
  args->num_tokens = tokens;
  dispatch_outputs_v1_t* outs = exactly(sizeof *outs);
  outs->struct_size = sizeof *outs;
  outs->recv_x = recv_x;
  outs->recv_src_info = src_info;
  outs->recv_layout_prefix = prefix;
  outs->num_recv_tokens_per_expert = nums;
  const int rows = shmoe_moe_dispatch(buffer, (const shmoe_dispatch_args_t*)args,
                                      (const shmoe_dispatch_outputs_t*)outs);
  if (rows < 0) {
    fprintf(stderr, "PE %d: an old dispatch: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  check(rows == prefix[experts - 1], "the rows received are the last prefix");

  combine_args_v1_t* combine = exactly(sizeof *combine);
  combine->struct_size = sizeof *combine;
  combine->x = recv_x; /* identity experts */
  combine->src_info = src_info;
  combine->layout_prefix = prefix;
  combine->topk_idx = idx;
  combine->topk_weights = weights;
  combine->num_tokens = tokens;
  combine->combined_x = out;
  if (shmoe_moe_combine(buffer, (const shmoe_combine_args_t*)combine) != SHMOE_MOE_OK) {
    fprintf(stderr, "PE %d: an old combine: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  for (int t = 0; t < tokens; ++t) {
    for (int c = 0; c < kHidden; ++c) {
      float want = 0;
      for (int k = 0; k < kTopk; ++k)
        if (idx[t * kTopk + k] >= 0) want += weights[t * kTopk + k] * x[t * kHidden + c];
      check(out[t * kHidden + c] == want, "a combined value");
    }
  }
  shmoe_moe_buffer_destroy(buffer);
  free(config);
  free(args);
  free(outs);
  free(combine);
  free(recv_x);
  free(src_info);
  free(prefix);
}

static void newer_and_broken_callers(void) {
  config_next_t next;
  memset(&next, 0, sizeof next);
  next.now.struct_size = sizeof next;
  next.now.num_experts_per_pe = kExperts;
  next.now.max_tokens_per_pe = kMaxTokens;
  next.now.hidden = kHidden;
  next.now.num_topk = kTopk;
  next.now.dtype = SHMOE_DTYPE_FLOAT32;
  shmoe_moe_buffer_t buffer = NULL;
  check(shmoe_moe_buffer_create(&next.now, &buffer) == SHMOE_MOE_OK,
        "a newer caller's zeroed extra field is accepted");
  if (buffer != NULL) shmoe_moe_buffer_destroy(buffer);

  next.future_field = 1;
  buffer = NULL;
  check(shmoe_moe_buffer_create(&next.now, &buffer) == SHMOE_MOE_REFUSED && buffer == NULL,
        "a newer caller's set extra field is refused");
  char want[160];
  snprintf(want, sizeof want, "config->struct_size=%zu is more than this library's %zu bytes",
           sizeof next, sizeof(shmoe_moe_config_t));
  check(strstr(shmoe_moe_last_error(), want) != NULL, "the refusal names both sizes");

  next.now.struct_size = 8;
  check(shmoe_moe_buffer_create(&next.now, &buffer) == SHMOE_MOE_REFUSED,
        "a struct_size below the first version is refused");
  check(strstr(shmoe_moe_last_error(),
               "config->struct_size=8 is less than the struct's first "
               "version") != NULL,
        "the refusal names struct_size");
}

int main(void) {
  shmem_init();
  srand((unsigned)time(NULL) * 7919u + (unsigned)shmem_my_pe());
  old_caller_round_trip();
  newer_and_broken_callers();
  if (failures == 0) printf("PE %d/%d: ok\n", shmem_my_pe(), shmem_n_pes());
  shmem_finalize();
  return failures != 0;
}
