/* A plain C11 program against shmem.h: it must compile warning-free with -std=c11 -pedantic
 * (the type-generic names are _Generic selections there), take the address of the new routines
 * (so each exists as a real symbol), and get the right answers through the generic names. Exits
 * non-zero on a wrong result. */
#include <shmem.h>
#include <stdio.h>

typedef void (*any_fn)(void);

#include "c_check.h"

/* Referenced through a volatile table so the linker must resolve every one. */
static any_fn volatile table[] = {
    (any_fn)shmem_team_my_pe,
    (any_fn)shmem_team_n_pes,
    (any_fn)shmem_team_get_config,
    (any_fn)shmem_team_translate_pe,
    (any_fn)shmem_team_split_strided,
    (any_fn)shmem_team_split_2d,
    (any_fn)shmem_team_destroy,
    (any_fn)shmem_team_create_ctx,
    (any_fn)shmem_ctx_get_team,
    (any_fn)shmem_team_sync,
    (any_fn)shmem_int_broadcast,
    (any_fn)shmem_broadcastmem,
    (any_fn)shmem_double_collect,
    (any_fn)shmem_collectmem,
    (any_fn)shmem_size_fcollect,
    (any_fn)shmem_fcollectmem,
    (any_fn)shmem_long_alltoall,
    (any_fn)shmem_alltoallmem,
    (any_fn)shmem_float_alltoalls,
    (any_fn)shmem_alltoallsmem,
    (any_fn)shmem_uchar_and_reduce,
    (any_fn)shmem_size_xor_reduce,
    (any_fn)shmem_char_max_reduce,
    (any_fn)shmem_longdouble_min_reduce,
    (any_fn)shmem_complexd_sum_reduce,
    (any_fn)shmem_complexf_prod_reduce,
    (any_fn)shmem_barrier,
    (any_fn)shmem_sync,
    (any_fn)shmem_broadcast32,
    (any_fn)shmem_broadcast64,
    (any_fn)shmem_collect32,
    (any_fn)shmem_fcollect64,
    (any_fn)shmem_alltoall32,
    (any_fn)shmem_alltoalls64,
    (any_fn)shmem_short_and_to_all,
    (any_fn)shmem_longdouble_max_to_all,
    (any_fn)shmem_complexf_sum_to_all,
    (any_fn)shmem_longlong_prod_to_all,
    (any_fn)shmem_set_lock,
    (any_fn)shmem_test_lock,
    (any_fn)shmem_clear_lock,
    (any_fn)start_pes,
    (any_fn)_my_pe,
    (any_fn)_num_pes,
    (any_fn)shmalloc,
    (any_fn)shfree,
    (any_fn)shrealloc,
    (any_fn)shmemalign,
    (any_fn)shmem_int_cswap,
    (any_fn)shmem_long_fadd,
    (any_fn)shmem_longlong_finc,
    (any_fn)shmem_int_add,
    (any_fn)shmem_long_inc,
    (any_fn)shmem_double_swap,
    (any_fn)shmem_float_fetch,
    (any_fn)shmem_int_set,
    (any_fn)shmem_short_wait,
    (any_fn)shmem_wait,
    (any_fn)shmem_short_wait_until,
    (any_fn)shmem_swap,
    (any_fn)shmem_clear_cache_inv,
    (any_fn)shmem_set_cache_inv,
    (any_fn)shmem_clear_cache_line_inv,
    (any_fn)shmem_set_cache_line_inv,
    (any_fn)shmem_udcflush,
    (any_fn)shmem_udcflush_line,
};

int main(void) {
  start_pes(0);
  const int me = _my_pe(), n = _num_pes();
  CHECK(table[0] != 0);
  long* x = shmalloc(4 * sizeof(long));
  double* d = shmalloc(sizeof(double) * (size_t)n);
  unsigned* u = shmalloc(sizeof(unsigned));
  x[0] = x[1] = x[2] = x[3] = 0;
  *u = 0;
  shmem_barrier_all();

  /* RMA and AMO through the generic names, plain and context forms. */
  long v = me + 1;
  shmem_put(x, &v, 1, (me + 1) % n);
  shmem_p(SHMEM_CTX_DEFAULT, &x[1], v, (me + 1) % n);
  shmem_atomic_add(&x[2], v, 0);
  shmem_atomic_fetch_or(u, 1u << me, 0);
  shmem_barrier_all();
  CHECK(shmem_g(x, me) == (me + n - 1) % n + 1);
  CHECK(shmem_g(SHMEM_CTX_DEFAULT, &x[1], me) == (me + n - 1) % n + 1);
  if (me == 0) {
    CHECK(shmem_atomic_fetch(&x[2], 0) == (long)n * (n + 1) / 2);
    CHECK(*u == (1u << n) - 1);
  }
  shmem_wait_until(&x[0], SHMEM_CMP_NE, 0);
  CHECK(shmem_test(&x[0], SHMEM_CMP_GT, 0) == 1);

  /* Collectives through the generic names. */
  double mine = me + 0.5, sum = 0;
  CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &sum, &mine, 1) == 0);
  CHECK(sum == n * (n - 1) / 2.0 + 0.5 * n);
  CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, d, &mine, 1) == 0);
  for (int i = 0; i < n; ++i) CHECK(d[i] == i + 0.5);
  CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0);
  shmem_team_t team;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &team) == 0);
  CHECK(shmem_team_my_pe(team) == me);
  long one = 1, count = 0;
  CHECK(shmem_sum_reduce(team, &count, &one, 1) == 0);
  CHECK(count == n);
  shmem_team_destroy(team);

  /* The deprecated forms. */
  static long psync[SHMEM_BARRIER_SYNC_SIZE];
  shmem_barrier(0, 0, n, psync);
  shmem_sync(0, 0, n, psync);
  long* lock = shmalloc(sizeof(long));
  *lock = 0;
  shmem_barrier_all();
  shmem_set_lock(lock);
  shmem_long_fadd(&x[3], 1, 0);
  shmem_clear_lock(lock);
  shmem_barrier_all();
  if (me == 0) CHECK(x[3] == n);
  shmem_udcflush();
  shfree(lock);
  shfree(u);
  shfree(d);
  shfree(x);
  shmem_finalize();
  return failures != 0;
}
