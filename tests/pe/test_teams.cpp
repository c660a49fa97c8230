// Team management: predefined teams, strided and 2-D splits (membership, numbering, translation),
// the error values of invalid arguments, exhausting and reusing team resources, team contexts
// and team barriers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "pe_test.hpp"
#include "team_helpers.hpp"

namespace shmoe::test {
namespace {

TEST(Teams, Predefined) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  EXPECT_EQ(shmem_team_my_pe(SHMEM_TEAM_WORLD), me);
  EXPECT_EQ(shmem_team_n_pes(SHMEM_TEAM_WORLD), n);
  // SHMEM_TEAM_SHARED: the PEs that share memory with this one, in world order (the tests split
  // hosts into evenly spaced groups, so the team holds all of them).
  const std::vector<bool> shared = expected_shared_memory_pes();
  std::vector<int> shared_pes;
  for (int pe = 0; pe < n; ++pe) {
    if (shared[pe]) shared_pes.push_back(pe);
  }
  const int my_shared_index =
      static_cast<int>(std::find(shared_pes.begin(), shared_pes.end(), me) - shared_pes.begin());
  EXPECT_EQ(shmem_team_my_pe(SHMEM_TEAM_SHARED), my_shared_index);
  EXPECT_EQ(shmem_team_n_pes(SHMEM_TEAM_SHARED), static_cast<int>(shared_pes.size()));
  auto* word = static_cast<int*>(shmem_malloc(sizeof(int)));
  for (int i = 0; i < static_cast<int>(shared_pes.size()); ++i) {
    EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD), shared_pes[i]);
    EXPECT_NE(shmem_ptr(word, shared_pes[i]), nullptr);
  }
  shmem_free(word);
  EXPECT_EQ(shmem_team_my_pe(SHMEM_TEAM_INVALID), -1);
  EXPECT_EQ(shmem_team_n_pes(SHMEM_TEAM_INVALID), -1);
  EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, SHMEM_TEAM_SHARED), my_shared_index);
  EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_INVALID, 0, SHMEM_TEAM_WORLD), -1);
  EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, 0, SHMEM_TEAM_INVALID), -1);
  EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, n, SHMEM_TEAM_WORLD), -1);
  EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, -1, SHMEM_TEAM_WORLD), -1);
  shmem_team_config_t config{-5};
  EXPECT_EQ(shmem_team_get_config(SHMEM_TEAM_WORLD, SHMEM_TEAM_NUM_CONTEXTS, &config), 0);
  EXPECT_EQ(config.num_contexts, 0);
  EXPECT_NE(shmem_team_get_config(SHMEM_TEAM_INVALID, SHMEM_TEAM_NUM_CONTEXTS, &config), 0);
  // A mask of 0 reads nothing: 0, even with no config to fill (OpenSHMEM 1.6).
  EXPECT_EQ(shmem_team_get_config(SHMEM_TEAM_WORLD, 0, nullptr), 0);
  EXPECT_NE(shmem_team_get_config(SHMEM_TEAM_WORLD, SHMEM_TEAM_NUM_CONTEXTS, nullptr), 0);
  shmem_team_t team = SHMEM_TEAM_INVALID;
  EXPECT_EQ(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &team), 0);
  EXPECT_EQ(team, SHMEM_TEAM_WORLD);
  EXPECT_EQ(shmem_team_sync(SHMEM_TEAM_WORLD), 0);
  EXPECT_EQ(shmem_team_sync(SHMEM_TEAM_SHARED), 0);
}

// Every (start, stride, size) that fits the world: membership, numbering and translation agree
// with the definition, and the team's barrier and configuration work.
TEST(Teams, SplitStridedAllShapes) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  for (int start = 0; start < n; ++start) {
    for (int stride = 1; stride <= n; ++stride) {
      for (int size = 1; start + (size - 1) * stride < n; ++size) {
        SCOPED_TRACE(testing::Message()
                     << "start " << start << " stride " << stride << " size " << size);
        shmem_team_config_t config{3};
        shmem_team_t t = SHMEM_TEAM_WORLD;
        ASSERT_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, start, stride, size, &config,
                                           SHMEM_TEAM_NUM_CONTEXTS, &t),
                  0);
        const bool member =
            me >= start && (me - start) % stride == 0 && (me - start) / stride < size;
        ASSERT_EQ(t != SHMEM_TEAM_INVALID, member);
        if (member) {
          EXPECT_EQ(shmem_team_my_pe(t), (me - start) / stride);
          EXPECT_EQ(shmem_team_n_pes(t), size);
          for (int i = 0; i < size; ++i) {
            EXPECT_EQ(shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD), start + i * stride);
          }
          for (int pe = 0; pe < n; ++pe) {
            const bool in =
                pe >= start && (pe - start) % stride == 0 && (pe - start) / stride < size;
            EXPECT_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, pe, t),
                      in ? (pe - start) / stride : -1);
          }
          shmem_team_config_t got{0};
          EXPECT_EQ(shmem_team_get_config(t, SHMEM_TEAM_NUM_CONTEXTS, &got), 0);
          EXPECT_EQ(got.num_contexts, 3);
          EXPECT_EQ(shmem_team_sync(t), 0);
          shmem_team_destroy(t);
          EXPECT_EQ(shmem_team_my_pe(t), -1) << "a destroyed team reads as invalid";
        }
      }
    }
  }
  shmem_barrier_all();
}

TEST(Teams, SplitInvalidArguments) {
  const int n = shmem_n_pes();
  struct Case {
    int start, stride, size;
  };
  for (Case c : {Case{0, 1, 0}, Case{-1, 1, 1}, Case{n, 1, 1}, Case{0, 1, n + 1}, Case{0, 0, 2},
                 Case{n - 1, 1, 2}}) {
    shmem_team_t t = SHMEM_TEAM_WORLD;
    EXPECT_NE(shmem_team_split_strided(SHMEM_TEAM_WORLD, c.start, c.stride, c.size, nullptr, 0, &t),
              0)
        << c.start << " " << c.stride << " " << c.size;
    EXPECT_EQ(t, SHMEM_TEAM_INVALID);
  }
  shmem_team_t t = SHMEM_TEAM_WORLD;
  EXPECT_NE(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, nullptr, 0, &t), 0);
  EXPECT_EQ(t, SHMEM_TEAM_INVALID);
  shmem_team_t x = SHMEM_TEAM_WORLD, y = SHMEM_TEAM_WORLD;
  EXPECT_NE(shmem_team_split_2d(SHMEM_TEAM_WORLD, 0, nullptr, 0, &x, nullptr, 0, &y), 0);
  EXPECT_EQ(x, SHMEM_TEAM_INVALID);
  EXPECT_EQ(y, SHMEM_TEAM_INVALID);
  shmem_barrier_all();
}

TEST(Teams, Split2d) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  for (int xrange = 1; xrange <= n + 1; ++xrange) {
    SCOPED_TRACE(testing::Message() << "xrange " << xrange);
    shmem_team_t x = SHMEM_TEAM_INVALID, y = SHMEM_TEAM_INVALID;
    ASSERT_EQ(shmem_team_split_2d(SHMEM_TEAM_WORLD, xrange, nullptr, 0, &x, nullptr, 0, &y), 0);
    const int xr = std::min(xrange, n);
    const int row = me / xr, col = me % xr;
    ASSERT_NE(x, SHMEM_TEAM_INVALID);
    ASSERT_NE(y, SHMEM_TEAM_INVALID);
    EXPECT_EQ(shmem_team_my_pe(x), col);
    EXPECT_EQ(shmem_team_n_pes(x), std::min(xr, n - row * xr));
    EXPECT_EQ(shmem_team_my_pe(y), row);
    EXPECT_EQ(shmem_team_n_pes(y), (n - col + xr - 1) / xr);
    for (int i = 0; i < shmem_team_n_pes(x); ++i) {
      EXPECT_EQ(shmem_team_translate_pe(x, i, SHMEM_TEAM_WORLD), row * xr + i);
    }
    for (int j = 0; j < shmem_team_n_pes(y); ++j) {
      EXPECT_EQ(shmem_team_translate_pe(y, j, SHMEM_TEAM_WORLD), j * xr + col);
      EXPECT_EQ(shmem_team_translate_pe(y, j, x), j == row ? col : -1);
    }
    EXPECT_EQ(shmem_team_sync(x), 0);
    EXPECT_EQ(shmem_team_sync(y), 0);
    shmem_team_destroy(x);
    shmem_team_destroy(y);
  }
  shmem_barrier_all();
}

// Team resources are finite: splitting until a split fails must fail on every PE at the same
// point, leave SHMEM_TEAM_INVALID, and destroying the teams must make room again.
TEST(Teams, ExhaustAndReuse) {
  std::vector<shmem_team_t> teams;
  for (int i = 0; i < 100; ++i) {
    shmem_team_t t = SHMEM_TEAM_WORLD;
    if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, shmem_n_pes(), nullptr, 0, &t) != 0) {
      EXPECT_EQ(t, SHMEM_TEAM_INVALID);
      break;
    }
    teams.push_back(t);
  }
  EXPECT_GE(teams.size(), 8u);
  EXPECT_LT(teams.size(), 100u) << "never ran out of team resources";
  int count = static_cast<int>(teams.size());
  int min_count = 0;
  shmem_int_min_reduce(SHMEM_TEAM_WORLD, &min_count, &count, 1);
  EXPECT_EQ(min_count, count) << "PEs ran out at different points";
  // Every team still works, then goes.
  for (shmem_team_t t : teams) {
    long one = 1, sum = 0;
    ASSERT_EQ(shmem_long_sum_reduce(t, &sum, &one, 1), 0);
    EXPECT_EQ(sum, shmem_n_pes());
    shmem_team_destroy(t);
  }
  // A reused slot starts clean: barriers and collectives work on the new teams.
  for (int round = 0; round < 3; ++round) {
    shmem_team_t t = SHMEM_TEAM_INVALID;
    ASSERT_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, shmem_n_pes(), nullptr, 0, &t), 0);
    long mine = shmem_my_pe(), max = -1;
    ASSERT_EQ(shmem_long_max_reduce(t, &max, &mine, 1), 0);
    EXPECT_EQ(max, shmem_n_pes() - 1);
    EXPECT_EQ(shmem_team_sync(t), 0);
    shmem_team_destroy(t);
  }
  shmem_barrier_all();
}

// A team barrier that let a member through early would show a stale round in some slot.
TEST(Teams, SyncIsABarrierOfTheTeam) {
  const int n = shmem_n_pes();
  auto* slots = static_cast<int*>(shmem_calloc(n, sizeof(int)));
  for (const TestTeam& tt : test_teams()) {
    if (tt.team != SHMEM_TEAM_INVALID) {
      SCOPED_TRACE(tt.name);
      const int size = shmem_team_n_pes(tt.team), my = shmem_team_my_pe(tt.team);
      for (int round = 1; round <= 100; ++round) {
        for (int j = 0; j < size; ++j) {
          shmem_int_p(&slots[my], round, shmem_team_translate_pe(tt.team, j, SHMEM_TEAM_WORLD));
        }
        ASSERT_EQ(shmem_team_sync(tt.team), 0);
        for (int j = 0; j < size; ++j) {
          ASSERT_EQ(std::atomic_ref<int>(slots[j]).load(), round) << "member " << j;
        }
        ASSERT_EQ(shmem_team_sync(tt.team), 0);
      }
    }
    shmem_barrier_all();
    for (int j = 0; j < n; ++j) slots[j] = 0;
    shmem_barrier_all();
  }
  shmem_free(slots);
}

TEST(Teams, Contexts) {
  const int n = shmem_n_pes();
  shmem_ctx_t ctx = SHMEM_CTX_INVALID;
  ASSERT_EQ(shmem_team_create_ctx(SHMEM_TEAM_WORLD, 0, &ctx), 0);
  shmem_team_t team = SHMEM_TEAM_INVALID;
  EXPECT_EQ(shmem_ctx_get_team(ctx, &team), 0);
  EXPECT_EQ(team, SHMEM_TEAM_WORLD);
  shmem_ctx_destroy(ctx);
  EXPECT_NE(shmem_team_create_ctx(SHMEM_TEAM_INVALID, 0, &ctx), 0);
  EXPECT_EQ(ctx, SHMEM_CTX_INVALID);
  // A team of the first PEs numbers them as the world does.
  shmem_team_t first = SHMEM_TEAM_INVALID;
  ASSERT_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, (n + 1) / 2, nullptr, 0, &first), 0);
  if (first != SHMEM_TEAM_INVALID) {
    ASSERT_EQ(shmem_team_create_ctx(first, 0, &ctx), 0);
    EXPECT_EQ(shmem_ctx_get_team(ctx, &team), 0);
    EXPECT_EQ(team, first);
    shmem_ctx_destroy(ctx);
    shmem_team_destroy(first);
  }
  shmem_barrier_all();
}

// A context on a strided team takes team PE numbers: team PE i is world PE start + i * stride.
TEST(Teams, ContextOnStridedTeamTranslatesPeNumbers) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  if (n < 2) GTEST_SKIP() << "needs an odd-numbered PE";
  long* x = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  shmem_team_t odds = SHMEM_TEAM_INVALID;
  ASSERT_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, n / 2, nullptr, 0, &odds), 0);
  if (odds != SHMEM_TEAM_INVALID) {
    shmem_ctx_t ctx = SHMEM_CTX_INVALID;
    ASSERT_EQ(shmem_team_create_ctx(odds, 0, &ctx), 0);
    const int my_index = shmem_team_my_pe(odds), size = shmem_team_n_pes(odds);
    // Add (my world PE + 1) at the next team member.
    shmem_ctx_long_atomic_add(ctx, x, me + 1, (my_index + 1) % size);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
  }
  shmem_barrier_all();
  if (odds != SHMEM_TEAM_INVALID) {
    const int size = shmem_team_n_pes(odds), my_index = shmem_team_my_pe(odds);
    const int prev_world = 1 + 2 * ((my_index + size - 1) % size);
    EXPECT_EQ(*x, prev_world + 1) << "world PE " << me;
    shmem_team_destroy(odds);
  } else {
    EXPECT_EQ(*x, 0) << "PEs outside the team receive nothing";
  }
  shmem_barrier_all();
  shmem_free(x);
}

// The C++ overloads of the type-generic names reach the typed routines.
TEST(Generic, CxxOverloads) {
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* x = static_cast<long*>(shmem_calloc(2, sizeof(long)));
  long v = me + 1;
  shmem_put(x, &v, 1, (me + 1) % n);
  shmem_atomic_add(&x[1], v, 0);
  shmem_barrier_all();
  EXPECT_EQ(shmem_g(x, me), (me + n - 1) % n + 1);
  double mine = me, sum = -1;
  EXPECT_EQ(shmem_sum_reduce(SHMEM_TEAM_WORLD, &sum, &mine, 1), 0);
  EXPECT_EQ(sum, n * (n - 1) / 2.0);
  EXPECT_EQ(shmem_sync(SHMEM_TEAM_WORLD), 0);
  if (me == 0) {
    EXPECT_EQ(shmem_atomic_fetch(&x[1], 0), long(n) * (n + 1) / 2);
  }
  shmem_barrier_all();
  shmem_free(x);
}

}  // namespace
}  // namespace shmoe::test
