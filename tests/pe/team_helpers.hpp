// Teams the collective tests run on: the world, strided halves, the rows and columns of a 2-D
// split and a team split from a split. Every PE builds the same list (the splits are collective);
// a PE not in a team holds SHMEM_TEAM_INVALID for it.
#pragma once

#include <shmem.h>

#include <string>
#include <vector>

namespace shmoe::test {

struct TestTeam {
  std::string name;
  shmem_team_t team;
};

inline std::vector<TestTeam> make_test_teams() {
  const int n = shmem_n_pes();
  std::vector<TestTeam> teams = {{"world", SHMEM_TEAM_WORLD}};
  shmem_team_t t = SHMEM_TEAM_INVALID;
  shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, nullptr, 0, &t);
  teams.push_back({"evens", t});
  if (n >= 2) {
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, n / 2, nullptr, 0, &t);
    teams.push_back({"odds", t});
  }
  if (n >= 3) {  // every third PE from the second: a stride that does not divide n
    shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 3, (n - 1 + 2) / 3, nullptr, 0, &t);
    teams.push_back({"stride3", t});
  }
  shmem_team_t x = SHMEM_TEAM_INVALID, y = SHMEM_TEAM_INVALID;
  const int xrange = n >= 4 ? 3 : 2;  // 3 leaves a short last row at 4 and 8 PEs
  shmem_team_split_2d(SHMEM_TEAM_WORLD, xrange, nullptr, 0, &x, nullptr, 0, &y);
  teams.push_back({"2d-x", x});
  teams.push_back({"2d-y", y});
  // A split of a split: the evens without their first member.
  shmem_team_t evens = teams[1].team, nested = SHMEM_TEAM_INVALID;
  const int evens_size = (n + 1) / 2;
  if (evens_size >= 2) {
    // Collective over the parent: only its members call.
    if (evens != SHMEM_TEAM_INVALID) {
      shmem_team_split_strided(evens, 1, 1, evens_size - 1, nullptr, 0, &nested);
    }
    teams.push_back({"nested", nested});
  }
  return teams;
}

inline const std::vector<TestTeam>& test_teams() {
  static std::vector<TestTeam> teams = make_test_teams();
  return teams;
}

}  // namespace shmoe::test
