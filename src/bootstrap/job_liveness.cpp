#include "bootstrap/job_liveness.hpp"

#include <fmt/ranges.h>

#include "common/error.hpp"

namespace shmoe::bootstrap {

std::string lost_event_key(std::size_t n) {
  return fmt::format("{}/{}", kLostKey, n);
}

bool is_server_only_key(std::string_view key) {
  return key.starts_with(kLostKey) &&
         (key.size() == kLostKey.size() || key[kLostKey.size()] == '/');
}

std::string describe_pe(const Hello& h) {
  return fmt::format("PE {} (pid {} on {})", h.rank, h.pid, h.host);
}

JobLiveness::JobLiveness(std::int32_t job_size, bool continue_on_loss)
    : size_(job_size), continue_on_loss_(continue_on_loss) {
  if (size_ > 0) size_source_ = "the launcher";
}

std::string JobLiveness::admit(const Hello& h, std::uint64_t conn) {
  const std::string who = describe_pe(h);
  if (h.size <= 0) return fmt::format("{} says the job has {} PEs", who, h.size);
  if (size_ > 0 && h.size != size_) {
    return fmt::format("job size mismatch: {} says the job has {} PEs, but {} says {}", who, h.size,
                       size_source_, size_);
  }
  if (h.rank < 0 || h.rank >= h.size) {
    return fmt::format("{} has a rank outside the job of {} PEs (valid: 0..{})", who, h.size,
                       h.size - 1);
  }
  if (auto it = live_.find(h.rank); it != live_.end()) {
    const Hello& other = it->second.hello;
    // The same process initializing again (shmem_init after shmem_finalize): its goodbye on the
    // old connection was answered before it reconnected, but the old connection's close may not
    // have been read yet. That is the one holder a new claim replaces.
    if (other.pid == h.pid && other.host == h.host && departed_.contains(h.rank)) {
      live_.erase(it);
      return admit(h, conn);
    }
    return fmt::format(
        "two processes claim PE rank {}: pid {} on {} (connected first) and pid {} on {}", h.rank,
        other.pid, other.host, h.pid, h.host);
  }
  if (size_ == 0) {
    size_ = h.size;
    size_source_ = fmt::format("the first PE to connect ({})", who);
  }
  arrived_.insert(h.rank);
  live_[h.rank] = {conn, h};
  return {};
}

bool JobLiveness::depart(std::int32_t rank) {
  departed_.insert(rank);
  return all_gone();
}

bool JobLiveness::all_gone() const {
  if (size_ <= 0) return false;
  std::size_t gone = departed_.size();
  for (std::int32_t rank : lost_) gone += departed_.contains(rank) ? 0 : 1;
  return gone == static_cast<std::size_t>(size_);
}

JobLiveness::Closing JobLiveness::closed(const Hello& h, std::uint64_t conn, bool said_bye,
                                         const std::string& why) {
  if (auto it = live_.find(h.rank); it != live_.end() && it->second.conn == conn) live_.erase(it);
  Closing out;
  if (said_bye) return out;
  std::string line = why.empty() ? fmt::format(
                                       "{} disconnected without finalizing: it exited or "
                                       "was killed",
                                       describe_pe(h))
                                 : fmt::format("{} {}", describe_pe(h), why);
  if (!continue_on_loss_) {
    out.abort = std::move(line);
    return out;
  }
  if (lost_.insert(h.rank).second) lost_order_.push_back(h.rank);
  out.lost = std::move(line);
  out.finalized = all_gone();
  return out;
}

std::string JobLiveness::lost_list() const {
  return fmt::format("{}", fmt::join(lost_order_, ","));
}

bool JobLiveness::still_starting() const {
  return size_ == 0 || arrived_.size() < static_cast<std::size_t>(size_);
}

JobStatus JobLiveness::status(std::string store_trouble) const {
  JobStatus s;
  s.size = size_;
  s.arrived.assign(arrived_.begin(), arrived_.end());
  s.departed.assign(departed_.begin(), departed_.end());
  s.store_trouble = std::move(store_trouble);
  return s;
}

}  // namespace shmoe::bootstrap
