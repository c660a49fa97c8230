/* Batch sessions (OpenSHMEM 1.6 section 9.9) that coalesce: inside one on a context, every PE
 * sends every other PE a random mix of small and large puts (blocking, _nbi, shmem_p), AMOs on
 * words of its own (set, add, and, or, xor, 32- and 64-bit) and on counters all PEs add to,
 * fetching AMOs, gets of what it wrote (read-your-writes), put-with-signals and signal_adds,
 * with fences and quiets between. Puts that overlap an unfenced earlier put get a fence first,
 * so every expectation holds under the specification's ordering rules, not only shmoe's.
 *
 * Each PE keeps its own expectation of what it wrote; counters all PEs add to are checked
 * against values every PE derives from the seed. The signal totals are awaited before any quiet
 * or barrier: the session's messages must go out from the waits alone. The seed is printed (and
 * read from BATCH_SESSION_SEED when set, to reproduce a run). Exits non-zero on a wrong result. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"

enum {
  kRegion = 2048, /* bytes of puts from one PE to one PE */
  kWords = 16,    /* 64-bit words one PE's AMOs own on each PE */
  kWords32 = 16,  /* 32-bit words likewise */
  kCounters = 8,  /* counters every PE adds to */
  kRounds = 24,   /* rounds of operations to every other PE */
  kOpsPerRound = 24,
  kSignalSlot = 64, /* bytes of each put-with-signal's data */
  kPool = 4096      /* source bytes of _nbi puts, never written after they are made */
};

static int me, npes;
static uint64_t seed;

static uint64_t splitmix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* What `src` adds to counter k on `dst` in round r: every PE can work it out. */
static uint64_t counter_addend(int src, int dst, int round, int k) {
  uint64_t state =
      seed ^ ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)round << 8) ^ (uint64_t)k;
  return splitmix(&state) % 100000;
}

/* The symmetric data: indexed by the PE that writes it. */
static uint8_t (*region)[kRegion];
static uint64_t (*words)[kWords];
static uint32_t (*words32)[kWords32];
static uint64_t* counters;
static uint64_t* signals; /* [npes] */
static uint8_t (*signal_data)[kRounds][kSignalSlot];
static uint8_t pool[kPool];

/* This PE's expectations of what it wrote on each PE. */
static uint8_t (*expect_region)[kRegion];
static uint64_t (*expect_words)[kWords];
static uint32_t (*expect_words32)[kWords32];
static uint8_t (*expect_signal_data)[kRounds][kSignalSlot];
/* Bytes put to each PE, and its words changed by AMOs other than adds, since the last fence. */
static uint8_t (*dirty)[kRegion];
static uint8_t (*dirty_words)[kWords];

static void forget_dirty(void) {
  memset(dirty, 0, (size_t)npes * kRegion);
  memset(dirty_words, 0, (size_t)npes * kWords);
}

static void fence(shmem_ctx_t ctx) {
  shmem_ctx_fence(ctx);
  forget_dirty();
}

static void put_bytes(shmem_ctx_t ctx, uint64_t* rng, int pe, size_t offset, size_t bytes) {
  for (size_t i = offset; i < offset + bytes; ++i) {
    if (dirty[pe][i]) {
      fence(ctx);
      break;
    }
  }
  uint8_t* dest = &region[me][offset];
  const int how = (int)(splitmix(rng) % 3);
  if (how == 0 && bytes == 8 && offset % 8 == 0) {
    uint64_t value = splitmix(rng);
    shmem_ctx_uint64_p(ctx, (uint64_t*)dest, value, pe);
    memcpy(&expect_region[pe][offset], &value, 8);
  } else if (how == 1) {
    const size_t from = (size_t)(splitmix(rng) % (kPool - bytes));
    shmem_ctx_putmem_nbi(ctx, dest, &pool[from], bytes, pe);
    memcpy(&expect_region[pe][offset], &pool[from], bytes);
  } else {
    uint8_t source[kRegion];
    for (size_t i = 0; i < bytes; ++i) source[i] = (uint8_t)splitmix(rng);
    shmem_ctx_putmem(ctx, dest, source, bytes, pe);
    memcpy(&expect_region[pe][offset], source, bytes);
    memset(source, 0xEE, bytes); /* a blocking put's source may change on return */
  }
  memset(&dirty[pe][offset], 1, bytes);
}

static void own_word_amo(shmem_ctx_t ctx, uint64_t* rng, int pe) {
  const int j = (int)(splitmix(rng) % kWords);
  uint64_t* word = &words[me][j];
  uint64_t* want = &expect_words[pe][j];
  const uint64_t v = splitmix(rng);
  const int op = (int)(splitmix(rng) % 8);
  /* Two AMOs on one word that do not commute are ordered by a fence; adds commute, and a
   * fetching AMO reads what this context wrote before it (shmoe's read-your-writes). */
  const int adds = op == 1 || op == 2 || op == 7;
  if (op != 6 && (!adds || dirty_words[pe][j] == 2) && dirty_words[pe][j] != 0) fence(ctx);
  if (op != 6) dirty_words[pe][j] = adds && dirty_words[pe][j] != 2 ? 1 : 2;
  switch (op) {
    case 0:
      shmem_ctx_uint64_atomic_set(ctx, word, v, pe);
      *want = v;
      break;
    case 1:
      shmem_ctx_uint64_atomic_add(ctx, word, v, pe);
      *want += v;
      break;
    case 2:
      shmem_ctx_uint64_atomic_inc(ctx, word, pe);
      *want += 1;
      break;
    case 3:
      shmem_ctx_uint64_atomic_and(ctx, word, v | (v << 7), pe);
      *want &= v | (v << 7);
      break;
    case 4:
      shmem_ctx_uint64_atomic_or(ctx, word, v & (v >> 5), pe);
      *want |= v & (v >> 5);
      break;
    case 5:
      shmem_ctx_uint64_atomic_xor(ctx, word, v, pe);
      *want ^= v;
      break;
    case 6: {
      const uint64_t old = shmem_ctx_uint64_atomic_fetch(ctx, word, pe);
      CHECK(old == *want);
      break;
    }
    default: {
      const uint64_t old = shmem_ctx_uint64_atomic_fetch_add(ctx, word, v, pe);
      CHECK(old == *want);
      *want += v;
    }
  }
  const int k = (int)(splitmix(rng) % kWords32);
  const uint32_t v32 = (uint32_t)splitmix(rng);
  shmem_ctx_uint32_atomic_add(ctx, &words32[me][k], v32, pe);
  expect_words32[pe][k] += v32;
}

static void get_and_check(shmem_ctx_t ctx, uint64_t* rng, int pe) {
  const size_t bytes = 1 + (size_t)(splitmix(rng) % 300);
  const size_t offset = (size_t)(splitmix(rng) % (kRegion - bytes));
  uint8_t got[kRegion];
  shmem_ctx_getmem(ctx, got, &region[me][offset], bytes, pe);
  CHECK(memcmp(got, &expect_region[pe][offset], bytes) == 0);
}

/* One round to `pe`: random operations, then the round's counter adds, put-with-signal and
 * signal_add, whose counts every PE knows. */
static void round_to(shmem_ctx_t ctx, uint64_t* rng, int pe, int round) {
  for (int op = 0; op < kOpsPerRound; ++op) {
    const uint64_t pick = splitmix(rng) % 100;
    if (pick < 45) {
      /* mostly small enough to be held back (256 bytes by default), some not */
      const size_t bytes = pick < 5    ? 257 + (size_t)(splitmix(rng) % 500)
                           : pick < 15 ? 8
                                       : 1 + (size_t)(splitmix(rng) % 256);
      const size_t offset = bytes == 8 ? 8 * (size_t)(splitmix(rng) % (kRegion / 8))
                                       : (size_t)(splitmix(rng) % (kRegion - bytes));
      put_bytes(ctx, rng, pe, offset, bytes);
    } else if (pick < 80) {
      own_word_amo(ctx, rng, pe);
    } else if (pick < 90) {
      get_and_check(ctx, rng, pe);
    } else if (pick < 97) {
      fence(ctx);
    } else {
      /* Complete, so another context (the default one) reads it too. */
      shmem_ctx_quiet(ctx);
      forget_dirty();
      uint8_t got[kRegion];
      shmem_getmem(got, region[me], kRegion, pe);
      CHECK(memcmp(got, expect_region[pe], kRegion) == 0);
    }
  }
  for (int k = 0; k < kCounters; ++k) {
    shmem_ctx_uint64_atomic_add(ctx, &counters[k], counter_addend(me, pe, round, k), pe);
  }
  uint8_t payload[kSignalSlot];
  for (int i = 0; i < kSignalSlot; ++i) payload[i] = (uint8_t)splitmix(rng);
  shmem_ctx_putmem_signal_nbi(ctx, signal_data[me][round], payload, kSignalSlot, &signals[me],
                              (uint64_t)round + 1, SHMEM_SIGNAL_ADD, pe);
  memcpy(expect_signal_data[pe][round], payload, kSignalSlot);
  shmem_ctx_signal_add(ctx, &signals[me], 1000, pe);
}

static void* calloc_or_die(size_t n, size_t size) {
  void* p = calloc(n, size);
  if (p == NULL) abort();
  return p;
}

int main(void) {
  shmem_init();
  me = shmem_my_pe();
  npes = shmem_n_pes();
  static uint64_t shared_seed;
  if (me == 0) {
    const char* given = getenv("BATCH_SESSION_SEED");
    shared_seed =
        given != NULL ? strtoull(given, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    printf("test_batch_session: seed %llu (BATCH_SESSION_SEED reproduces it)\n",
           (unsigned long long)shared_seed);
    fflush(stdout);
  }
  shmem_barrier_all();
  seed = shmem_uint64_g(&shared_seed, 0);

  region = shmem_calloc((size_t)npes, sizeof *region);
  words = shmem_calloc((size_t)npes, sizeof *words);
  words32 = shmem_calloc((size_t)npes, sizeof *words32);
  counters = shmem_calloc(kCounters, sizeof *counters);
  signals = shmem_calloc((size_t)npes, sizeof *signals);
  signal_data = shmem_calloc((size_t)npes, sizeof *signal_data);
  expect_region = calloc_or_die((size_t)npes, sizeof *expect_region);
  expect_words = calloc_or_die((size_t)npes, sizeof *expect_words);
  expect_words32 = calloc_or_die((size_t)npes, sizeof *expect_words32);
  expect_signal_data = calloc_or_die((size_t)npes, sizeof *expect_signal_data);
  dirty = calloc_or_die((size_t)npes, sizeof *dirty);
  dirty_words = calloc_or_die((size_t)npes, sizeof *dirty_words);
  uint64_t rng = seed ^ (0x51ED5EEDULL * (uint64_t)(me + 1));
  for (int i = 0; i < kPool; ++i) pool[i] = (uint8_t)splitmix(&rng);

  shmem_ctx_t ctx;
  CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0);
  shmem_barrier_all();

  const shmem_ctx_session_config_t config = {.total_ops = (size_t)kRounds * kOpsPerRound};
  shmem_ctx_session_start(ctx, SHMEM_CTX_SESSION_BATCH, &config, SHMEM_CTX_SESSION_TOTAL_OPS);
  for (int round = 0; round < kRounds; ++round) {
    for (int step = 1; step < npes; ++step) round_to(ctx, &rng, (me + step) % npes, round);
  }
  shmem_ctx_session_stop(ctx);

  /* Before any quiet or barrier: the signals, and the data each put-with-signal carried. */
  uint64_t signal_total = 0;
  for (int r = 0; r < kRounds; ++r) signal_total += (uint64_t)r + 1 + 1000;
  for (int src = 0; src < npes; ++src) {
    if (src == me) continue;
    shmem_signal_wait_until(&signals[src], SHMEM_CMP_EQ, signal_total);
  }
  shmem_ctx_quiet(ctx);
  shmem_barrier_all();

  /* What this PE wrote on each PE, read back; and what every PE added to this PE's counters. */
  for (int pe = 0; pe < npes; ++pe) {
    if (pe == me) continue;
    uint8_t got[kRegion];
    shmem_getmem(got, region[me], kRegion, pe);
    CHECK(memcmp(got, expect_region[pe], kRegion) == 0);
    uint64_t got_words[kWords];
    shmem_getmem(got_words, words[me], sizeof got_words, pe);
    CHECK(memcmp(got_words, expect_words[pe], sizeof got_words) == 0);
    uint32_t got_words32[kWords32];
    shmem_getmem(got_words32, words32[me], sizeof got_words32, pe);
    CHECK(memcmp(got_words32, expect_words32[pe], sizeof got_words32) == 0);
    static uint8_t got_signal_data[kRounds][kSignalSlot];
    shmem_getmem(got_signal_data, signal_data[me], sizeof got_signal_data, pe);
    CHECK(memcmp(got_signal_data, expect_signal_data[pe], sizeof got_signal_data) == 0);
  }
  for (int k = 0; k < kCounters; ++k) {
    uint64_t want = 0;
    for (int src = 0; src < npes; ++src) {
      if (src == me) continue;
      for (int r = 0; r < kRounds; ++r) want += counter_addend(src, me, r, k);
    }
    CHECK(counters[k] == want);
  }

  shmem_ctx_destroy(ctx);

  /* A session on the default context left open across shmem_barrier_all, which completes it. */
  static uint64_t from_prev, adds;
  shmem_barrier_all();
  shmem_ctx_session_start(SHMEM_CTX_DEFAULT, SHMEM_CTX_SESSION_BATCH, NULL, 0);
  shmem_uint64_p(&from_prev, (uint64_t)me + 7, (me + 1) % npes);
  for (int pe = 0; pe < npes; ++pe) shmem_uint64_atomic_add(&adds, (uint64_t)me + 1, pe);
  shmem_barrier_all();
  CHECK(from_prev == (uint64_t)((me + npes - 1) % npes) + 7);
  CHECK(adds == (uint64_t)npes * (uint64_t)(npes + 1) / 2);
  shmem_ctx_session_stop(SHMEM_CTX_DEFAULT);
  shmem_barrier_all();
  if (failures != 0)
    fprintf(stderr, "PE %d: %d checks failed (seed %llu)\n", me, failures,
            (unsigned long long)seed);
  shmem_finalize();
  return failures == 0 ? 0 : 1;
}
