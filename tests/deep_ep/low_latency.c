/* shmoe/deep_ep.h's low-latency runtime from C, against an independent reference, on fresh random
 * input: PE 0 draws a seed, every PE draws every PE's tokens and routing from it, so it knows which
 * rows each of its local experts must receive (source rank, then token), their FP8 codes and
 * scales within E4M3's precision (UE8M0: the scales' exponent bytes), and what combine must return
 * (each token times the sum of its weights, identity experts). Then a bad argument: a topk_idx out
 * of range on PE 1 is refused on every PE, PE 1 naming it and the others naming PE 1, and the
 * buffer goes on working. */
#include <math.h>
#include <shmem.h>
#include <shmoe/deep_ep.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kHidden = 640, kTopk = 3, kLocal = 3, kMaxTokens = 8, kBlocks = kHidden / 128 };

static int failures = 0;
static void check(int ok, const char* what) {
  if (!ok && failures++ < 10) fprintf(stderr, "PE %d: %s\n", shmem_my_pe(), what);
}

static uint64_t next(uint64_t* s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static uint16_t bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float e4m3(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const float v = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return s ? -v : v;
}

typedef struct {
  int tokens;
  uint16_t x[kMaxTokens][kHidden];
  int64_t idx[kMaxTokens][kTopk];
  float w[kMaxTokens][kTopk];
} Input;

static void draw(uint64_t seed, int pe, int experts, Input* in) {
  uint64_t s = seed + 1000003ull * (uint64_t)pe;
  in->tokens = 1 + (int)(next(&s) % kMaxTokens);
  for (int t = 0; t < in->tokens; ++t) {
    for (int h = 0; h < kHidden; ++h) {
      in->x[t][h] = bf16((float)((int)(next(&s) % 2001) - 1000) / 250.0f);
    }
    for (int k = 0; k < kTopk; ++k) {
      int64_t e = -1;
      for (int again = 1; again;) { /* distinct experts, or -1 */
        e = (int64_t)(next(&s) % (uint64_t)(experts + 1)) - 1;
        again = 0;
        for (int j = 0; j < k && e >= 0; ++j) again |= in->idx[t][j] == e;
      }
      in->idx[t][k] = e;
      in->w[t][k] = (float)(next(&s) % 1000) / 1000.0f;
    }
  }
}

static int has(const Input* in, int t, int64_t e) {
  for (int k = 0; k < kTopk; ++k) {
    if (in->idx[t][k] == e) return 1;
  }
  return 0;
}

static shmoe_tensor_t tensor(void* data, shmoe_dtype_t dtype, int ndim, int64_t d0, int64_t d1) {
  shmoe_tensor_t t = {0};
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.strides[ndim - 1] = 1;
  if (ndim == 2) t.strides[0] = d1;
  return t;
}
static shmoe_tensor_t get(shmoe_ep_result_t r, const char* name) {
  shmoe_tensor_t t = {0};
  check(r != NULL && shmoe_ep_result_get(r, name, &t) == 1, name);
  return t;
}

/* The refusing PE's message names `what`, the others' the PE. */
static void expect_refused(int status, int refuser, const char* what) {
  char text[64];
  snprintf(text, sizeof text, "PE %d", refuser);
  check(status == SHMOE_MOE_REFUSED, "a bad argument was not refused");
  const char* got = shmoe_moe_last_error();
  if (strstr(got, shmem_my_pe() == refuser ? what : text) == NULL) {
    fprintf(stderr, "PE %d: refusal says: %s\n", shmem_my_pe(), got);
    check(0, "the refusal does not name the argument or the refusing PE");
  }
}

/* One dispatch (FP8 or BF16), checked row by row against every PE's drawn input. */
static shmoe_ep_result_t dispatch_checked(shmoe_low_latency_buffer_t b, const Input* all,
                                          int use_fp8, int ue8m0) {
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = kLocal * n;
  const int64_t slots = (int64_t)kMaxTokens * n;
  const Input* in = &all[me];
  int32_t stats[kLocal] = {0};
  shmoe_low_latency_dispatch_args_t a = SHMOE_STRUCT_INIT(shmoe_low_latency_dispatch_args_t);
  a.x = tensor((void*)in->x, SHMOE_DTYPE_BFLOAT16, 2, in->tokens, kHidden);
  a.topk_idx = tensor((void*)in->idx, SHMOE_DTYPE_INT64, 2, in->tokens, kTopk);
  a.num_max_dispatch_tokens_per_rank = kMaxTokens;
  a.num_experts = experts;
  a.cumulative_local_expert_recv_stats = tensor(stats, SHMOE_DTYPE_INT32, 1, kLocal, 0);
  a.use_fp8 = use_fp8;
  a.round_scale = ue8m0;
  a.use_ue8m0 = ue8m0;
  shmoe_ep_result_t r = NULL;
  check(shmoe_low_latency_dispatch(b, &a, &r) == SHMOE_MOE_OK, "dispatch");
  if (r == NULL) {
    fprintf(stderr, "PE %d: dispatch: %s\n", me, shmoe_moe_last_error());
    shmem_global_exit(1);
  }
  const uint8_t* rx = get(r, "recv_x").data;
  const int32_t* count = get(r, "recv_count").data;
  const int32_t* info = get(r, "src_info").data;
  const int64_t* range = get(r, "layout_range").data;
  const void* sc = use_fp8 ? get(r, "recv_x_scales").data : NULL;
  for (int e = 0; e < kLocal; ++e) {
    const int64_t global = me * kLocal + e;
    int64_t j = 0;
    for (int src = 0; src < n; ++src) {
      const int64_t begin = j;
      for (int t = 0; t < all[src].tokens; ++t) {
        if (!has(&all[src], t, global)) continue;
        const int64_t slot = e * slots + j++;
        check(j <= count[e], "fewer rows received than sent");
        if (j > count[e]) break;
        check(info[slot] == t, "src_info");
        float amax = 0.0f;
        for (int h = 0; h < kHidden; ++h) {
          const float want = from_bf16(all[src].x[t][h]);
          if (h % 128 == 0) {
            amax = 0.0f;
            for (int i = h; i < h + 128; ++i)
              amax = fmaxf(amax, fabsf(from_bf16(all[src].x[t][i])));
          }
          if (!use_fp8) {
            check(((const uint16_t*)rx)[slot * kHidden + h] == all[src].x[t][h], "recv_x");
            continue;
          }
          float scale = fmaxf(amax, 1e-4f) / 448.0f;
          if (ue8m0) {
            scale = ldexpf(1.0f, (int)ceilf(log2f(scale)));
            const uint8_t* bytes = (const uint8_t*)((const int32_t*)sc + slot * 2);
            check(bytes[h / 128] == (uint8_t)(127 + (int)log2f(scale)), "UE8M0 scale");
          } else {
            const float got = ((const float*)sc)[slot * kBlocks + h / 128];
            check(fabsf(got - scale) <= 1e-6f * scale, "recv_x_scales");
          }
          const float v = e4m3(rx[slot * kHidden + h]) * scale;
          check(fabsf(v - want) <= fabsf(want) / 16.0f + scale / 512.0f, "FP8 recv_x");
        }
      }
      check(range[e * n + src] == ((begin << 32) | (j - begin)), "layout_range");
    }
    check(j == count[e], "more rows received than sent");
    check(stats[e] == count[e], "cumulative_local_expert_recv_stats");
  }
  return r;
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes(), experts = kLocal * n;
  static uint64_t mine, seed;
  mine = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
  shmem_uint64_broadcast(SHMEM_TEAM_WORLD, &seed, &mine, 1, 0);
  if (me == 0) printf("seed %llu\n", (unsigned long long)seed);
  Input* all = malloc(sizeof(Input) * (size_t)n);
  for (int pe = 0; pe < n; ++pe) draw(seed, pe, experts, &all[pe]);
  const Input* in = &all[me];
  shmoe_low_latency_buffer_config_t config = SHMOE_STRUCT_INIT(shmoe_low_latency_buffer_config_t);
  shmoe_low_latency_buffer_t b = NULL;
  check(shmoe_low_latency_buffer_create(&config, &b) == SHMOE_MOE_OK, "create");

  shmoe_ep_result_release(dispatch_checked(b, all, 1, 0));
  shmoe_ep_result_release(dispatch_checked(b, all, 1, 1));
  shmoe_ep_result_t h = dispatch_checked(b, all, 0, 0);

  /* Combine with identity experts, from the zero-copy combine buffer. */
  shmoe_tensor_t cb;
  check(shmoe_low_latency_get_next_combine_buffer(b, h, &cb) == SHMOE_MOE_OK, "combine buffer");
  const shmoe_tensor_t rx = get(h, "recv_x");
  memcpy(cb.data, rx.data, (size_t)(rx.shape[0] * rx.shape[1] * rx.shape[2]) * 2);
  shmoe_low_latency_combine_args_t ca = SHMOE_STRUCT_INIT(shmoe_low_latency_combine_args_t);
  ca.topk_idx = tensor((void*)in->idx, SHMOE_DTYPE_INT64, 2, in->tokens, kTopk);
  ca.topk_weights = tensor((void*)in->w, SHMOE_DTYPE_FLOAT32, 2, in->tokens, kTopk);
  ca.handle = h;
  ca.zero_copy = 1;
  shmoe_ep_result_t c = NULL;
  check(shmoe_low_latency_combine(b, &ca, &c) == SHMOE_MOE_OK, "combine");
  const uint16_t* cx = c != NULL ? get(c, "combined_x").data : NULL;
  for (int t = 0; cx != NULL && t < in->tokens; ++t) {
    double sum = 0;
    for (int k = 0; k < kTopk; ++k) sum += in->idx[t][k] >= 0 ? in->w[t][k] : 0.0;
    for (int hh = 0; hh < kHidden; ++hh) {
      const double want = sum * from_bf16(in->x[t][hh]), got = from_bf16(cx[t * kHidden + hh]);
      check(fabs(got - want) <= fabs(want) / 128.0 + 1e-3, "combined_x");
    }
  }
  shmoe_ep_result_release(c);

  /* A topk_idx out of range on PE 1: refused on every PE, moving nothing. */
  Input bad = *in;
  if (me == 1) bad.idx[0][0] = experts;
  shmoe_low_latency_dispatch_args_t da = SHMOE_STRUCT_INIT(shmoe_low_latency_dispatch_args_t);
  da.x = tensor(bad.x, SHMOE_DTYPE_BFLOAT16, 2, bad.tokens, kHidden);
  da.topk_idx = tensor(bad.idx, SHMOE_DTYPE_INT64, 2, bad.tokens, kTopk);
  da.num_max_dispatch_tokens_per_rank = kMaxTokens;
  da.num_experts = experts;
  shmoe_ep_result_t refused = NULL;
  expect_refused(shmoe_low_latency_dispatch(b, &da, &refused), 1, "topk_idx[0][0]");
  check(refused == NULL, "a refused dispatch returned a result");
  /* The buffer goes on. */
  shmoe_ep_result_release(dispatch_checked(b, all, 1, 0));
  check(shmoe_low_latency_clean(b, kMaxTokens, kHidden, experts, NULL) == SHMOE_MOE_OK, "clean");
  shmoe_ep_result_release(h);
  check(shmoe_low_latency_buffer_destroy(b) == SHMOE_MOE_OK, "destroy");
  free(all);
  printf("PE %d/%d: %s\n", me, n, failures ? "FAILED" : "ok");
  shmem_finalize();
  return failures ? 1 : 0;
}
