#include "moe/test_stop.hpp"

#include <signal.h>

#include <atomic>
#include <charconv>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "common/settings.hpp"

namespace shmoe::moe {
namespace {

struct StopAt {
  int pe = -1;
  std::string step;
};

std::optional<StopAt> parse_stop_at() {
  const std::optional<std::string> text = settings::test_stop_in();
  if (!text) return std::nullopt;
  const auto colon = text->find(':');
  StopAt at;
  const char* end = text->data() + (colon == std::string::npos ? 0 : colon);
  const auto [ptr, ec] = std::from_chars(text->data(), end, at.pe);
  if (colon != std::string::npos) at.step = text->substr(colon + 1);
  if (colon == std::string::npos || ec != std::errc() || ptr != end || at.pe < 0 ||
      (at.step != "sync_live" && at.step != "rejoin" && at.step != "combine_reads")) {
    throw make_error(
        "SHMOE_TEST_STOP_IN='{}' is not PE:STEP (PE a rank from 0, STEP sync_live, rejoin or "
        "combine_reads)",
        *text);
  }
  return at;
}

const std::optional<StopAt>& stop_at() {
  static const std::optional<StopAt> at = parse_stop_at();
  return at;
}
std::atomic<bool> g_stopped{false};

}  // namespace

bool test_stop_armed(int me, std::string_view step) {
  const std::optional<StopAt>& at = stop_at();
  return at && at->pe == me && at->step == step && !g_stopped.load(std::memory_order_relaxed);
}

void check_test_stop_setting() {
  stop_at();
}

void test_stop_point(int me, std::string_view step) {
  if (test_stop_armed(me, step) && !g_stopped.exchange(true)) ::raise(SIGSTOP);
}

}  // namespace shmoe::moe
