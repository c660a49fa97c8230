/* shmoe_elastic_buffer_heap_size names the symmetric heap one ElasticBuffer needs: started with
 * exactly that heap (SHMEM_SYMMETRIC_SIZE, set before shmem_init) and SHMOE_DEEP_EP_RECV_BLOCKS
 * receive blocks, as many dispatches held at once each return recv_x in a block, none copied;
 * started with one block's bytes less ("short"), at least one is copied. The blocks (128 MiB) are
 * larger than the query's margin for headers, so a heap size that left a block out fails the first
 * run, and one far too large fails the second. Few tokens travel: a block is taken per dispatch
 * whatever its rows. */
#include <inttypes.h>
#include <shmem.h>
#include <shmoe/elastic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor2.h"

enum { kTokens = 4096, kHidden = 8192, kSent = 3 };

static int failures = 0;
static void check(int ok, const char* what) {
  if (!ok && failures++ < 10) fprintf(stderr, "PE %d: FAILED %s\n", shmem_my_pe(), what);
}

int main(int argc, char** argv) {
  const int short_heap = argc > 1 && strcmp(argv[1], "short") == 0;
  const char* ranks_text = getenv("SHMOE_TEST_RANKS");
  const char* blocks_text = getenv("SHMOE_DEEP_EP_RECV_BLOCKS");
  if (ranks_text == NULL || blocks_text == NULL) {
    fprintf(stderr, "FAILED: set SHMOE_TEST_RANKS and SHMOE_DEEP_EP_RECV_BLOCKS\n");
    return 1;
  }
  const int ranks = atoi(ranks_text), blocks = atoi(blocks_text);
  shmoe_elastic_buffer_config_t config = SHMOE_STRUCT_INIT(shmoe_elastic_buffer_config_t);
  config.num_max_tokens_per_rank = kTokens;
  config.hidden = kHidden;
  config.num_topk = 1;
  uint64_t heap = 0;
  if (shmoe_elastic_buffer_heap_size(&config, ranks, &heap) != SHMOE_MOE_OK) {
    fprintf(stderr, "FAILED: shmoe_elastic_buffer_heap_size\n");
    return 1;
  }
  const uint64_t block = (uint64_t)ranks * kTokens * kHidden * 2;
  char size[32];
  snprintf(size, sizeof size, "%" PRIu64, short_heap ? heap - block : heap);
  setenv("SHMEM_SYMMETRIC_SIZE", size, 1);

  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  check(n == ranks, "SHMOE_TEST_RANKS is the PE count");
  shmoe_elastic_buffer_t buffer = NULL;
  check(shmoe_elastic_buffer_create(&config, &buffer) == SHMOE_MOE_OK, "create");

  uint16_t* x = calloc((size_t)kSent * kHidden, sizeof(uint16_t));
  int64_t idx[kSent];
  for (int t = 0; t < kSent; ++t) idx[t] = (me + t) % n; /* one local expert per rank */
  shmoe_ep_result_t held[16] = {0};
  for (int i = 0; i < blocks && i < 16; ++i) {
    shmoe_elastic_dispatch_args_t args = SHMOE_STRUCT_INIT(shmoe_elastic_dispatch_args_t);
    args.x = tensor2(x, SHMOE_DTYPE_BFLOAT16, kSent, kHidden);
    args.topk_idx = tensor2(idx, SHMOE_DTYPE_INT64, kSent, 1);
    args.num_experts = n;
    args.do_cpu_sync = 1;
    check(shmoe_elastic_dispatch(buffer, &args, &held[i]) == SHMOE_MOE_OK, "dispatch");
  }
  int64_t in_blocks = -1, copied = -1;
  check(shmoe_elastic_buffer_result_counts(buffer, &in_blocks, &copied) == SHMOE_MOE_OK, "counts");
  if (short_heap) {
    check(copied >= 1 && in_blocks < blocks, "a heap one block short copies a dispatch's recv_x");
  } else {
    check(in_blocks == blocks && copied == 0, "the heap it names holds every receive block");
  }
  for (int i = 0; i < blocks && i < 16; ++i) shmoe_ep_result_release(held[i]);
  check(shmoe_elastic_buffer_destroy(buffer) == SHMOE_MOE_OK, "destroy");
  free(x);
  printf("PE %d/%d: heap %s bytes, %" PRId64 " results in blocks, %" PRId64 " copied: %s\n", me, n,
         size, in_blocks, copied, failures == 0 ? "ok" : "FAILED");
  shmem_finalize();
  return failures == 0 ? 0 : 1;
}
