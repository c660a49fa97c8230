/* OpenSHMEM calls used wrongly, one per mode (api_misuse MODE): each must end in a clear error
 * naming the call and the value, or in the specification's error value with a warning that says
 * why, never in a crash or a hang. api_misuse.sh checks the messages and statuses. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

long lock; /* the usual global lock */

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* word = shmem_calloc(4, sizeof(long));
  if (strcmp(mode, "null_source") == 0) {
    shmem_long_put(word, NULL, 4, (me + 1) % n);
  } else if (strcmp(mode, "null_dest_get") == 0) {
    shmem_long_get(NULL, word, 2, 0);
  } else if (strcmp(mode, "garbage_team") == 0) {
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status = shmem_team_split_strided((shmem_team_t)(uintptr_t)0x1234, 0, 1, 1, NULL, 0, &team);
    printf("PE %d: split=%d invalid=%d n_pes=%d\n", me, status, team == SHMEM_TEAM_INVALID,
           shmem_team_n_pes((shmem_team_t)(uintptr_t)0x5678));
  } else if (strcmp(mode, "split_mismatch") == 0) {
    /* PE 0 asks for every second PE, the others for the first two. */
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status = me == 0 ? shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, 2, NULL, 0, &team)
                         : shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, 2, NULL, 0, &team);
    printf("PE %d: split=%d invalid=%d\n", me, status, team == SHMEM_TEAM_INVALID);
  } else if (strcmp(mode, "bad_split") == 0) {
    /* Only the last PE passes a start outside the parent: every PE must return, none may hang. */
    shmem_team_t team = SHMEM_TEAM_INVALID;
    int status =
        shmem_team_split_strided(SHMEM_TEAM_WORLD, me == n - 1 ? n + 2 : 0, 1, 1, NULL, 0, &team);
    printf("PE %d: split=%d invalid=%d\n", me, status, team == SHMEM_TEAM_INVALID);
    /* The job goes on: a valid split afterwards works everywhere. */
    status = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &team);
    printf("PE %d: then split=%d size=%d\n", me, status, shmem_team_n_pes(team));
  } else if (strcmp(mode, "calloc_overflow") == 0) {
    void* p = shmem_calloc(SIZE_MAX / 2, 4);
    printf("PE %d: calloc=%s\n", me, p == NULL ? "NULL" : "not NULL");
  } else if (strcmp(mode, "pe_quiet_huge") == 0) { /* a count no array can have */
    const int target[1] = {(me + 1) % n};
    shmem_pe_quiet(target, SIZE_MAX);
  } else if (strcmp(mode, "put_count_wraps") == 0) { /* 2^61 + 1 longs: 8 bytes once wrapped */
    const long src[1] = {0};
    shmem_long_put(word, src, ((size_t)1 << 61) + 1, (me + 1) % n);
  } else if (strcmp(mode, "ibget_span_wraps") == 0) {
    long dst[2];
    shmem_long_ibget(dst, word, 1, (ptrdiff_t)1 << 60, 1, 64, (me + 1) % n);
  } else if (strcmp(mode, "realloc_freed") == 0) { /* NULL and a message, as shmem_align */
    long* p = shmem_malloc(64);
    shmem_free(p);
    void* q = shmem_realloc(p, 128);
    printf("PE %d: realloc=%s\n", me, q == NULL ? "NULL" : "not NULL");
  } else if (strcmp(mode, "clear_unheld") == 0) {
    shmem_clear_lock(&lock);
  } else if (strcmp(mode, "set_twice") == 0) {
    if (me == 0) {
      shmem_set_lock(&lock);
      shmem_set_lock(&lock);
    }
  } else if (strcmp(mode, "clear_by_other") == 0) {
    if (me == 0) shmem_set_lock(&lock);
    shmem_barrier_all();
    if (me == 1) shmem_clear_lock(&lock);
  } else if (strcmp(mode, "wait_null") == 0) {
    shmem_long_wait_until(NULL, SHMEM_CMP_EQ, 0);
  } else if (strcmp(mode, "test_all_null") == 0) {
    printf("PE %d: test_all=%d\n", me, shmem_long_test_all(NULL, 3, NULL, SHMEM_CMP_EQ, 0));
  } else if (strcmp(mode, "garbage_ctx") == 0) {
    shmem_ctx_long_p((shmem_ctx_t)(uintptr_t)0xdeadbeef0, word, 1, 0);
  } else if (strcmp(mode, "ctx_after_destroy") == 0) {
    shmem_ctx_t ctx;
    if (shmem_ctx_create(0, &ctx) != 0) return 3;
    shmem_ctx_long_p(ctx, word, 1, 0);
    shmem_ctx_destroy(ctx);
    shmem_ctx_quiet(ctx);
  } else if (strcmp(mode, "ctx_destroy_twice") == 0) {
    shmem_ctx_t ctx;
    if (shmem_ctx_create(0, &ctx) != 0) return 3;
    shmem_ctx_destroy(ctx);
    shmem_ctx_destroy(ctx);
  } else if (strcmp(mode, "destroy_default_ctx") == 0) {
    shmem_ctx_destroy(SHMEM_CTX_DEFAULT);
  } else if (strcmp(mode, "ctx_ok") == 0) { /* contexts used rightly still work */
    shmem_ctx_t ctx;
    if (shmem_ctx_create(0, &ctx) != 0) return 3;
    shmem_ctx_long_atomic_add(ctx, word, me + 1, 0);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    shmem_ctx_destroy(SHMEM_CTX_INVALID); /* no effect, as the specification says */
    shmem_barrier_all();
    if (me == 0) printf("PE 0: sum=%ld want=%d\n", *word, n * (n + 1) / 2);
  } else if (strcmp(mode, "reduce_past_heap") == 0) {
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, word, word + 2, (size_t)1 << 60);
  } else if (strcmp(mode, "reduce_to_stack") == 0) {
    long mine[2] = {me, me};
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, mine, word, 2);
  } else if (strcmp(mode, "fcollect_overflow") == 0) {
    shmem_long_fcollect(SHMEM_TEAM_WORLD, word, word, SIZE_MAX / 4);
  } else if (strcmp(mode, "fcollect_counts_differ") == 0) { /* under SHMOE_DEBUG=1 */
    long* dest = shmem_calloc(2 * (size_t)n, sizeof(long));
    shmem_long_fcollect(SHMEM_TEAM_WORLD, dest, word, me == n - 1 ? 2 : 1);
  } else if (strcmp(mode, "iput_past_allocation") == 0) { /* under SHMOE_DEBUG=1 */
    long* next = shmem_calloc(4, sizeof(long)); /* the neighbour the stride would write into */
    long src[4] = {1, 2, 3, 4};
    shmem_long_iput(word, src, 2, 1, 4, (me + 1) % n); /* elements 0, 2, 4, 6 of a 4-long array */
    printf("PE %d: neighbour %ld\n", me, next[0]);
  } else if (strcmp(mode, "ibput_short_stride") == 0) { /* 1.6: strides are at least bsize */
    const long src[6] = {0};
    shmem_long_ibput(word, src, 2, 3, 3, 1, (me + 1) % n);
  } else if (strcmp(mode, "scan_partial_overlap") == 0) { /* 1.6: in place or disjoint */
    shmem_long_sum_inscan(SHMEM_TEAM_WORLD, word + 1, word, 2);
  } else if (strcmp(mode, "debug_ok") == 0) { /* under SHMOE_DEBUG=1: right use passes */
    long* dest = shmem_calloc((size_t)n, sizeof(long));
    shmem_long_iput(word, word, 2, 2, 2, (me + 1) % n);
    shmem_long_fcollect(SHMEM_TEAM_WORLD, dest, word, 1);
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, word + 1, word, 1);
    printf("PE %d: debug ok\n", me);
  } else if (strcmp(mode, "lock_ok") == 0) { /* the correct use still works */
    for (int i = 0; i < 10; ++i) {
      shmem_set_lock(&lock);
      shmem_long_atomic_inc(word, 0);
      shmem_clear_lock(&lock);
    }
    while (shmem_test_lock(&lock) != 0) {
    }
    shmem_clear_lock(&lock);
    shmem_barrier_all();
    if (me == 0) printf("PE 0: count=%ld want=%d\n", *word, 10 * n);
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
