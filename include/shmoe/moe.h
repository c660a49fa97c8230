/* shmoe MoE operators: plain C entry points (for C programs and language bindings).
 * Every call is collective over all PEs. Functions return 0 (or a row count) on success and -1
 * on a refused call; shmoe_moe_last_error() then says why (the same text on every PE).
 */
#ifndef SHMOE_MOE_H
#define SHMOE_MOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmoe_moe* shmoe_moe_t;

typedef enum {
  SHMOE_DTYPE_INT32 = 0,
  SHMOE_DTYPE_FLOAT16 = 1,
  SHMOE_DTYPE_BFLOAT16 = 2,
  SHMOE_DTYPE_FLOAT32 = 3
} shmoe_dtype_t;

typedef enum { SHMOE_PLANE_CLASSIC = 0, SHMOE_PLANE_DOUBLE = 1 } shmoe_plane_t;

typedef struct {
  int experts_per_pe;
  int max_bs;
  int hidden;
  int topk;
  shmoe_dtype_t dtype;
  size_t max_recv_rows;         /* 0: n_pes * max_bs * topk */
  int matrix_workers;           /* 0 and 0: the cores this PE can fairly use */
  int vector_workers;
  size_t doubleplane_threshold; /* 0: 2 MiB */
} shmoe_moe_config_t;

int shmoe_moe_create(const shmoe_moe_config_t* config, shmoe_moe_t* moe);
void shmoe_moe_destroy(shmoe_moe_t moe);
size_t shmoe_moe_recv_capacity(shmoe_moe_t moe);
const char* shmoe_moe_last_error(void);

/* Returns the number of rows received, or -1. */
int shmoe_dispatch(shmoe_moe_t moe, shmoe_plane_t plane, const void* x, const int32_t* expert_ids,
                   const float* expert_scales, int bs, void* expand_x, int32_t* assist_info,
                   int32_t* ep_recv_count, int32_t* expert_token_nums, float* expand_scales);

int shmoe_combine(shmoe_moe_t moe, shmoe_plane_t plane, const void* expand_x,
                  const int32_t* assist_info, const int32_t* ep_recv_count,
                  const int32_t* expert_ids, const float* expert_scales, int bs, void* x_out);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_MOE_H */
