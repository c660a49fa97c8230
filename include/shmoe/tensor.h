/* The arrays of shmoe's DeepEP runtimes (shmoe/elastic.h): a caller's tensor as the runtime
 * reads it, and a call's results as named arrays the runtime owns. */
#ifndef SHMOE_TENSOR_H
#define SHMOE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "shmoe/export.h"
#include "shmoe/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An array: `ndim` (0..4) extents and strides in elements. A caller's tensor must be
 * C-contiguous (strides are then ignored) and `data` NULL means "not given". Results may be
 * strided (recv_sf with use_tma_aligned_col_major_sf is column-major). */
#define SHMOE_TENSOR_MAX_DIMS 4
typedef struct {
  void* data;
  shmoe_dtype_t dtype;
  int ndim;
  int64_t shape[SHMOE_TENSOR_MAX_DIMS];
  int64_t strides[SHMOE_TENSOR_MAX_DIMS];
} shmoe_tensor_t;

/* A call's results, by name (see each call), reference counted. */
typedef struct shmoe_ep_result* shmoe_ep_result_t;
/* The array `name` of `result` into *out: 1 if the result holds it, 0 if not (*out zeroed). */
SHMOE_API int shmoe_ep_result_get(shmoe_ep_result_t result, const char* name, shmoe_tensor_t* out);
/* The i-th name of `result` (0-based), or NULL past the last. */
SHMOE_API const char* shmoe_ep_result_name(shmoe_ep_result_t result, int i);
SHMOE_API void shmoe_ep_result_retain(shmoe_ep_result_t result);
SHMOE_API void shmoe_ep_result_release(shmoe_ep_result_t result);

#ifdef __cplusplus
}
#endif

#endif /* SHMOE_TENSOR_H */
