#include "common/unknown_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string_view>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"

namespace shmoe::settings {
namespace {

// Variables with shmoe's prefixes that other parts of shmoe read (they are not settings of the
// library): the deep_ep package's, and those of the build and test scripts.
constexpr std::string_view kReadElsewhere[] = {
    "SHMOE_SHRINK_TIMEOUT_MS",  // python/deep_ep/shrink.py
    "SHMOE_SANITIZE_TARGETS",   // scripts/sanitize.sh
    "SHMOE_FUZZ_JOBS",          // tests/fuzz/run_fuzzers.sh
};
// The test programs' own switches.
constexpr std::string_view kTestPrefix = "SHMOE_TEST_";

std::vector<std::string> known_names() {
  std::vector<std::string> names;
  for (const Entry& e : table()) names.emplace_back(e.variable);
  for (std::string_view n : kReadElsewhere) names.emplace_back(n);
  return names;
}

// The known name nearest to `name`, if it is within a third of the name's length (at least 2
// edits): close enough to be a slip, not a different word.
std::string closest_to(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const std::string& k : known) {
    const std::size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<UnknownVariable> unknown_variables() {
  const std::vector<std::string> known = known_names();
  std::vector<UnknownVariable> unknown;
  for (std::string_view prefix : {"SHMOE_", "SHMEM_", "SMA_"}) {
    for (std::string& name : env::names_starting_with(prefix)) {
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      if (std::string_view(name).starts_with(kTestPrefix)) continue;
      std::string closest = closest_to(name, known);
      unknown.push_back({std::move(name), std::move(closest)});
    }
  }
  std::sort(unknown.begin(), unknown.end(),
            [](const UnknownVariable& x, const UnknownVariable& y) { return x.name < y.name; });
  return unknown;
}

std::string describe(const UnknownVariable& v) {
  return fmt::format(
      "{} is not a shmoe setting and is ignored{}", v.name,
      v.closest.empty() ? std::string("") : fmt::format("; did you mean {}?", v.closest));
}

void warn_unknown_variables_once() {
  static std::atomic<bool> done{false};
  if (done.exchange(true) || !warn_unknown_env()) return;
  for (const UnknownVariable& v : unknown_variables()) {
    log::warn("{} (SHMOE_WARN_UNKNOWN_ENV=0 silences this)", describe(v));
  }
}

}  // namespace shmoe::settings
