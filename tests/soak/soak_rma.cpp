// RMA, atomics and barriers under random shapes. Every step ends with every PE past at least one
// barrier, which the stop protocol in soak_main.cpp relies on.
#include <fmt/format.h>
#include <shmem.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "soak.hpp"

namespace shmoe::soak {
namespace {

constexpr std::size_t kMaxBytes = 1u << 20;  // large enough for glibc's non-temporal copies
constexpr std::size_t kGuard = 64;           // canary bytes each side of every transfer
constexpr std::size_t kBufferBytes = kMaxBytes + 2 * kGuard + 64;
constexpr std::uint8_t kCanary = 0xA5;
constexpr int kCounters = 16;

// Symmetric: transfer targets/sources, the put_signal word, atomic counters, the ticket checks
// and the barrier stamps. Allocated once, so the steps also soak the reuse of the same memory.
struct Buffers {
  std::uint8_t* window = nullptr;
  std::uint64_t* signal = nullptr;
  std::uint64_t* counters = nullptr;
  std::uint64_t* ticket = nullptr;
  std::uint64_t* ticket_seen = nullptr;  // one slot per ticket, on PE 0
  std::uint64_t* stamps = nullptr;       // one slot per PE
};
Buffers g;
constexpr std::size_t kMaxTickets = 1 << 14;

// The byte at index i of what PE `src` sends in this step.
std::uint8_t pattern(const Soak& s, int src, std::size_t i) {
  return static_cast<std::uint8_t>(s.hash(0x5157, static_cast<std::uint64_t>(src), i / 8) >>
                                   (8 * (i % 8)));
}

void fill_pattern(const Soak& s, int src, std::uint8_t* p, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) p[i] = pattern(s, src, i);
}

// Checks the transferred bytes and that the canaries around them were not touched.
void check_transfer(const Soak& s, const char* op, int src, const std::uint8_t* region,
                    std::size_t len) {
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (region[-1 - static_cast<std::ptrdiff_t>(i)] != kCanary || region[len + i] != kCanary) {
      s.fail(op, fmt::format("a write outside the {}-byte transfer from PE {} (guard byte {})", len,
                             src, i));
    }
  }
  for (std::size_t i = 0; i < len; ++i) {
    if (region[i] != pattern(s, src, i)) {
      s.fail(op, fmt::format("byte {} of {} from PE {} is {:#04x}, expected {:#04x}", i, len, src,
                             region[i], pattern(s, src, i)));
    }
  }
}

// A length spread over every order of magnitude up to kMaxBytes, and an offset that is often
// unaligned; variants that move 64-bit words get whole aligned words.
struct Shape {
  std::size_t offset, len;
  int shift, variant;
};

Shape draw_shape(Soak& s, int variants) {
  Shape sh{};
  const auto magnitude = s.draw(0, 20);
  sh.len =
      static_cast<std::size_t>(s.draw(magnitude == 0 ? 0 : 1u << (magnitude - 1), 1u << magnitude));
  sh.offset = kGuard + static_cast<std::size_t>(s.draw(0, 63));
  sh.shift = s.n == 1 ? 0 : static_cast<int>(s.draw(1, static_cast<std::uint64_t>(s.n - 1)));
  sh.variant = static_cast<int>(s.draw(0, static_cast<std::uint64_t>(variants - 1)));
  if (sh.variant == 2) {  // 64-bit elements
    sh.offset = (sh.offset + 7) / 8 * 8;
    sh.len = sh.len / 8 * 8;
  }
  return sh;
}

}  // namespace

void init_rma_buffers() {
  g.window = static_cast<std::uint8_t*>(shmem_malloc(kBufferBytes));
  g.signal = static_cast<std::uint64_t*>(shmem_calloc(1, sizeof(std::uint64_t)));
  g.counters = static_cast<std::uint64_t*>(shmem_calloc(kCounters, sizeof(std::uint64_t)));
  g.ticket = static_cast<std::uint64_t*>(shmem_calloc(1, sizeof(std::uint64_t)));
  g.ticket_seen = static_cast<std::uint64_t*>(shmem_calloc(kMaxTickets, sizeof(std::uint64_t)));
  g.stamps = static_cast<std::uint64_t*>(shmem_calloc(shmem_n_pes(), sizeof(std::uint64_t)));
  shmem_barrier_all();
}

void free_rma_buffers() {
  shmem_barrier_all();
  shmem_free(g.stamps);
  shmem_free(g.ticket_seen);
  shmem_free(g.ticket);
  shmem_free(g.counters);
  shmem_free(g.signal);
  shmem_free(g.window);
}

// Each PE puts a block into PE (me + shift); the receiver checks it after a barrier, or, for
// put-with-signal, after waiting for the signal alone (the data must be visible by then).
void step_put(Soak& s) {
  const Shape sh = draw_shape(s, 4);
  const int dst = (s.me + sh.shift) % s.n;
  const int src = (s.me - sh.shift + s.n) % s.n;
  std::memset(g.window, kCanary, kBufferBytes);
  std::vector<std::uint8_t> out(sh.len + 8);
  fill_pattern(s, s.me, out.data(), sh.len);
  shmem_barrier_all();  // every window is reset before anyone writes into it
  std::uint8_t* target = g.window + sh.offset;
  switch (sh.variant) {
    case 0:
      shmem_putmem(target, out.data(), sh.len, dst);
      break;
    case 1:
      shmem_putmem_nbi(target, out.data(), sh.len, dst);
      shmem_quiet();
      break;
    case 2: {
      std::vector<std::uint64_t> words(sh.len / 8);
      std::memcpy(words.data(), out.data(), sh.len);
      shmem_uint64_put(reinterpret_cast<std::uint64_t*>(target), words.data(), words.size(), dst);
      break;
    }
    default:
      shmem_putmem_signal(target, out.data(), sh.len, g.signal, s.step, SHMEM_SIGNAL_SET, dst);
      break;
  }
  if (sh.variant == 3) {
    shmem_signal_wait_until(g.signal, SHMEM_CMP_EQ, s.step);
  } else {
    shmem_barrier_all();
  }
  check_transfer(s, "put", src, target, sh.len);
  shmem_barrier_all();  // nobody resets a window another PE still reads
}

// Each PE fills its own window, then reads PE (me + shift)'s into private memory.
void step_get(Soak& s) {
  const Shape sh = draw_shape(s, 4);
  const int from = (s.me + sh.shift) % s.n;
  fill_pattern(s, s.me, g.window + sh.offset, sh.len);
  shmem_barrier_all();
  std::vector<std::uint8_t> in(sh.len + 2 * kGuard, kCanary);
  std::uint8_t* region = in.data() + kGuard;
  const std::uint8_t* remote = g.window + sh.offset;
  switch (sh.variant) {
    case 0:
      shmem_getmem(region, remote, sh.len, from);
      break;
    case 1:
      shmem_getmem_nbi(region, remote, sh.len, from);
      shmem_quiet();
      break;
    case 2: {
      std::vector<std::uint64_t> words(sh.len / 8);
      shmem_uint64_get(words.data(), reinterpret_cast<const std::uint64_t*>(remote), words.size(),
                       from);
      std::memcpy(region, words.data(), sh.len);
      break;
    }
    default:  // element-wise; short, or it would dominate the run time
      for (std::size_t i = 0; i < std::min<std::size_t>(sh.len, 4096); ++i)
        region[i] = static_cast<std::uint8_t>(shmem_uint8_g(remote + i, from));
      if (sh.len > 4096) shmem_getmem(region + 4096, remote + 4096, sh.len - 4096, from);
      break;
  }
  check_transfer(s, "get", from, region, sh.len);
  shmem_barrier_all();  // the windows are refilled next time only once every read is done
}

namespace {

struct AtomicOp {
  int pe, index, kind;
  std::uint64_t value;
};

// PE `p`'s i-th atomic in this step: any PE can work out every PE's operations.
AtomicOp atomic_op(const Soak& s, int p, std::uint64_t i) {
  const std::uint64_t h = s.hash(0xA70, static_cast<std::uint64_t>(p), i);
  return {static_cast<int>(h % static_cast<std::uint64_t>(s.n)),
          static_cast<int>((h >> 16) % kCounters), static_cast<int>((h >> 24) % 4),
          (h >> 32) % 1000};
}

std::uint64_t contribution(const AtomicOp& op) {
  return op.kind == 1 ? 1 : op.value;
}

// Final value of every counter on every PE: [pe * kCounters + index].
std::vector<std::uint64_t> expected_totals(const Soak& s, std::uint64_t ops) {
  std::vector<std::uint64_t> total(static_cast<std::size_t>(s.n) * kCounters, 0);
  for (int p = 0; p < s.n; ++p) {
    for (std::uint64_t i = 0; i < ops; ++i) {
      const AtomicOp op = atomic_op(s, p, i);
      total[static_cast<std::size_t>(op.pe) * kCounters + op.index] += contribution(op);
    }
  }
  return total;
}

// Applies one operation. Counters only grow, so any value a fetch returns plus what this PE
// adds can never exceed the counter's final total.
void apply(const Soak& s, const AtomicOp& op, std::uint64_t final_total) {
  std::uint64_t* counter = g.counters + op.index;
  std::uint64_t seen = 0;
  switch (op.kind) {
    case 0:
      shmem_uint64_atomic_add(counter, op.value, op.pe);
      return;
    case 1:
      shmem_uint64_atomic_inc(counter, op.pe);
      return;
    case 2:
      seen = shmem_uint64_atomic_fetch_add(counter, op.value, op.pe);
      break;
    default:  // an add built from compare-and-swap, which must never lose a race
      seen = shmem_uint64_atomic_fetch(counter, op.pe);
      for (;;) {
        const std::uint64_t prev =
            shmem_uint64_atomic_compare_swap(counter, seen, seen + op.value, op.pe);
        if (prev == seen) break;
        seen = prev;
      }
      break;
  }
  if (seen + op.value > final_total) {
    s.fail("atomics", fmt::format("a fetch from counter {} on PE {} returned {}, but adding {} "
                                  "overshoots its final total {}",
                                  op.index, op.pe, seen, op.value, final_total));
  }
}

// Every fetch_inc on PE 0's ticket returns a different number, and together they are exactly
// 0..total-1: each PE marks the tickets it drew on PE 0, which checks that each was marked once.
void check_tickets(Soak& s, std::uint64_t per_pe) {
  for (std::uint64_t i = 0; i < per_pe; ++i) {
    const std::uint64_t t = shmem_uint64_atomic_fetch_inc(g.ticket, 0);
    if (t >= kMaxTickets) s.fail("atomics", fmt::format("ticket {} is out of range", t));
    shmem_uint64_atomic_inc(g.ticket_seen + t, 0);
  }
  shmem_barrier_all();
  if (s.me == 0) {
    const std::uint64_t total = per_pe * static_cast<std::uint64_t>(s.n);
    if (*g.ticket != total)
      s.fail("atomics", fmt::format("ticket counter is {}, expected {}", *g.ticket, total));
    for (std::uint64_t t = 0; t < total; ++t) {
      if (g.ticket_seen[t] != 1)
        s.fail("atomics", fmt::format("ticket {} was drawn {} times", t, g.ticket_seen[t]));
    }
    std::memset(g.ticket_seen, 0, total * sizeof(std::uint64_t));
    *g.ticket = 0;
  }
}

}  // namespace

void step_atomics(Soak& s) {
  const std::uint64_t ops = s.draw(1, 300);
  const std::vector<std::uint64_t> total = expected_totals(s, ops);
  for (std::uint64_t i = 0; i < ops; ++i) {
    const AtomicOp op = atomic_op(s, s.me, i);
    apply(s, op, total[static_cast<std::size_t>(op.pe) * kCounters + op.index]);
  }
  check_tickets(s, s.draw(0, kMaxTickets / 64));  // includes a barrier: every atomic is done
  for (int c = 0; c < kCounters; ++c) {
    const std::uint64_t want = total[static_cast<std::size_t>(s.me) * kCounters + c];
    if (g.counters[c] != want) {
      s.fail("atomics", fmt::format("counter {} is {}, expected {} after {} ops per PE", c,
                                    g.counters[c], want, ops));
    }
  }
  shmem_barrier_all();  // every PE checked before any counter is reset
  std::memset(g.counters, 0, kCounters * sizeof(std::uint64_t));
  shmem_barrier_all();
}

// A barrier must complete every put issued before it: each PE stamps its slot on every PE, and
// after the barrier every slot on every PE must carry this round's stamp.
void step_barriers(Soak& s) {
  const std::uint64_t rounds = s.draw(1, 16);
  for (std::uint64_t r = 0; r < rounds; ++r) {
    const std::uint64_t stamp = s.step * 64 + r;
    for (int k = 0; k < s.n; ++k) {
      const int pe = (s.me + k) % s.n;  // staggered, so PEs do not all hit PE 0 first
      shmem_uint64_p(g.stamps + s.me, stamp, pe);
    }
    shmem_barrier_all();
    for (int p = 0; p < s.n; ++p) {
      if (g.stamps[p] != stamp) {
        s.fail("barriers", fmt::format("round {}: slot of PE {} holds {}, expected {}", r, p,
                                       g.stamps[p], stamp));
      }
    }
    shmem_barrier_all();  // nobody stamps round r+1 while a PE still checks round r
  }
}

}  // namespace shmoe::soak
