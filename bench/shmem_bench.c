/*
 * shmem_bench.c - portable OpenSHMEM 1.4-1.6 micro-benchmarks.
 *
 * The same source builds against shmoe (bench/CMakeLists.txt) and against any other
 * OpenSHMEM, e.g. Open MPI's OSHMEM (`oshcc -O2 -std=c11 shmem_bench.c`), so the numbers can be
 * compared directly (bench/compare_oshmem.sh does that). For that reason it uses only
 * <shmem.h>, symmetric memory only from shmem_malloc/shmem_align (no static symmetric
 * variables), and 1.5 and 1.6 API only where the library's SHMEM_*_VERSION has it.
 *
 * Usage: shmem_bench [options] [bench ...]        (see usage() below, or run with -h)
 *
 * Output: CSV on stdout, PE 0 only:
 *   impl,bench,pes,bytes,iters,usec_per_op,gbytes_per_s,ratio_to_memcpy
 * gbytes_per_s is 1e9 bytes/s. ratio_to_memcpy divides that by the single-thread memcpy rate
 * PE 0 measures in the same run for the same size on private malloc'd memory, i.e. "what
 * fraction of a plain local copy do we reach". Latency rows (8 B) use the same definition, so
 * their ratio is memcpy-time(8 B) / op-time. Rows without a byte count (barrier) leave the
 * rate and ratio fields empty.
 *
 * Point-to-point benchmarks run between PE 0 and PE 1; any further PEs only take part in the
 * barriers that separate the phases, so the program works at any PE count >= 2 (at 1 PE only
 * memcpy and barrier run).
 *
 * Iteration counts adapt to the machine: each measurement first runs a warm-up, whose
 * duration PE 0 uses to pick enough timed iterations to fill -t seconds (bounded by -N and
 * -n), and shares that count with all PEs. That keeps a full run short on slow or
 * oversubscribed machines without making fast operations statistically noisy. -t 0 gives a
 * fixed count of -n iterations.
 *
 * Large transfers need 2 x max-size of symmetric heap (src + dst): with the default 64 MiB
 * maximum set SHMEM_SYMMETRIC_SIZE=512M (or lower -M).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getopt */

#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
  LAT_BYTES = 8,         /* payload of the latency benchmarks */
  CACHE_LINE = 64,       /* keeps control words apart so they do not share a line */
  MAX_MEMCPY_SIZES = 72, /* memcpy cache entries: one per distinct size, 64 covers 2^0..2^63 */
};

/* Warm-up of large transfers is capped by bytes, not only by count, so a 64 MiB put is not
 * repeated -w times before being timed. */
static const size_t WARM_BYTES = (size_t)16 << 20;

typedef struct {
  size_t min_bytes, max_bytes;
  unsigned long factor;
  long max_iters, min_iters, warmup;
  double target_s;
  const char* impl; /* NULL: IMPL_NAME or shmem_info_get_name */
  int header;
} options;

typedef struct {
  options opt;
  int me, npes;
  char impl[SHMEM_MAX_NAME_LEN + 1];

  /* Symmetric control words, each on its own cache line. */
  long* slot;    /* PE 0 -> all value sharing */
  long* flag;    /* ping-pong flag */
  long* counter; /* atomics target */
  long* errs;    /* error count reduction on PE 0 */
  long* value;   /* shmem_p target */
#ifdef SHMEM_SIGNAL_ADD
  uint64_t* sig; /* put-with-signal signal word */
#endif
  unsigned char *lat_src, *lat_dst;

  /* Symmetric bandwidth buffers of max_bytes each; allocated on first use. */
  unsigned char *src, *dst;
  size_t cur_bytes; /* transfer size of the measurement in progress */

  /* PE 0 only: private memcpy buffers and the copies measured on them, one per size. */
  unsigned char *priv_src, *priv_dst;
  size_t priv_bytes;
  struct memcpy_result {
    size_t bytes;
    long iters;
    double usec; /* per copy */
  } memcpy_ref[MAX_MEMCPY_SIZES];
  int n_memcpy;

  long errors;     /* failed data checks seen by this PE */
  long last_iters; /* timed iterations of the last rate measurement (all PEs agree) */
} bench;

/* A phase runs `count` operations on every PE (each in its role); `first` is the global index
 * of the first one, so phases that follow each other can use distinct flag values. */
typedef void (*phase_fn)(bench* b, long first, long count);

/* Called through a volatile pointer, memcpy cannot be inlined or elided, even though every
 * iteration copies the same bytes to the same place. */
static void* (*volatile memcpy_fn)(void*, const void*, size_t) = memcpy;

/* ------------------------------------------------------------------------------------------ */
/* Small utilities                                                                            */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(bench* b, const char* msg) {
  fprintf(stderr, "shmem_bench: PE %d: %s\n", b->me, msg);
  shmem_global_exit(1);
  exit(1); /* shmem_global_exit is not declared noreturn everywhere */
}

static void* sym_alloc(bench* b, size_t bytes, const char* what) {
  void* p = shmem_align(CACHE_LINE, bytes);
  if (p == NULL) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "shmem_align(%zu) for %s returned NULL: symmetric heap too small; "
             "set SHMEM_SYMMETRIC_SIZE=512M (or lower the maximum size with -M)",
             bytes, what);
    die(b, msg);
  }
  return p;
}

/* Never 0, so a cleared destination can not pass the check by accident. */
static unsigned char pattern(size_t i, int pe) {
  return (unsigned char)(1 + (i * 7 + (size_t)pe * 37) % 251);
}

static void fill_pattern(unsigned char* buf, size_t bytes, int pe) {
  for (size_t i = 0; i < bytes; i++) buf[i] = pattern(i, pe);
}

/* Samples ~64 positions plus the last byte: enough to catch a missing, short or misplaced
 * transfer without making the check cost as much as the transfer. */
static int pattern_ok(const unsigned char* buf, size_t bytes, int src_pe) {
  size_t stride = bytes / 64 ? bytes / 64 : 1;
  for (size_t i = 0; i < bytes; i += stride) {
    if (buf[i] != pattern(i, src_pe)) return 0;
  }
  return buf[bytes - 1] == pattern(bytes - 1, src_pe);
}

static void check_pattern(bench* b, const unsigned char* buf, size_t bytes, int src_pe,
                          const char* what) {
  if (pattern_ok(buf, bytes, src_pe)) return;
  fprintf(stderr, "shmem_bench: PE %d: %s of %zu bytes delivered wrong data\n", b->me, what, bytes);
  b->errors++;
}

/* PE 0 decides, everybody learns: puts to every PE's slot, barrier (which completes the
 * puts), read, and a second barrier so no PE can overwrite a slot that is still unread. */
static long share_from_pe0(bench* b, long value) {
  if (b->me == 0) {
    *b->slot = value;
    for (int pe = 1; pe < b->npes; pe++) shmem_long_p(b->slot, value, pe);
  }
  shmem_barrier_all();
  long v = *(volatile long*)b->slot;
  shmem_barrier_all();
  return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Measurement driver                                                                         */

static long clamp_long(long v, long lo, long hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Timed iterations that fill the target time, judged from the calibration run. */
static long choose_iters(const options* o, double warm_s, long warm) {
  if (o->target_s <= 0 || warm <= 0 || warm_s <= 0) return o->max_iters;
  double n = o->target_s / (warm_s / (double)warm);
  if (n > (double)o->max_iters) return o->max_iters;
  return clamp_long((long)n, o->min_iters, o->max_iters);
}

/* Warm-up count for a transfer size: -w, but at most WARM_BYTES worth, and at least one. */
static long warm_iters(const options* o, size_t bytes) {
  long w = o->warmup;
  if (bytes > 0 && (size_t)w > WARM_BYTES / bytes) w = (long)(WARM_BYTES / bytes);
  return w < 1 ? 1 : w;
}

/* Starts all PEs together and returns PE 0's duration of the phase. */
static double timed_phase(bench* b, phase_fn fn, long first, long count) {
  shmem_barrier_all();
  double t0 = now_s();
  fn(b, first, count);
  return now_s() - t0;
}

/* Warm-up, a timed calibration run of the same length, agreement on the iteration count,
 * timed run. Returns PE 0's seconds. The calibration is separate from the warm-up because
 * the first operations pay for page faults and connection setup, which would make the
 * estimate (with a single warm-up op for large sizes) far too pessimistic. */
static double measure(bench* b, phase_fn fn, long warm, long* iters) {
  timed_phase(b, fn, 0, warm);
  double cal_s = timed_phase(b, fn, warm, warm);
  long n = share_from_pe0(b, b->me == 0 ? choose_iters(&b->opt, cal_s, warm) : 0);
  double t = timed_phase(b, fn, 2 * warm, n);
  shmem_barrier_all(); /* the phase is over on every PE before anybody checks results */
  *iters = n;
  return t;
}

/* ------------------------------------------------------------------------------------------ */
/* memcpy reference (PE 0 only, private memory)                                               */

static void ensure_private_buffers(bench* b, size_t bytes) {
  if (b->priv_bytes >= bytes) return;
  free(b->priv_src);
  free(b->priv_dst);
  b->priv_src = malloc(bytes);
  b->priv_dst = malloc(bytes);
  if (b->priv_src == NULL || b->priv_dst == NULL)
    die(b, "malloc of the memcpy reference buffers failed");
  /* Touch every page now so page faults are not part of any measurement. */
  fill_pattern(b->priv_src, bytes, b->me);
  memset(b->priv_dst, 0, bytes);
  b->priv_bytes = bytes;
}

static double memcpy_seconds(bench* b, size_t bytes, long count) {
  double t0 = now_s();
  for (long i = 0; i < count; i++) memcpy_fn(b->priv_dst, b->priv_src, bytes);
  return now_s() - t0;
}

/* The local copy that all ratios refer to: measured once per size, then cached. */
static const struct memcpy_result* memcpy_ref(bench* b, size_t bytes) {
  for (int i = 0; i < b->n_memcpy; i++) {
    if (b->memcpy_ref[i].bytes == bytes) return &b->memcpy_ref[i];
  }
  size_t largest = b->opt.max_bytes > LAT_BYTES ? b->opt.max_bytes : LAT_BYTES;
  ensure_private_buffers(b, bytes > largest ? bytes : largest);
  long warm = warm_iters(&b->opt, bytes);
  memcpy_seconds(b, bytes, warm); /* warm-up, as in measure() */
  long n = choose_iters(&b->opt, memcpy_seconds(b, bytes, warm), warm);
  double secs = memcpy_seconds(b, bytes, n);

  int slot = b->n_memcpy < MAX_MEMCPY_SIZES ? b->n_memcpy++ : MAX_MEMCPY_SIZES - 1;
  b->memcpy_ref[slot] = (struct memcpy_result){bytes, n, secs * 1e6 / (double)n};
  return &b->memcpy_ref[slot];
}

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                     */

static void print_header(void) {
  printf("impl,bench,pes,bytes,iters,usec_per_op,gbytes_per_s,ratio_to_memcpy\n");
  fflush(stdout);
}

/* PE 0 only. May measure memcpy for `bytes` first (while the other PEs wait in the next
 * barrier), so call it between phases, never inside one. Rates are bytes / usec per op, so
 * the ratio to memcpy is simply memcpy's time per copy over this op's time. */
static void emit(bench* b, const char* name, size_t bytes, long iters, double usec) {
  /* %g keeps 6 significant digits from 0.002 us (an 8-byte memcpy) to 64 MiB rates. */
  printf("%s,%s,%d,%zu,%ld,%.6g,", b->impl, name, b->npes, bytes, iters, usec);
  if (bytes > 0) {
    double gbps = (double)bytes / usec / 1e3;
    printf("%.6g,%.6g\n", gbps, memcpy_ref(b, bytes)->usec / usec);
  } else {
    printf(",\n");
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* Phases                                                                                     */

static void phase_put(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) shmem_putmem(b->dst, b->src, b->cur_bytes, 1);
  shmem_quiet(); /* time delivery to PE 1, not just local buffer reuse */
}

static void phase_put_nbi(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) shmem_putmem_nbi(b->dst, b->src, b->cur_bytes, 1);
  shmem_quiet(); /* one completion per batch is the point of the nbi variant */
}

static void phase_get(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) shmem_getmem(b->dst, b->src, b->cur_bytes, 1);
}

static void phase_get_nbi(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) shmem_getmem_nbi(b->dst, b->src, b->cur_bytes, 1);
  shmem_quiet();
}

static void phase_put_lat(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    shmem_putmem(b->lat_dst, b->lat_src, LAT_BYTES, 1);
    shmem_quiet();
  }
}

/* PE 0 sends v, PE 1 echoes it back; each waits on its own copy of the flag. Values keep
 * increasing across phases, so a stale flag can never satisfy a wait. */
static void phase_pingpong(bench* b, long first, long count) {
  long* flag = b->flag;
  if (b->me == 0) {
    for (long v = first + 1; v <= first + count; v++) {
      shmem_long_p(flag, v, 1);
      shmem_long_wait_until(flag, SHMEM_CMP_EQ, v);
    }
  } else if (b->me == 1) {
    for (long v = first + 1; v <= first + count; v++) {
      shmem_long_wait_until(flag, SHMEM_CMP_EQ, v);
      shmem_long_p(flag, v, 0);
    }
  }
}

/* Only PE 0 updates PE 1's counter, so every fetch must return the running count. */
static void phase_fetch_add(bench* b, long first, long count) {
  if (b->me != 0) return;
  int next = (b->me + 1) % b->npes;
  long bad = 0;
  for (long i = 0; i < count; i++)
    bad += shmem_long_atomic_fetch_add(b->counter, 1, next) != first + i;
  if (bad) {
    fprintf(stderr, "shmem_bench: PE 0: %ld fetch_add results out of sequence\n", bad);
    b->errors++;
  }
}

static void phase_atomic_add(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  int next = (b->me + 1) % b->npes;
  for (long i = 0; i < count; i++) {
    shmem_long_atomic_add(b->counter, 1, next);
    shmem_quiet();
  }
}

/* Rates of the non-fetching operations, which need not wait for the target each: PE 0 issues
 * them to PE 1 with a shmem_quiet after every RATE_BATCH (MegaMoE's batches of rows), and the
 * time per operation is reported. Each phase leaves on PE 1 a count or value that its bench
 * checks. */
enum { RATE_BATCH = 16 };

static void quiet_per_batch(long i, long count) {
  if ((i + 1) % RATE_BATCH == 0 || i + 1 == count) shmem_quiet();
}

static void phase_p_rate(bench* b, long first, long count) {
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    shmem_long_p(b->value, first + i + 1, 1);
    quiet_per_batch(i, count);
  }
}

static void phase_add_rate(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    shmem_long_atomic_add(b->counter, 1, 1);
    quiet_per_batch(i, count);
  }
}

#ifdef SHMEM_SIGNAL_ADD /* OpenSHMEM 1.5 */
static void phase_putsig_rate(bench* b, long first, long count) {
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    /* Each payload names its index; the source changes only after the quiet. */
    if (i % RATE_BATCH == 0) *(long*)b->lat_src = first + i + RATE_BATCH;
    shmem_putmem_signal_nbi(b->lat_dst, b->lat_src, LAT_BYTES, b->sig, 1, SHMEM_SIGNAL_ADD, 1);
    quiet_per_batch(i, count);
  }
}
#endif

/* OpenSHMEM 1.6 additions, where the library has them (shmoe; others once they reach 1.6). */
#if SHMEM_MAJOR_VERSION > 1 || (SHMEM_MAJOR_VERSION == 1 && SHMEM_MINOR_VERSION >= 6)
#define HAVE_OPENSHMEM_1_6 1
#endif

#ifdef HAVE_OPENSHMEM_1_6
static void phase_sigadd_rate(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    shmem_signal_add(b->sig, 1, 1);
    quiet_per_batch(i, count);
  }
}
#endif

#ifdef HAVE_OPENSHMEM_1_6
/* Batch sessions (1.6, 9.9): the same 8-byte puts and atomic adds from PE 0 to PE 1 on a context
 * of their own, with a quiet per BATCH_QUIET operations, in a batch session and outside one. A
 * library may hold a session's small operations back and send them together. */
enum { BATCH_QUIET = 256 };
static shmem_ctx_t batch_ctx = SHMEM_CTX_DEFAULT;

static void batch_phase(bench* b, long first, long count, int in_session, int add) {
  if (b->me != 0) return;
  if (in_session) shmem_ctx_session_start(batch_ctx, SHMEM_CTX_SESSION_BATCH, NULL, 0);
  for (long i = 0; i < count; i++) {
    if (add) {
      shmem_ctx_long_atomic_add(batch_ctx, b->counter, 1, 1);
    } else {
      const long v = first + i + 1;
      shmem_ctx_long_put(batch_ctx, b->value, &v, 1, 1);
    }
    if ((i + 1) % BATCH_QUIET == 0 || i + 1 == count) shmem_ctx_quiet(batch_ctx);
  }
  if (in_session) shmem_ctx_session_stop(batch_ctx);
}

static void phase_put8_plain(bench* b, long first, long count) {
  batch_phase(b, first, count, 0, 0);
}
static void phase_put8_batch(bench* b, long first, long count) {
  batch_phase(b, first, count, 1, 0);
}
static void phase_add_plain(bench* b, long first, long count) {
  batch_phase(b, first, count, 0, 1);
}
static void phase_add_batch(bench* b, long first, long count) {
  batch_phase(b, first, count, 1, 1);
}
#endif

#ifdef SHMEM_SIGNAL_ADD
/* put-with-signal of zero bytes: the signal alone, the way to update one before 1.6. */
static void phase_putsig0_rate(bench* b, long first, long count) {
  (void)first;
  if (b->me != 0) return;
  for (long i = 0; i < count; i++) {
    shmem_putmem_signal_nbi(b->lat_dst, b->lat_src, 0, b->sig, 1, SHMEM_SIGNAL_ADD, 1);
    quiet_per_batch(i, count);
  }
}
#endif

/* Strided blocks: cur_bytes of data in blocks of STRIDED_BLOCK bytes, one block every
 * 2 * STRIDED_BLOCK bytes on both sides (the same offsets at source and destination), moved
 * three ways: one ibput/ibget, an iput/iget per 8-byte column of the blocks, a putmem/getmem per
 * block. Puts go PE 0 -> PE 1, gets PE 0 <- PE 1. */
enum { STRIDED_BLOCK = 64, STRIDED_ELEMS = STRIDED_BLOCK / 8 };

static size_t strided_blocks(const bench* b) {
  return b->cur_bytes / STRIDED_BLOCK;
}

/* Each way, as a put (PE 0 -> PE 1, then a quiet: delivery is timed) or a get (PE 0 <- PE 1). */
#ifdef HAVE_OPENSHMEM_1_6
static void move_ib(bench* b, long count, int is_put) {
  for (long i = 0; i < count; i++) {
    (is_put ? shmem_ibput64 : shmem_ibget64)(b->dst, b->src, 2 * STRIDED_ELEMS, 2 * STRIDED_ELEMS,
                                             STRIDED_ELEMS, strided_blocks(b), 1);
  }
}
#endif

static void move_columns(bench* b, long count, int is_put) {
  for (long i = 0; i < count; i++) {
    for (int j = 0; j < STRIDED_ELEMS; j++)
      (is_put ? shmem_iput64 : shmem_iget64)(b->dst + 8 * j, b->src + 8 * j, 2 * STRIDED_ELEMS,
                                             2 * STRIDED_ELEMS, strided_blocks(b), 1);
  }
}

static void move_blocks(bench* b, long count, int is_put) {
  for (long i = 0; i < count; i++) {
    for (size_t k = 0; k < strided_blocks(b); k++) {
      unsigned char* to = b->dst + 2 * STRIDED_BLOCK * k;
      const unsigned char* from = b->src + 2 * STRIDED_BLOCK * k;
      if (is_put)
        shmem_putmem(to, from, STRIDED_BLOCK, 1);
      else
        shmem_getmem(to, from, STRIDED_BLOCK, 1);
    }
  }
}

typedef void (*strided_way)(bench* b, long count, int is_put);

static void strided_phase(bench* b, long count, strided_way way, int is_put) {
  if (b->me != 0) return;
  way(b, count, is_put);
  if (is_put) shmem_quiet();
}

/* phase_NAME: WAY as a put (IS_PUT 1) or a get, in the shape every phase has. */
#define STRIDED_PHASE(NAME, WAY, IS_PUT)                       \
  static void phase_##NAME(bench* b, long first, long count) { \
    (void)first;                                               \
    strided_phase(b, count, WAY, IS_PUT);                      \
  }
#ifdef HAVE_OPENSHMEM_1_6
STRIDED_PHASE(ibput, move_ib, 1)
STRIDED_PHASE(ibget, move_ib, 0)
#endif
STRIDED_PHASE(iput_columns, move_columns, 1)
STRIDED_PHASE(iget_columns, move_columns, 0)
STRIDED_PHASE(putmem_blocks, move_blocks, 1)
STRIDED_PHASE(getmem_blocks, move_blocks, 0)

static void phase_barrier(bench* b, long first, long count) {
  (void)b;
  (void)first;
  for (long i = 0; i < count; i++) shmem_barrier_all();
}

/* ------------------------------------------------------------------------------------------ */
/* Benchmarks                                                                                 */

static void skipped(bench* b, const char* name, const char* needs) {
  if (b->me == 0) fprintf(stderr, "shmem_bench: %s skipped: needs %s\n", name, needs);
}

static int have_peer(bench* b, const char* name) {
  if (b->npes >= 2) return 1;
  skipped(b, name, "at least 2 PEs");
  return 0;
}

static int next_size(const options* o, size_t* bytes) {
  if (*bytes > o->max_bytes / o->factor) return 0;
  *bytes *= o->factor;
  return 1;
}

static void ensure_bw_buffers(bench* b) {
  if (b->src != NULL) return;
  b->src = sym_alloc(b, b->opt.max_bytes, "the bandwidth source buffer");
  b->dst = sym_alloc(b, b->opt.max_bytes, "the bandwidth destination buffer");
  fill_pattern(b->src, b->opt.max_bytes, b->me);
  memset(b->dst, 0, b->opt.max_bytes);
  shmem_barrier_all(); /* all PEs' sources are filled before anybody reads them */
}

static void bench_memcpy(bench* b) {
  if (b->me == 0) {
    size_t bytes = b->opt.min_bytes;
    do {
      const struct memcpy_result* r = memcpy_ref(b, bytes);
      emit(b, "memcpy", bytes, r->iters, r->usec);
    } while (next_size(&b->opt, &bytes));
  }
  shmem_barrier_all();
}

/* One bandwidth sweep. is_put says where the data lands (PE 1 for put, PE 0 for get), which
 * is where the destination is cleared before and checked after each size. */
static void bandwidth_sweep(bench* b, const char* name, phase_fn fn, int is_put) {
  if (!have_peer(b, name)) return;
  ensure_bw_buffers(b);
  int receiver = is_put ? 1 : 0;
  int sender = is_put ? 0 : 1;
  size_t bytes = b->opt.min_bytes;
  do {
    b->cur_bytes = bytes;
    if (b->me == receiver) memset(b->dst, 0, bytes);
    long iters;
    double secs = measure(b, fn, warm_iters(&b->opt, bytes), &iters);
    if (b->me == receiver) check_pattern(b, b->dst, bytes, sender, name);
    if (b->me == 0) emit(b, name, bytes, iters, secs * 1e6 / (double)iters);
  } while (next_size(&b->opt, &bytes));
}

static void bench_put_bw(bench* b) {
  bandwidth_sweep(b, "put_bw", phase_put, 1);
}
static void bench_put_nbi_bw(bench* b) {
  bandwidth_sweep(b, "put_nbi_bw", phase_put_nbi, 1);
}
static void bench_get_bw(bench* b) {
  bandwidth_sweep(b, "get_bw", phase_get, 0);
}
static void bench_get_nbi_bw(bench* b) {
  bandwidth_sweep(b, "get_nbi_bw", phase_get_nbi, 0);
}

/* One strided sweep (sizes up to half the buffers: the blocks span twice the data). Every
 * block must hold the sender's bytes at its offsets and every gap must stay clear. */
static void strided_sweep(bench* b, const char* name, phase_fn fn, int is_put) {
  if (!have_peer(b, name)) return;
  ensure_bw_buffers(b);
  int receiver = is_put ? 1 : 0;
  int sender = is_put ? 0 : 1;
  size_t bytes = b->opt.min_bytes < STRIDED_BLOCK ? STRIDED_BLOCK : b->opt.min_bytes;
  for (; 2 * bytes <= b->opt.max_bytes; bytes *= b->opt.factor) {
    b->cur_bytes = bytes;
    if (b->me == receiver) memset(b->dst, 0, 2 * bytes);
    long iters;
    double secs = measure(b, fn, warm_iters(&b->opt, bytes), &iters);
    if (b->me == receiver) {
      size_t wrong = 0;
      for (size_t i = 0; i < 2 * strided_blocks(b) * STRIDED_BLOCK; i++) {
        int in_block = (i / STRIDED_BLOCK) % 2 == 0;
        wrong += b->dst[i] != (in_block ? pattern(i, sender) : 0);
      }
      if (wrong) {
        fprintf(stderr, "shmem_bench: PE %d: %s of %zu bytes: %zu wrong bytes\n", b->me, name,
                bytes, wrong);
        b->errors++;
      }
    }
    if (b->me == 0) emit(b, name, bytes, iters, secs * 1e6 / (double)iters);
  }
}

#ifdef HAVE_OPENSHMEM_1_6
static void bench_ibput(bench* b) {
  strided_sweep(b, "ibput_bw", phase_ibput, 1);
}
static void bench_ibget(bench* b) {
  strided_sweep(b, "ibget_bw", phase_ibget, 0);
}
#else
static void bench_ibput(bench* b) {
  skipped(b, "ibput_bw", "OpenSHMEM 1.6");
}
static void bench_ibget(bench* b) {
  skipped(b, "ibget_bw", "OpenSHMEM 1.6");
}
#endif
static void bench_iput_columns(bench* b) {
  strided_sweep(b, "iput_columns_bw", phase_iput_columns, 1);
}
static void bench_iget_columns(bench* b) {
  strided_sweep(b, "iget_columns_bw", phase_iget_columns, 0);
}
static void bench_putmem_blocks(bench* b) {
  strided_sweep(b, "putmem_blocks_bw", phase_putmem_blocks, 1);
}
static void bench_getmem_blocks(bench* b) {
  strided_sweep(b, "getmem_blocks_bw", phase_getmem_blocks, 0);
}

/* Runs one fixed-size latency phase and reports it as `bytes` per op. Ping-pong passes
 * legs = 2 to report the one-way time (iters stays the number of round trips). */
static void latency(bench* b, const char* name, phase_fn fn, size_t bytes, int legs) {
  long iters;
  double secs = measure(b, fn, b->opt.warmup, &iters);
  if (b->me == 0) emit(b, name, bytes, iters, secs * 1e6 / (double)iters / legs);
}

static void bench_put_lat(bench* b) {
  if (!have_peer(b, "put_lat")) return;
  fill_pattern(b->lat_src, LAT_BYTES, b->me);
  memset(b->lat_dst, 0, LAT_BYTES);
  latency(b, "put_lat", phase_put_lat, LAT_BYTES, 1);
  if (b->me == 1) check_pattern(b, b->lat_dst, LAT_BYTES, 0, "put_lat");
}

static void bench_pingpong(bench* b) {
  if (!have_peer(b, "pingpong")) return;
  *b->flag = 0;
  latency(b, "pingpong", phase_pingpong, sizeof(long), 2);
}

/* The counter lives on PE 1; it is reset before and compared with the number of adds
 * after: warm-up + calibration (warm each) + timed iterations. */
static void atomic_bench(bench* b, const char* name, phase_fn fn) {
  if (!have_peer(b, name)) return;
  *b->counter = 0;
  long warm = b->opt.warmup;
  long iters;
  double secs = measure(b, fn, warm, &iters);
  long expected = 2 * warm + iters;
  if (b->me == 1 && *(volatile long*)b->counter != expected) {
    fprintf(stderr, "shmem_bench: PE 1: %s counter is %ld, expected %ld\n", name,
            *(volatile long*)b->counter, expected);
    b->errors++;
  }
  if (b->me == 0) emit(b, name, sizeof(long), iters, secs * 1e6 / (double)iters);
}

static void bench_fetch_add(bench* b) {
  atomic_bench(b, "fetch_add", phase_fetch_add);
}
static void bench_atomic_add(bench* b) {
  atomic_bench(b, "atomic_add", phase_atomic_add);
}

static void bench_barrier(bench* b) {
  latency(b, "barrier", phase_barrier, 0, 1);
}

/* Runs a rate phase and checks, on PE 1, what the operations left: `seen()` must equal
 * `expected(warm, iters)`. */
static void rate_bench(bench* b, const char* name, phase_fn fn, long (*seen)(bench* b),
                       long (*expected)(long warm, long iters)) {
  if (!have_peer(b, name)) return;
  long warm = b->opt.warmup;
  long iters;
  double secs = measure(b, fn, warm, &iters);
  b->last_iters = iters;
  if (b->me == 1 && seen(b) != expected(warm, iters)) {
    fprintf(stderr, "shmem_bench: PE 1: %s left %ld, expected %ld\n", name, seen(b),
            expected(warm, iters));
    b->errors++;
  }
  if (b->me == 0) emit(b, name, sizeof(long), iters, secs * 1e6 / (double)iters);
}

/* Warm-up, calibration and timed phase each count from where the previous one stopped. */
static long ops_in_all_phases(long warm, long iters) {
  return 2 * warm + iters;
}
static long last_value(bench* b) {
  return *(volatile long*)b->value;
}
static long last_count(bench* b) {
  return *(volatile long*)b->counter;
}

static void bench_p_rate(bench* b) {
  *b->value = 0;
  rate_bench(b, "p_rate", phase_p_rate, last_value, ops_in_all_phases);
}

static void bench_add_rate(bench* b) {
  *b->counter = 0;
  rate_bench(b, "add_rate", phase_add_rate, last_count, ops_in_all_phases);
}

#ifdef SHMEM_SIGNAL_ADD
static long last_signal(bench* b) {
  return (long)*(volatile uint64_t*)b->sig;
}
/* The payload of the last batch: the phase's start, plus the batch's end index. */
static long last_batch_payload(long warm, long iters) {
  return 2 * warm + (iters - 1) / RATE_BATCH * RATE_BATCH + RATE_BATCH;
}
static long last_payload(bench* b) {
  return *(volatile long*)b->lat_dst;
}

static void bench_putsig_rate(bench* b) {
  *b->sig = 0;
  *(long*)b->lat_dst = 0;
  rate_bench(b, "putsig_rate", phase_putsig_rate, last_signal, ops_in_all_phases);
  if (b->me == 1 && last_payload(b) != last_batch_payload(b->opt.warmup, b->last_iters)) {
    fprintf(stderr, "shmem_bench: PE 1: putsig_rate payload %ld, expected %ld\n", last_payload(b),
            last_batch_payload(b->opt.warmup, b->last_iters));
    b->errors++;
  }
}

static void bench_putsig0_rate(bench* b) {
  *b->sig = 0;
  rate_bench(b, "putsig0_rate", phase_putsig0_rate, last_signal, ops_in_all_phases);
}
#else
static void bench_putsig_rate(bench* b) {
  skipped(b, "putsig_rate", "OpenSHMEM 1.5 put-with-signal");
}
static void bench_putsig0_rate(bench* b) {
  skipped(b, "putsig0_rate", "OpenSHMEM 1.5 put-with-signal");
}
#endif

#ifdef HAVE_OPENSHMEM_1_6
static void bench_sigadd_rate(bench* b) {
  *b->sig = 0;
  rate_bench(b, "sigadd_rate", phase_sigadd_rate, last_signal, ops_in_all_phases);
}
#else
static void bench_sigadd_rate(bench* b) {
  skipped(b, "sigadd_rate", "OpenSHMEM 1.6");
}
#endif

#ifdef HAVE_OPENSHMEM_1_6
/* Runs one rate phase, returns its microseconds per operation (PE 0's). */
static double batch_rate_row(bench* b, const char* name, phase_fn fn, int add) {
  *b->value = 0;
  *b->counter = 0;
  shmem_barrier_all();
  long warm = b->opt.warmup;
  long iters;
  double secs = measure(b, fn, warm, &iters);
  long seen = add ? last_count(b) : last_value(b);
  if (b->me == 1 && seen != ops_in_all_phases(warm, iters)) {
    fprintf(stderr, "shmem_bench: PE 1: %s left %ld, expected %ld\n", name, seen,
            ops_in_all_phases(warm, iters));
    b->errors++;
  }
  double usec = secs * 1e6 / (double)iters;
  if (b->me == 0) emit(b, name, sizeof(long), iters, usec);
  return usec;
}

static void bench_batch_rate(bench* b) {
  if (!have_peer(b, "batch_rate")) return;
  if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &batch_ctx) != 0) die(b, "shmem_ctx_create failed");
  double put_plain = batch_rate_row(b, "put8_rate", phase_put8_plain, 0);
  double put_batch = batch_rate_row(b, "put8_batch_rate", phase_put8_batch, 0);
  double add_plain = batch_rate_row(b, "add_rate_ctx", phase_add_plain, 1);
  double add_batch = batch_rate_row(b, "add_batch_rate", phase_add_batch, 1);
  if (b->me == 0)
    fprintf(stderr,
            "shmem_bench: batch session speedup (plain/batch time per op): "
            "8-byte put %.2fx, atomic_add %.2fx\n",
            put_plain / put_batch, add_plain / add_batch);
  shmem_ctx_destroy(batch_ctx);
  batch_ctx = SHMEM_CTX_DEFAULT;
}
#else
static void bench_batch_rate(bench* b) {
  skipped(b, "batch_rate", "OpenSHMEM 1.6");
}
#endif

/* Table order is run order. A benchmark runs when its name, its group or "all" is given. */
static const struct {
  const char *name, *group;
  void (*run)(bench* b);
} BENCHES[] = {
    {"memcpy", "memcpy", bench_memcpy},
    {"put_bw", "put", bench_put_bw},
    {"put_nbi_bw", "put", bench_put_nbi_bw},
    {"get_bw", "get", bench_get_bw},
    {"get_nbi_bw", "get", bench_get_nbi_bw},
    {"put_lat", "put_lat", bench_put_lat},
    {"pingpong", "pingpong", bench_pingpong},
    {"fetch_add", "atomic", bench_fetch_add},
    {"atomic_add", "atomic", bench_atomic_add},
    {"p_rate", "rate", bench_p_rate},
    {"add_rate", "rate", bench_add_rate},
    {"putsig_rate", "rate", bench_putsig_rate},
    {"putsig0_rate", "rate", bench_putsig0_rate},
    {"sigadd_rate", "rate", bench_sigadd_rate},
    {"batch_rate", "batch", bench_batch_rate},
    {"ibput_bw", "strided", bench_ibput},
    {"iput_columns_bw", "strided", bench_iput_columns},
    {"putmem_blocks_bw", "strided", bench_putmem_blocks},
    {"ibget_bw", "strided", bench_ibget},
    {"iget_columns_bw", "strided", bench_iget_columns},
    {"getmem_blocks_bw", "strided", bench_getmem_blocks},
    {"barrier", "barrier", bench_barrier},
};
enum { N_BENCHES = sizeof BENCHES / sizeof BENCHES[0] };

/* ------------------------------------------------------------------------------------------ */
/* Command line                                                                               */

static void usage(FILE* f) {
  fprintf(f,
          "usage: shmem_bench [options] [bench ...]\n"
          "benches (default all; run in this order):\n"
          "  memcpy               local single-thread memcpy on PE 0 (the ratio reference)\n"
          "  put = put_bw put_nbi_bw   shmem_putmem / shmem_putmem_nbi+quiet, PE 0 -> PE 1\n"
          "  get = get_bw get_nbi_bw   shmem_getmem / shmem_getmem_nbi+quiet, PE 0 <- PE 1\n"
          "  put_lat              8-byte shmem_putmem + shmem_quiet\n"
          "  pingpong             shmem_long_p / shmem_long_wait_until, half round trip\n"
          "  atomic = fetch_add atomic_add   shmem_long_atomic_fetch_add, _add + quiet\n"
          "  rate = p_rate add_rate putsig_rate putsig0_rate sigadd_rate   shmem_long_p,\n"
          "                       shmem_long_atomic_add, 8-byte and 0-byte\n"
          "                       shmem_putmem_signal_nbi, shmem_signal_add (1.6): a quiet\n"
          "                       per 16 ops\n"
          "  batch = batch_rate   8-byte shmem_ctx_long_put and shmem_ctx_long_atomic_add,\n"
          "                       PE 0 -> PE 1, a quiet per 256 ops, outside and inside a\n"
          "                       batch session (1.6): rows put8_rate, put8_batch_rate,\n"
          "                       add_rate_ctx, add_batch_rate; the speedups on stderr\n"
          "  strided = ibput_bw iput_columns_bw putmem_blocks_bw ibget_bw iget_columns_bw\n"
          "            getmem_blocks_bw   64-byte blocks with 64-byte gaps, PE 0 -> PE 1 (put)\n"
          "                       or PE 0 <- PE 1 (get): one shmem_ibput64/ibget64 (1.6), an\n"
          "                       iput64/iget64 per 8-byte column, a putmem/getmem per block\n"
          "  barrier              shmem_barrier_all over all PEs\n"
          "  all\n"
          "options:\n"
          "  -m SIZE   smallest transfer size (default 8; K/M/G suffixes allowed)\n"
          "  -M SIZE   largest transfer size (default 64M; needs 2*SIZE symmetric heap,\n"
          "            e.g. SHMEM_SYMMETRIC_SIZE=512M)\n"
          "  -f N      size step factor (default 2)\n"
          "  -n N      most timed iterations per measurement (default 1000000)\n"
          "  -N N      fewest timed iterations per measurement (default 5)\n"
          "  -w N      warm-up iterations, >= 1 (default 200; fewer for large sizes)\n"
          "  -t SEC    target timed seconds per measurement (default 0.05; 0: always -n)\n"
          "  -i NAME   value of the impl column (default: the IMPL_NAME define if built\n"
          "            with one, else shmem_info_get_name)\n"
          "  -H        do not print the CSV header line\n");
}

/* Accepts a number with an optional binary K/M/G suffix. */
static int parse_size(const char* s, size_t* out) {
  char* end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || s[0] == '-') return 0;
  unsigned shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    default:
      break;
  }
  if (*end != '\0' || v > (SIZE_MAX >> shift)) return 0;
  *out = (size_t)(v << shift);
  return 1;
}

static int parse_long(const char* s, long lo, long* out) {
  char* end;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo) return 0;
  *out = v;
  return 1;
}

static int parse_double(const char* s, double* out) {
  char* end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= 0)) return 0;
  *out = v;
  return 1;
}

static int select_bench(const char* arg, int* selected) {
  int found = 0;
  for (int i = 0; i < N_BENCHES; i++) {
    if (!strcmp(arg, "all") || !strcmp(arg, BENCHES[i].name) || !strcmp(arg, BENCHES[i].group)) {
      selected[i] = 1;
      found = 1;
    }
  }
  return found;
}

/* Returns -1 to run, else the exit status (0 for -h). Messages come from PE 0 only.
 * Options and benchmark names may come in any order: POSIX getopt stops at the first
 * non-option (glibc only permutes in non-POSIX mode), so names are collected by hand. */
static int parse_args(bench* b, int argc, char** argv, int* selected) {
  options* o = &b->opt;
  long factor = 2;
  int bad = 0, any = 0;
  opterr = b->me == 0; /* one complaint about a bad option, not one per PE */
  while (optind < argc) {
    int opt = getopt(argc, argv, "m:M:f:n:N:w:t:i:Hh");
    if (opt == -1) {
      const char* name = argv[optind++];
      if (!select_bench(name, selected)) {
        if (b->me == 0) fprintf(stderr, "shmem_bench: unknown benchmark '%s'\n", name);
        bad = 1;
      }
      any = 1;
      continue;
    }
    int ok = 1;
    switch (opt) {
      case 'm':
        ok = parse_size(optarg, &o->min_bytes);
        break;
      case 'M':
        ok = parse_size(optarg, &o->max_bytes);
        break;
      case 'f':
        ok = parse_long(optarg, 2, &factor);
        break;
      case 'n':
        ok = parse_long(optarg, 1, &o->max_iters);
        break;
      case 'N':
        ok = parse_long(optarg, 1, &o->min_iters);
        break;
      case 'w':
        ok = parse_long(optarg, 1, &o->warmup);
        break;
      case 't':
        ok = parse_double(optarg, &o->target_s);
        break;
      case 'i':
        o->impl = optarg;
        break;
      case 'H':
        o->header = 0;
        break;
      case 'h':
        if (b->me == 0) usage(stdout);
        return 0;
      default:
        bad = 1;
        break; /* getopt has said why */
    }
    if (!ok) {
      if (b->me == 0) fprintf(stderr, "shmem_bench: bad value '%s' for -%c\n", optarg, opt);
      bad = 1;
    }
  }
  o->factor = (unsigned long)factor;
  if (o->min_bytes == 0 || o->min_bytes > o->max_bytes || o->min_iters > o->max_iters) {
    if (b->me == 0) fprintf(stderr, "shmem_bench: need 0 < -m <= -M and -N <= -n\n");
    bad = 1;
  }
  if (!any) select_bench("all", selected);
  if (bad) {
    if (b->me == 0) usage(stderr);
    return 2;
  }
  return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                      */

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Precedence: -i, then IMPL_NAME (accepted bare, -DIMPL_NAME=oshmem, or quoted), then the
 * library's own name. The value must stay one CSV field: quotes are dropped, commas and
 * blanks become '_'. */
static void set_impl_name(bench* b) {
  char lib[SHMEM_MAX_NAME_LEN + 1] = "";
  const char* src = b->opt.impl;
#ifdef IMPL_NAME
  if (src == NULL) src = STRINGIFY(IMPL_NAME);
#endif
  if (src == NULL) {
    shmem_info_get_name(lib);
    lib[SHMEM_MAX_NAME_LEN] = '\0';
    src = lib;
  }
  size_t n = 0;
  for (; *src != '\0' && n < SHMEM_MAX_NAME_LEN; src++) {
    char c = *src;
    if (c != '"') b->impl[n++] = (c == ',' || c == ' ' || c == '\t' || c == '\n') ? '_' : c;
  }
  b->impl[n] = '\0';
  if (n == 0) strcpy(b->impl, "unknown");
}

static void alloc_control(bench* b) {
  b->slot = sym_alloc(b, CACHE_LINE, "control words");
  b->flag = sym_alloc(b, CACHE_LINE, "control words");
  b->counter = sym_alloc(b, CACHE_LINE, "control words");
  b->errs = sym_alloc(b, CACHE_LINE, "control words");
  b->value = sym_alloc(b, CACHE_LINE, "control words");
#ifdef SHMEM_SIGNAL_ADD
  b->sig = sym_alloc(b, CACHE_LINE, "control words");
  *b->sig = 0;
#endif
  b->lat_src = sym_alloc(b, CACHE_LINE, "latency buffers");
  b->lat_dst = sym_alloc(b, CACHE_LINE, "latency buffers");
  *b->slot = *b->flag = *b->counter = *b->errs = *b->value = 0;
  shmem_barrier_all();
}

/* Sums every PE's error count on PE 0. */
static long total_errors(bench* b) {
  if (b->errors) shmem_long_atomic_add(b->errs, b->errors, 0);
  shmem_barrier_all();
  return b->me == 0 ? *(volatile long*)b->errs : 0;
}

static void release(bench* b) {
  shmem_barrier_all(); /* shmem_free is collective; nobody may still be using the buffers */
  if (b->src != NULL) {
    shmem_free(b->dst);
    shmem_free(b->src);
  }
  shmem_free(b->lat_dst);
  shmem_free(b->lat_src);
#ifdef SHMEM_SIGNAL_ADD
  shmem_free(b->sig);
#endif
  shmem_free(b->value);
  shmem_free(b->errs);
  shmem_free(b->counter);
  shmem_free(b->flag);
  shmem_free(b->slot);
  free(b->priv_src);
  free(b->priv_dst);
}

int main(int argc, char** argv) {
  bench b = {0}; /* private state; only the pointers inside it refer to symmetric memory */
  b.opt = (options){
      .min_bytes = 8,
      .max_bytes = (size_t)64 << 20,
      .factor = 2,
      .max_iters = 1000000,
      .min_iters = 5,
      .warmup = 200,
      .target_s = 0.05,
      .header = 1,
  };
  int selected[N_BENCHES] = {0};

  shmem_init();
  b.me = shmem_my_pe();
  b.npes = shmem_n_pes();

  int status = parse_args(&b, argc, argv, selected);
  if (status >= 0) {
    shmem_finalize();
    return status;
  }
  set_impl_name(&b);
  alloc_control(&b);

  if (b.me == 0 && b.opt.header) print_header();
  for (int i = 0; i < N_BENCHES; i++) {
    if (selected[i]) BENCHES[i].run(&b);
  }

  long errors = total_errors(&b);
  if (errors) fprintf(stderr, "shmem_bench: %ld data check(s) failed\n", errors);
  release(&b);
  shmem_finalize();
  return errors ? 1 : 0;
}
