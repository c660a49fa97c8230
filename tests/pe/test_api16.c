/* OpenSHMEM 1.6 additions as a C11 program sees them (-std=c11 -pedantic -Werror), those built so
 * far: shmem_signal_add/shmem_signal_set and their ctx forms (atomic with put-with-signal's ADD
 * and with signal_fetch/signal_wait_until), shmem_team_ptr, shmem_team_get_config with a mask of
 * 0, shmem_pe_quiet/shmem_ctx_pe_quiet, context sessions (hints) and shmem_query_initialized
 * before, during and after the job. Values encode the PE that sent them. Exits non-zero on a wrong result. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>

#include "c_check.h"

static int me, npes, next, prev;

/* Each PE adds to the right neighbour's signal by every route (signal_add, its ctx form, and
 * put-with-signal's ADD), then sets another signal there; the neighbour sees exactly the sum
 * and the value set, and a waiter sees a set arrive. */
static void signal_add_and_set(void) {
  uint64_t* sig = shmem_calloc(3, sizeof(uint64_t));
  long* data = shmem_calloc(1, sizeof(long));
  const uint64_t unit = (uint64_t)me + 1;
  const uint64_t from_prev = (uint64_t)prev + 1;
  shmem_barrier_all();
  for (int i = 0; i < 5; ++i) shmem_signal_add(&sig[0], unit, next);
  shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, &sig[0], 10 * unit, next);
  const long payload = 1000 + me;
  shmem_long_put_signal(data, &payload, 1, &sig[0], 100 * unit, SHMEM_SIGNAL_ADD, next);
  shmem_signal_set(&sig[1], 7, next);
  shmem_fence(); /* orders the two sets to the same PE */
  shmem_ctx_signal_set(SHMEM_CTX_DEFAULT, &sig[1], 500 + (uint64_t)me, next); /* the last wins */
  shmem_quiet();
  shmem_barrier_all();
  CHECK(shmem_signal_fetch(&sig[0]) == 115 * from_prev);
  CHECK(sig[1] == 500 + (uint64_t)prev);
  CHECK(*data == 1000 + prev);
  shmem_barrier_all();
  /* No barrier between: the set must arrive by itself. */
  shmem_signal_set(&sig[2], 900 + (uint64_t)me, next);
  shmem_quiet();
  CHECK(shmem_signal_wait_until(&sig[2], SHMEM_CMP_EQ, 900 + (uint64_t)prev) ==
        900 + (uint64_t)prev);
  shmem_barrier_all();
  shmem_free(data);
  shmem_free(sig);
}

/* shmem_team_ptr over the world and over the team of even PEs: NULL or a pointer through which
 * the PE's own value reads back; this PE's own object at its own address; NULL outside the team
 * or for an invalid team. */
static void team_ptr(void) {
  long* x = shmem_malloc(sizeof(long));
  *x = 5000 + me;
  shmem_barrier_all();
  for (int pe = 0; pe < npes; ++pe) {
    const long* p = shmem_team_ptr(SHMEM_TEAM_WORLD, x, pe);
    if (pe == me) CHECK(p == x);
    if (p != NULL) CHECK(*p == 5000 + pe);
    CHECK(p == shmem_ptr(x, pe));
  }
  CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, x, npes) == NULL);
  CHECK(shmem_team_ptr(SHMEM_TEAM_WORLD, x, -1) == NULL);
  CHECK(shmem_team_ptr(SHMEM_TEAM_INVALID, x, 0) == NULL);
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &evens);
  if (evens != SHMEM_TEAM_INVALID) {
    const int size = shmem_team_n_pes(evens);
    for (int t = 0; t < size; ++t) {
      const long* p = shmem_team_ptr(evens, x, t);
      if (2 * t == me) CHECK(p == x);
      if (p != NULL) CHECK(*p == 5000 + 2 * t);
    }
    CHECK(shmem_team_ptr(evens, x, size) == NULL);
    shmem_team_destroy(evens);
  } else {
    CHECK(me % 2 == 1);
  }
  shmem_barrier_all();
  shmem_free(x);
}

/* shmem_pe_quiet completes non-blocking puts to the named PE: after it, a signal set tells the
 * neighbour that the data is there. Then the same on a context of the team of even PEs, whose PE
 * numbers are the team's. */
static void pe_quiet(void) {
  long* data = shmem_calloc(64, sizeof(long));
  uint64_t* sig = shmem_calloc(2, sizeof(uint64_t));
  long src[64];
  for (int i = 0; i < 64; ++i) src[i] = 100000 * me + i;
  shmem_barrier_all();
  shmem_long_put_nbi(data, src, 64, next);
  const int target[1] = {next};
  shmem_pe_quiet(target, 1);
  shmem_pe_quiet(NULL, 0); /* nothing to complete */
  shmem_signal_set(&sig[0], 1, next);
  shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 1);
  for (int i = 0; i < 64; ++i) CHECK(data[i] == 100000 * prev + i);
  shmem_barrier_all();
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &evens);
  if (evens != SHMEM_TEAM_INVALID) {
    shmem_ctx_t ctx;
    CHECK(shmem_team_create_ctx(evens, 0, &ctx) == 0);
    const int size = shmem_team_n_pes(evens), mine = shmem_team_my_pe(evens);
    const int team_next = (mine + 1) % size;
    shmem_ctx_long_put_nbi(ctx, data, src, 64, team_next);
    shmem_ctx_pe_quiet(ctx, &team_next, 1);
    shmem_ctx_signal_set(ctx, &sig[1], 1, team_next);
    shmem_ctx_quiet(ctx);
    shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, 1);
    const int team_prev = (mine + size - 1) % size;
    for (int i = 0; i < 64; ++i) CHECK(data[i] == 100000 * (2 * team_prev) + i);
    shmem_ctx_destroy(ctx);
    shmem_team_destroy(evens);
  }
  shmem_barrier_all();
  shmem_free(sig);
  shmem_free(data);
}

/* A batch session on a context with a total_ops hint: the puts and AMOs inside it give the same
 * results as without one; the hints never change completion (quiet after stop completes them). */
static void session(void) {
  uint64_t* table = shmem_calloc(16, sizeof(uint64_t));
  shmem_ctx_t ctx;
  CHECK(shmem_ctx_create(0, &ctx) == 0);
  const shmem_ctx_session_config_t config = {.total_ops = 64};
  shmem_barrier_all();
  shmem_ctx_session_start(ctx, SHMEM_CTX_SESSION_BATCH, &config, SHMEM_CTX_SESSION_TOTAL_OPS);
  for (int i = 0; i < 16; ++i) {
    shmem_ctx_uint64_atomic_add(ctx, &table[i], (uint64_t)(me + 1), next);
    shmem_ctx_uint64_atomic_add(ctx, &table[i], (uint64_t)i, next);
  }
  shmem_ctx_session_stop(ctx);
  shmem_ctx_session_start(ctx, 0, NULL, 0); /* default hints */
  shmem_ctx_session_stop(ctx);
  shmem_ctx_session_start(SHMEM_CTX_INVALID, SHMEM_CTX_SESSION_BATCH, NULL, 0); /* no effect */
  shmem_ctx_quiet(ctx);
  shmem_barrier_all();
  for (int i = 0; i < 16; ++i) CHECK(table[i] == (uint64_t)(prev + 1 + i));
  shmem_ctx_destroy(ctx);
  shmem_barrier_all();
  shmem_free(table);
}

/* Errata of 1.6: a mask of 0 reads nothing and succeeds, config or not. */
static void team_config_mask_zero(void) {
  CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, NULL) == 0);
  shmem_team_config_t config = {-5};
  CHECK(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, &config) == 0);
  CHECK(config.num_contexts == -5);
}

int main(void) {
  int initialized = -1;
  shmem_query_initialized(&initialized); /* callable before shmem_init */
  const int before = initialized;
  shmem_init();
  shmem_query_initialized(&initialized);
  CHECK(before == 0);
  CHECK(initialized != 0);
  me = shmem_my_pe();
  npes = shmem_n_pes();
  next = (me + 1) % npes;
  prev = (me + npes - 1) % npes;
  signal_add_and_set();
  team_ptr();
  team_config_mask_zero();
  pe_quiet();
  session();
  shmem_finalize();
  shmem_query_initialized(&initialized); /* and after shmem_finalize */
  CHECK(initialized == 0);
  if (failures == 0) printf("PE %d: all checks passed\n", me);
  return failures != 0;
}
