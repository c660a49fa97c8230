#include "bootstrap/job_liveness.hpp"

#include "common/error.hpp"

namespace shmoe::bootstrap {

std::string describe_pe(const Hello& h) {
  return fmt::format("PE {} (pid {} on {})", h.rank, h.pid, h.host);
}

JobLiveness::JobLiveness(std::int32_t job_size) : size_(job_size) {
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
  return size_ > 0 && departed_.size() == static_cast<std::size_t>(size_);
}

std::optional<std::string> JobLiveness::closed(const Hello& h, std::uint64_t conn, bool said_bye,
                                               const std::string& why) {
  if (auto it = live_.find(h.rank); it != live_.end() && it->second.conn == conn) live_.erase(it);
  if (said_bye) return std::nullopt;
  if (why.empty()) {
    return fmt::format("{} disconnected without finalizing: it exited or was killed",
                       describe_pe(h));
  }
  return fmt::format("{} {}", describe_pe(h), why);
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
