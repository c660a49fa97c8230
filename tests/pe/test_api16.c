/* The OpenSHMEM 1.6 additions as a C11 program sees them (-std=c11 -pedantic -Werror):
 * shmem_signal_add/shmem_signal_set, their ctx forms and their C11 generic forms with a context
 * (atomic with put-with-signal's ADD and with signal_fetch/signal_wait_until), shmem_team_ptr,
 * shmem_team_get_config with a mask of 0, shmem_pe_quiet/shmem_ctx_pe_quiet, context sessions
 * (hints), shmem_query_initialized before, during and after the job, shmem_ibput/ibget (every size,
 * ctx forms, a few types and the generic names, strided shapes), shmem_sum_inscan/exscan (integer,
 * floating and complex types, world and team, in place and disjoint), and initialization more than
 * once: nested init/finalize pairs and re-initialization after the last finalize. Values encode the
 * PE that sent them. Exits non-zero on a wrong result. */
#include <complex.h>
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "c_check.h"

static int me, npes, next, prev;

/* Each PE adds to the right neighbour's signal by every route (signal_add, its ctx form, its
 * generic form with a context, and put-with-signal's ADD), then sets another signal there; the
 * neighbour sees exactly the sum and the value set, and a waiter sees a set arrive. */
static void signal_add_and_set(void) {
  uint64_t* sig = shmem_calloc(3, sizeof(uint64_t));
  long* data = shmem_calloc(1, sizeof(long));
  const uint64_t unit = (uint64_t)me + 1;
  const uint64_t from_prev = (uint64_t)prev + 1;
  shmem_barrier_all();
  for (int i = 0; i < 5; ++i) shmem_signal_add(&sig[0], unit, next);
  shmem_ctx_signal_add(SHMEM_CTX_DEFAULT, &sig[0], 10 * unit, next);
  shmem_signal_add(SHMEM_CTX_DEFAULT, &sig[0], 1000 * unit, next);
  const long payload = 1000 + me;
  shmem_long_put_signal(data, &payload, 1, &sig[0], 100 * unit, SHMEM_SIGNAL_ADD, next);
  shmem_signal_set(&sig[1], 7, next);
  shmem_fence(); /* orders the two sets to the same PE */
  shmem_ctx_signal_set(SHMEM_CTX_DEFAULT, &sig[1], 300 + (uint64_t)me, next);
  shmem_fence();
  shmem_signal_set(SHMEM_CTX_DEFAULT, &sig[1], 500 + (uint64_t)me, next); /* the last wins */
  shmem_quiet();
  shmem_barrier_all();
  CHECK(shmem_signal_fetch(&sig[0]) == 1115 * from_prev);
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

/* ---- shmem_ibput / shmem_ibget --------------------------------------------------------------
 * A block shape: dst, sst (strides between blocks, in elements), bsize, nblocks. Element e of
 * the strided side holds element block_source_index(e) of the other side, or nothing (-1). */
struct block_shape {
  ptrdiff_t dst, sst;
  size_t bsize, nblocks;
};
static const struct block_shape shapes[] = {
    {4, 7, 3, 5}, /* gaps on both sides */
    {1, 1, 1, 9}, /* one element per block: iput's contiguous case */
    {5, 5, 5, 4}, /* blocks end to end: one contiguous transfer */
    {2, 9, 2, 6}, /* contiguous at dest only */
    {9, 4, 4, 0}, /* no block */
    {6, 6, 0, 3}, /* empty blocks */
};
enum { n_shapes = sizeof shapes / sizeof shapes[0], block_area = 64 };

static long block_source_index(const struct block_shape* s, size_t e) {
  const size_t block = e / (size_t)s->dst, within = e % (size_t)s->dst;
  if (block >= s->nblocks || within >= s->bsize) return -1;
  return (long)(block * (size_t)s->sst + within);
}

/* The bytes of element k of PE pe's source array; 0 is kept for "not written". */
static unsigned char block_byte(int pe, size_t k, size_t byte) {
  return (unsigned char)(1 + (pe * 53 + k * 7 + byte * 3) % 251);
}

static void fill_blocks(unsigned char* a, size_t width, int pe) {
  for (size_t k = 0; k < block_area; ++k)
    for (size_t c = 0; c < width; ++c) a[k * width + c] = block_byte(pe, k, c);
}

/* dest (block_area elements of `width` bytes) must hold PE from_pe's elements where the shape
 * puts them, and zeros elsewhere. */
static void check_blocks(const unsigned char* dest, size_t width, const struct block_shape* s,
                         int from_pe, const char* what) {
  for (size_t e = 0; e < block_area; ++e) {
    const long k = block_source_index(s, e);
    for (size_t c = 0; c < width; ++c) {
      const unsigned char want = k < 0 ? 0 : block_byte(from_pe, (size_t)k, c);
      if (dest[e * width + c] != want) {
        fprintf(stderr,
                "PE %d: %s (%zu-byte elements, dst=%td sst=%td bsize=%zu nblocks=%zu): element "
                "%zu byte %zu is %u, expected %u\n",
                me, what, width, s->dst, s->sst, s->bsize, s->nblocks, e, c, dest[e * width + c],
                want);
        ++failures;
        return;
      }
    }
  }
}

/* The sized routines, each with its ctx form. */
typedef void (*sized_blocks_fn)(void*, const void*, ptrdiff_t, ptrdiff_t, size_t, size_t, int);
typedef void (*ctx_sized_blocks_fn)(shmem_ctx_t, void*, const void*, ptrdiff_t, ptrdiff_t, size_t,
                                    size_t, int);
struct sized_blocks {
  size_t width;
  sized_blocks_fn put, get;
  ctx_sized_blocks_fn ctx_put, ctx_get;
};
#define SIZED_BLOCKS(BITS) \
  {BITS / 8, shmem_ibput##BITS, shmem_ibget##BITS, shmem_ctx_ibput##BITS, shmem_ctx_ibget##BITS},
static const struct sized_blocks sized[] = {SIZED_BLOCKS(8) SIZED_BLOCKS(16) SIZED_BLOCKS(32)
                                                SIZED_BLOCKS(64) SIZED_BLOCKS(128)};

/* Every size and shape, ibput to the next PE and ibget from it, on the default context and on a
 * context of its own (alternately). The gets read the neighbour's source while nobody writes it. */
static void ibput_ibget_sized(void) {
  unsigned char* sym = shmem_malloc(block_area * 16);
  unsigned char local[block_area * 16], mine[block_area * 16];
  shmem_ctx_t ctx;
  CHECK(shmem_ctx_create(0, &ctx) == 0);
  for (size_t z = 0; z < sizeof sized / sizeof sized[0]; ++z) {
    const struct sized_blocks* f = &sized[z];
    for (int i = 0; i < n_shapes; ++i) {
      const struct block_shape* s = &shapes[i];
      const int on_ctx = i % 2;
      memset(sym, 0, block_area * 16);
      fill_blocks(mine, f->width, me);
      shmem_barrier_all();
      if (on_ctx) {
        f->ctx_put(ctx, sym, mine, s->dst, s->sst, s->bsize, s->nblocks, next);
        shmem_ctx_quiet(ctx);
      } else {
        f->put(sym, mine, s->dst, s->sst, s->bsize, s->nblocks, next);
      }
      shmem_barrier_all();
      check_blocks(sym, f->width, s, prev, "ibput");
      /* Now each PE's symmetric array holds its own elements, read with the strides swapped. */
      fill_blocks(sym, f->width, me);
      memset(local, 0, sizeof local);
      shmem_barrier_all();
      if (on_ctx) {
        f->ctx_get(ctx, local, sym, s->dst, s->sst, s->bsize, s->nblocks, next);
      } else {
        f->get(local, sym, s->dst, s->sst, s->bsize, s->nblocks, next);
      }
      check_blocks(local, f->width, s, next, "ibget");
      shmem_barrier_all(); /* the previous PE has read sym before it is cleared */
    }
  }
  shmem_barrier_all();
  shmem_ctx_destroy(ctx);
  shmem_free(sym);
}

/* The typed names and the type-generic ones, for a few types of the RMA table: the plain typed
 * form for puts, the generic ctx form for gets. Values are element indices offset by the PE. */
#define TYPED_BLOCK_TYPES(X) \
  X(short, short)            \
  X(double, double) X(long double, longdouble) X(uint64_t, uint64) X(ptrdiff_t, ptrdiff)
#define TYPED_BLOCKS_TEST(T, N)                                                             \
  static void ibput_ibget_##N(const struct block_shape* s) {                                \
    T* sym = shmem_calloc(block_area, sizeof(T));                                           \
    T mine[block_area], local[block_area];                                                  \
    for (int k = 0; k < block_area; ++k) mine[k] = (T)(1000 * (me + 1) + k);                \
    shmem_barrier_all();                                                                    \
    shmem_##N##_ibput(sym, mine, s->dst, s->sst, s->bsize, s->nblocks, next);               \
    shmem_barrier_all();                                                                    \
    for (size_t e = 0; e < block_area; ++e) {                                               \
      const long k = block_source_index(s, e);                                              \
      CHECK(sym[e] == (k < 0 ? (T)0 : (T)(1000 * (prev + 1) + k)));                         \
    }                                                                                       \
    for (int k = 0; k < block_area; ++k) sym[k] = (T)(1000 * (me + 1) + k);                 \
    for (int k = 0; k < block_area; ++k) local[k] = (T)0;                                   \
    shmem_barrier_all();                                                                    \
    shmem_ibget(SHMEM_CTX_DEFAULT, local, sym, s->dst, s->sst, s->bsize, s->nblocks, next); \
    for (size_t e = 0; e < block_area; ++e) {                                               \
      const long k = block_source_index(s, e);                                              \
      CHECK(local[e] == (k < 0 ? (T)0 : (T)(1000 * (next + 1) + k)));                       \
    }                                                                                       \
    shmem_barrier_all();                                                                    \
    shmem_free(sym);                                                                        \
  }
TYPED_BLOCK_TYPES(TYPED_BLOCKS_TEST)

static void ibput_ibget_typed(void) {
  for (int i = 0; i < n_shapes; ++i) {
#define CALL_TYPED_BLOCKS(T, N) ibput_ibget_##N(&shapes[i]);
    TYPED_BLOCK_TYPES(CALL_TYPED_BLOCKS)
  }
  /* The generic plain put, on one type. */
  int* sym = shmem_calloc(8, sizeof(int));
  const int mine[4] = {me, me + 10, me + 20, me + 30};
  shmem_barrier_all();
  shmem_ibput(sym, mine, 2, 1, 1, 4, next); /* the even elements */
  shmem_barrier_all();
  for (int e = 0; e < 8; ++e) CHECK(sym[e] == (e % 2 ? 0 : prev + 10 * (e / 2)));
  shmem_barrier_all();
  shmem_free(sym);
}

/* ---- shmem_sum_inscan / shmem_sum_exscan ----------------------------------------------------
 * Over the world and over the team of even PEs, in place (typed names) and disjoint (generic
 * names), for integer, floating and complex types; nelems spans several of the library's chunks.
 * Values are small integers (exact in every type), and the reference is the sequential sum, in
 * the type, of what every lower team member contributes. */
enum { scan_n = 700 };
static int scan_value(int pe, int j) {
  return (pe * 7 + j * 3) % 11 + 1;
}
#define SCAN_REAL(v, w) (v)
#define SCAN_COMPLEX(v, w) ((v) + (w)*I)
#define SCAN_TYPES(X)                       \
  X(int, int, SCAN_REAL)                    \
  X(unsigned char, uchar, SCAN_REAL)        \
  X(long long, longlong, SCAN_REAL)         \
  X(size_t, size, SCAN_REAL)                \
  X(double, double, SCAN_REAL)              \
  X(long double, longdouble, SCAN_REAL)     \
  X(float _Complex, complexf, SCAN_COMPLEX) \
  X(double _Complex, complexd, SCAN_COMPLEX)
#define SCAN_TEST(T, N, MAKE)                                                                  \
  static void scans_##N(shmem_team_t team, void* buffers) {                                    \
    const int rank = shmem_team_my_pe(team);                                                   \
    T* a = buffers;                                                                            \
    T* b = a + scan_n;                                                                         \
    for (int exclusive = 0; exclusive < 2; ++exclusive) {                                      \
      for (int in_place = 0; in_place < 2; ++in_place) {                                       \
        for (int j = 0; j < scan_n; ++j) a[j] = (T)MAKE(scan_value(rank, j), j % 5);           \
        T* dest = in_place ? a : b;                                                            \
        int rc;                                                                                \
        if (in_place)                                                                          \
          rc = exclusive ? shmem_##N##_sum_exscan(team, dest, a, scan_n)                       \
                         : shmem_##N##_sum_inscan(team, dest, a, scan_n);                      \
        else                                                                                   \
          rc = exclusive ? shmem_sum_exscan(team, dest, a, scan_n)                             \
                         : shmem_sum_inscan(team, dest, a, scan_n);                            \
        CHECK(rc == 0);                                                                        \
        const int last = exclusive ? rank - 1 : rank;                                          \
        int wrong = 0;                                                                         \
        for (int j = 0; j < scan_n; ++j) {                                                     \
          T want = (T)0;                                                                       \
          for (int k = 0; k <= last; ++k) want += (T)MAKE(scan_value(k, j), j % 5);            \
          if (dest[j] != want) ++wrong;                                                        \
          if (!in_place && a[j] != (T)MAKE(scan_value(rank, j), j % 5)) ++wrong;               \
        }                                                                                      \
        if (wrong) {                                                                           \
          fprintf(stderr, "PE %d: %s %s %s: %d wrong elements\n", me, "shmem_" #N "_sum",      \
                  exclusive ? "exscan" : "inscan", in_place ? "in place" : "disjoint", wrong); \
          ++failures;                                                                          \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }
SCAN_TYPES(SCAN_TEST)

static void scans(void) {
  /* Allocated by every PE (shmem_malloc is collective over the world), for the largest type. */
  void* buffers = shmem_malloc(2 * scan_n * sizeof(long double _Complex));
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &evens);
#define CALL_SCAN_TEST(T, N, MAKE)      \
  scans_##N(SHMEM_TEAM_WORLD, buffers); \
  if (evens != SHMEM_TEAM_INVALID) scans_##N(evens, buffers);
  SCAN_TYPES(CALL_SCAN_TEST)
  CHECK(shmem_int_sum_inscan(SHMEM_TEAM_INVALID, NULL, NULL, 0) != 0);
  if (evens != SHMEM_TEAM_INVALID) shmem_team_destroy(evens);
  shmem_barrier_all();
  shmem_free(buffers);
}

/* ---- Initialization more than once (9.1.1, 9.1.4, 9.2.1) ------------------------------------ */
static long ring_global; /* symmetric program data, in every initialization */

/* The library works: a put into the heap and into a global around the ring, and a reduction. */
static void ring_exchange(int round) {
  long* heap = shmem_malloc(2 * sizeof(long));
  heap[0] = -1;
  ring_global = -1;
  shmem_barrier_all();
  shmem_long_p(&heap[0], 1000 * round + me, next);
  shmem_long_p(&ring_global, 2000 * round + me, next);
  shmem_barrier_all();
  CHECK(heap[0] == 1000 * round + prev);
  CHECK(ring_global == 2000 * round + prev);
  heap[0] = me + round;
  CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &heap[1], &heap[0], 1) == 0);
  CHECK(heap[1] == (long)npes * round + (long)npes * (npes - 1) / 2);
  shmem_barrier_all();
  shmem_free(heap);
}

/* Initialization calls nest: the finalizes matching the inner ones are barriers and release
 * nothing. Returns with one initialization left to finalize. */
static void nested_init(void) {
  int provided = -1, initialized = 0;
  CHECK(shmem_init_thread(SHMEM_THREAD_SINGLE, &provided) == 0);
  CHECK(provided >= SHMEM_THREAD_SINGLE);
  shmem_init();
  shmem_finalize();
  shmem_finalize();
  shmem_query_initialized(&initialized);
  CHECK(initialized != 0);
  CHECK(shmem_my_pe() == me && shmem_n_pes() == npes);
  ring_exchange(0);
}

/* After the last finalize the library initializes again, with the same PEs, a fresh heap,
 * symmetric globals and teams; and is uninitialized after each last finalize. */
static void reinitialize(void) {
  int initialized = -1;
  for (int round = 1; round <= 2; ++round) {
    shmem_init();
    CHECK(shmem_my_pe() == me && shmem_n_pes() == npes);
    ring_exchange(round);
    team_ptr();
    shmem_finalize();
    shmem_query_initialized(&initialized);
    if (initialized != 0) { /* CHECK would ask shmem_my_pe, which needs the library */
      fprintf(stderr, "PE %d: initialized after the last finalize of round %d\n", me, round);
      ++failures;
    }
  }
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
  ibput_ibget_sized();
  ibput_ibget_typed();
  scans();
  nested_init();
  shmem_finalize();
  reinitialize();
  shmem_query_initialized(&initialized); /* and after shmem_finalize */
  CHECK(initialized == 0);
  if (failures == 0) printf("PE %d: all checks passed\n", me);
  return failures != 0;
}
