#include <algorithm>

#include "bootstrap/config_store.hpp"
#include "bootstrap/wire.hpp"
#include "common/error.hpp"
#include "common/wait_registry.hpp"

namespace shmoe::bootstrap {
namespace {

using std::chrono::milliseconds;

// "0, 1, 4-9, 12": a job of thousands of PEs must still give a readable message.
std::string rank_list(const std::vector<std::int32_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      out += std::to_string(ranks[i]);
      if (j > i) out += fmt::format(", {}", ranks[j]);
    }
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

StoreCollectives::StoreCollectives(ConfigStoreClient& client, std::int32_t rank, std::int32_t size,
                                   std::uint64_t generation)
    : client_(client), rank_(rank), size_(size), generation_(generation) {
  if (size <= 0 || rank < 0 || rank >= size) {
    throw make_error("store collectives: rank {} is not valid in a job of {} PEs", rank, size);
  }
}

void StoreCollectives::barrier(std::string_view name, milliseconds timeout) {
  std::string key = fmt::format("shmoe/bar/{}/{}/{}", generation_, name, round_++);
  std::string done_key = key + "/done";
  // Rounds this PE finished before it came here: once every PE is here, so has every PE.
  std::vector<std::string> finished_before = std::move(finished_keys_);
  finished_keys_.clear();
  if (client_.add(key, 1) == size_) client_.set(done_key, "1");
  {
    // Listed at once: a round trip to the store already costs more than listing.
    auto describe = [&] {
      return WaitState{"store barrier",
                       fmt::format("config store barrier '{}' (key {}): waiting for all {} PEs",
                                   name, key, size_),
                       -1,
                       static_cast<std::uint64_t>(size_),
                       0,
                       round_};
    };
    WaitTicket ticket(describe);
    ticket.enter();
    if (client_.get(done_key, timeout)) {
      if (rank_ == 0) {
        for (const auto& k : finished_before) client_.remove(k);
      }
      finished_keys_.push_back(std::move(key));
      finished_keys_.push_back(std::move(done_key));
      return;
    }
  }

  // Diagnose before throwing: who never connected is the most useful thing to report.
  JobStatus status = client_.job_status();
  std::int64_t reached = client_.add(key, 0);
  std::vector<std::int32_t> missing;
  for (std::int32_t r = 0; r < size_; ++r) {
    if (!std::binary_search(status.arrived.begin(), status.arrived.end(), r)) missing.push_back(r);
  }
  std::string more;
  if (!status.departed.empty()) {
    more = fmt::format("; PEs that already finalized: {}", rank_list(status.departed));
  }
  if (!status.store_trouble.empty()) {
    more += fmt::format("; the config store reports: {}", status.store_trouble);
  }
  if (!missing.empty()) {
    // Connecting and reaching the barrier are two steps: a PE may have done the first only.
    throw make_error(
        "{}: timed out after {:.1f} s waiting for PEs {}, which never connected to the config "
        "store ({} of {} PEs connected: {}); {} of {} PEs reached this barrier{}",
        name, seconds(timeout), rank_list(missing), status.arrived.size(), size_,
        rank_list(status.arrived), reached, size_, more);
  }
  throw make_error(
      "{}: timed out after {:.1f} s: only {} of {} PEs reached this barrier; every PE connected "
      "to the config store, so which PEs are missing is unknown{}",
      name, seconds(timeout), reached, size_, more);
}

std::vector<std::string> StoreCollectives::allgather(std::string_view name, std::string_view mine,
                                                     milliseconds timeout) {
  std::string key = fmt::format("shmoe/ag/{}/{}/{}", generation_, name, round_++);
  wire::Writer record(0);
  record.i32(rank_).str(mine);
  client_.append(key, std::string_view(record.frame()).substr(wire::kHeaderSize));
  barrier(name, timeout);
  std::optional<std::string> all = client_.get(key, timeout);
  if (!all) throw make_error("{}: allgather data vanished from the config store", name);
  finished_keys_.push_back(key);

  std::vector<std::optional<std::string>> by_rank(static_cast<std::size_t>(size_));
  try {
    wire::Reader rd(*all);
    while (!rd.done()) {
      std::int32_t r = rd.i32();
      std::string_view payload = rd.str();
      if (r < 0 || r >= size_) {
        throw make_error("{}: allgather got a contribution from rank {} outside the job of {} PEs",
                         name, r, size_);
      }
      auto& slot = by_rank[static_cast<std::size_t>(r)];
      if (slot) {
        throw make_error(
            "{}: allgather got two contributions from PE {} (the PEs disagree on "
            "the order of collectives)",
            name, r);
      }
      slot = std::string(payload);
    }
  } catch (const wire::WireError& e) {
    throw make_error("{}: allgather data in the config store is corrupt: {}", name, e.what());
  }
  std::vector<std::string> out;
  out.reserve(by_rank.size());
  std::vector<std::int32_t> absent;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    if (!by_rank[r]) absent.push_back(static_cast<std::int32_t>(r));
    out.push_back(by_rank[r].value_or(""));
  }
  if (!absent.empty()) {
    throw make_error("{}: allgather is missing the contributions of PEs {}", name,
                     rank_list(absent));
  }
  return out;
}

}  // namespace shmoe::bootstrap
