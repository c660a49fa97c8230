#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include "kernel/worker_pool.hpp"

namespace shmoe::kernel {
namespace {

TEST(WorkerPool, RunsSpmdWithIdsKindsAndBarriers) {
  WorkerPool pool(6);
  for (int round = 0; round < 50; ++round) {
    const WorkerCounts counts{round % 3, 1 + round % 4};
    std::vector<int> stage(counts.total(), 0);
    std::atomic<int> bad{0};
    std::vector<int> ids(counts.total(), -1);
    pool.launch(counts, [&](KernelContext& w) {
      ids[w.worker_id()] = w.kind() == WorkerKind::kMatrix ? w.kind_id() : 100 + w.kind_id();
      stage[w.worker_id()] = 1;
      w.barrier();
      for (int s : stage) bad += s != 1;  // everyone passed stage 1 before anyone reads
      w.barrier();
      stage[w.worker_id()] = 2;
    });
    EXPECT_EQ(bad.load(), 0);
    for (int i = 0; i < counts.total(); ++i) {
      EXPECT_EQ(stage[i], 2);
      EXPECT_EQ(ids[i], i < counts.matrix ? i : 100 + i - counts.matrix);
    }
  }
}

TEST(WorkerPool, RethrowsAWorkersExceptionAndStaysUsable) {
  WorkerPool pool(3);
  EXPECT_THROW(
      pool.launch({0, 3},
                  [](KernelContext& w) {
                    if (w.worker_id() == 1) throw std::runtime_error("boom");
                    w.barrier();  // the thrower drops out; the others must not wait forever
                  }),
      std::runtime_error);
  std::atomic<int> ran{0};
  pool.launch({1, 2}, [&](KernelContext&) { ++ran; });
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkerPool, OneWorkerRunsOnTheCallingThreadAndIsTimed) {
  WorkerPool pool(2);
  for (const WorkerCounts counts : {WorkerCounts{0, 1}, WorkerCounts{1, 0}}) {
    std::thread::id ran_on;
    WorkerKind kind = counts.matrix ? WorkerKind::kVector : WorkerKind::kMatrix;
    pool.launch(counts, [&](KernelContext& w) {
      ran_on = std::this_thread::get_id();
      kind = w.kind();
      EXPECT_EQ(w.worker_id(), 0);
      EXPECT_EQ(w.kind_id(), 0);
      EXPECT_EQ(w.kind_count(), 1);
      w.barrier();  // a barrier of one returns at once
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    EXPECT_EQ(kind, counts.matrix ? WorkerKind::kMatrix : WorkerKind::kVector);
    EXPECT_GE(pool.last_worker_seconds()[0], 0.002);
  }
  EXPECT_THROW(pool.launch({0, 1}, [](KernelContext&) { throw std::runtime_error("boom"); }),
               std::runtime_error);
}

TEST(WorkerPool, RefusesCountsOutsideThePool) {
  WorkerPool pool(2);
  EXPECT_THROW(pool.launch({2, 1}, [](KernelContext&) {}), std::invalid_argument);
  EXPECT_THROW(pool.launch({0, 0}, [](KernelContext&) {}), std::invalid_argument);
}

TEST(WorkerPool, DefaultCountsShareTheCores) {
  WorkerCounts one = default_worker_counts(1), many = default_worker_counts(64);
  EXPECT_GE(one.vector, 1);
  EXPECT_EQ(many.total(), 1);
  EXPECT_EQ(many.vector, 1);
}

}  // namespace
}  // namespace shmoe::kernel
