/* A 2-d shmoe_tensor_t over `data` (contiguous rows), for the C tests of shmoe/deep_ep.h and
 * shmoe/elastic.h. */
#ifndef SHMOE_TESTS_DEEP_EP_TENSOR2_H
#define SHMOE_TESTS_DEEP_EP_TENSOR2_H

#include <shmoe/tensor.h>
#include <stdint.h>

static inline shmoe_tensor_t tensor2(void* data, shmoe_dtype_t dtype, int64_t rows, int64_t cols) {
  shmoe_tensor_t t = {0};
  t.data = data;
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

#endif
