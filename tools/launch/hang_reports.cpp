#include "hang_reports.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "shmem/hang_watch.hpp"

namespace shmoe::tools {

using Clock = std::chrono::steady_clock;

HangReports::HangReports(std::string store_address, int n_pes)
    : address_(std::move(store_address)), n_pes_(n_pes) {}

HangReports::~HangReports() = default;

bootstrap::ConfigStoreClient& HangReports::client() {
  if (!client_) {
    bootstrap::Hello hello;  // a tool: rank -1, size 0
    hello.pid = static_cast<std::int32_t>(::getpid());
    hello.host = "shmoerun";
    client_ = std::make_unique<bootstrap::ConfigStoreClient>(
        bootstrap::StoreAddress::parse(address_, "the job's config store"), hello,
        std::chrono::seconds(2));
  }
  return *client_;
}

bool HangReports::job_hung() {
  return client().get(kHangKey, std::chrono::milliseconds(0)).has_value();
}

void HangReports::clear() {
  for (int r = 0; r < n_pes_; ++r) client().remove(fmt::format("{}{}", kReportKeyPrefix, r));
}

std::vector<int> HangReports::running_ranks() {
  const bootstrap::JobStatus s = client().job_status();
  std::vector<int> ranks;
  for (int r : s.arrived) {
    if (!std::binary_search(s.departed.begin(), s.departed.end(), r)) ranks.push_back(r);
  }
  return ranks;
}

std::vector<bool> HangReports::finalized_ranks() {
  std::vector<bool> finalized(n_pes_, false);
  for (int r : client().job_status().departed) {
    if (r >= 0 && r < n_pes_) finalized[r] = true;
  }
  return finalized;
}

std::vector<nlohmann::json> HangReports::gather(std::chrono::milliseconds wait,
                                                const std::vector<bool>& finalized) {
  const auto deadline = Clock::now() + wait;
  std::vector<nlohmann::json> reports(n_pes_);
  for (int r = 0; r < n_pes_; ++r) {
    if (finalized[r]) continue;
    const auto left =
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                 std::chrono::milliseconds(0));
    auto text = client().get(fmt::format("{}{}", kReportKeyPrefix, r), left);
    if (!text) continue;
    reports[r] = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (reports[r].is_discarded() || !reports[r].contains("waits")) reports[r] = nullptr;
  }
  return reports;
}

HangVerdict HangReports::verdict(std::chrono::milliseconds wait) {
  const std::vector<bool> finalized = finalized_ranks();
  return hang_verdict(gather(wait, finalized), finalized);
}

}  // namespace shmoe::tools
