#include "ordered_lines.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <shmem.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace shmoe::tools {
namespace {

// Room for one PE's line on PE 0; a longer one (a long mismatch detail) is cut, saying so.
constexpr std::size_t kLineBytes = 4096;

std::string fitted(const std::string& line) {
  if (line.size() < kLineBytes - 1) return line;
  const std::string cut = " [cut]";
  return line.substr(0, kLineBytes - 1 - cut.size()) + cut;
}

}  // namespace

void print_in_pe_order(const std::string& line, bool passed, const std::string& what) {
  const int me = shmem_my_pe(), P = shmem_n_pes();
  auto* lines = static_cast<char*>(shmem_calloc(static_cast<std::size_t>(P), kLineBytes));
  auto* verdicts = static_cast<int*>(shmem_calloc(static_cast<std::size_t>(P), sizeof(int)));
  const std::string mine = fitted(line);
  shmem_putmem(lines + static_cast<std::size_t>(me) * kLineBytes, mine.c_str(), mine.size() + 1, 0);
  shmem_int_p(verdicts + me, passed ? 1 : 0, 0);
  shmem_barrier_all();
  if (me == 0) {
    std::vector<int> failed;
    for (int p = 0; p < P; ++p) {
      fmt::print("{}\n", lines + static_cast<std::size_t>(p) * kLineBytes);
      if (verdicts[p] == 0) failed.push_back(p);
    }
    if (failed.empty()) {
      fmt::print("{}: all {} PEs passed verification\n", what, P);
    } else {
      fmt::print("{}: {} of {} PEs FAILED verification: PE {}\n", what, failed.size(), P,
                 fmt::join(failed, ", "));
    }
    std::fflush(stdout);
  }
  shmem_barrier_all();
  shmem_free(verdicts);
  shmem_free(lines);
}

}  // namespace shmoe::tools
