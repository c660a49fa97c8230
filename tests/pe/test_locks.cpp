// Distributed locks: mutual exclusion under contention, test_lock, and FIFO hand-over.
#include <gtest/gtest.h>

#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

// A read-modify-write of a counter on PE 0 made of a separate get and put: without mutual
// exclusion, increments get lost as soon as two PEs overlap.
TEST(Lock, ProtectsReadModifyWrite) {
  const int n = shmem_n_pes();
  long* lock = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  long* counter = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  const int iterations = 300;
  for (int i = 0; i < iterations; ++i) {
    shmem_set_lock(lock);
    long v = shmem_long_g(counter, 0);
    if (i % 16 == 0) sched_yield();  // widen the window a broken lock would let others into
    shmem_long_p(counter, v + 1, 0);
    shmem_clear_lock(lock);
  }
  shmem_barrier_all();
  EXPECT_EQ(shmem_long_g(counter, 0), long(n) * iterations);
  shmem_barrier_all();
  shmem_free(counter);
  shmem_free(lock);
}

TEST(Lock, TestLockSeesTheHolder) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* lock = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  if (me == 0) shmem_set_lock(lock);
  shmem_barrier_all();
  if (me != 0) {
    EXPECT_EQ(shmem_test_lock(lock), 1) << "acquired a lock PE 0 holds";
  }
  shmem_barrier_all();
  if (me == 0) shmem_clear_lock(lock);
  shmem_barrier_all();
  // Free again: exactly one PE's test_lock wins while everyone tries once.
  int* wins = static_cast<int*>(shmem_calloc(1, sizeof(int)));
  int won = shmem_test_lock(lock) == 0;
  if (won) shmem_int_atomic_inc(wins, 0);
  shmem_barrier_all();
  EXPECT_EQ(shmem_int_g(wins, 0), 1);
  shmem_barrier_all();
  if (won) shmem_clear_lock(lock);
  // And then it is free for set_lock.
  shmem_set_lock(lock);
  shmem_clear_lock(lock);
  shmem_barrier_all();
  (void)n;
  shmem_free(wins);
  shmem_free(lock);
}

// Waiters get the lock in the order they queued. White-box: the low 32 bits of the lock word on
// PE 0 hold the queue's tail (PE + 1), so PE k queues once it sees PE k-1 at the tail; PE 0,
// the first holder, lets go once all have queued, and every holder logs its number on PE 0.
TEST(Lock, HandsOverInArrivalOrder) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* lock = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  int* log = static_cast<int*>(shmem_calloc(n + 1, sizeof(int)));
  int* next = static_cast<int*>(shmem_calloc(1, sizeof(int)));
  auto tail = [&] { return static_cast<int>(shmem_long_atomic_fetch(lock, 0) & 0xffffffff); };
  if (me == 0) shmem_set_lock(lock);
  shmem_barrier_all();
  if (me != 0) {
    while (tail() != me) sched_yield();  // PE me-1 is queued
    shmem_set_lock(lock);
  } else {
    while (tail() != n) sched_yield();  // everyone is queued
  }
  shmem_int_p(&log[shmem_int_atomic_fetch_inc(next, 0)], me, 0);
  shmem_clear_lock(lock);
  shmem_barrier_all();
  if (me == 0) {
    for (int k = 0; k < n; ++k) EXPECT_EQ(log[k], k) << "holder number " << k;
  }
  shmem_barrier_all();
  shmem_free(next);
  shmem_free(log);
  shmem_free(lock);
}

}  // namespace
}  // namespace shmoe::test
