#include "output_merger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <utility>

namespace shmoe::tools {

std::string report_without_pe(std::string_view line) {
  static const std::regex report(R"(^shmoe: PE \d+: ((error|warning): .*)$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(line.begin(), line.end(), m, report)) return {};
  return m[1].str();
}

OutputMerger::OutputMerger(bool prefix, std::chrono::milliseconds hold, Writer write)
    : prefix_(prefix), hold_(hold), write_(std::move(write)) {}

std::string OutputMerger::decorate(int rank, std::string_view text) const {
  return prefix_ ? fmt::format("[PE {}] {}\n", rank, text) : fmt::format("{}\n", text);
}

void OutputMerger::add(int rank, int fd, std::string_view bytes, bool at_end,
                       Clock::time_point now) {
  std::string& pending = partial_[{rank, fd}];
  pending.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    line(rank, fd, std::string_view(pending).substr(start, nl - start), now);
  }
  pending.erase(0, start);
  if (at_end) {
    if (!pending.empty()) line(rank, fd, pending, now);
    partial_.erase({rank, fd});
  }
}

void OutputMerger::line(int rank, int fd, std::string_view text, Clock::time_point now) {
  const std::string key = report_without_pe(text);
  if (key.empty()) {
    write_(fd, decorate(rank, text));
    return;
  }
  auto [it, first] = held_.try_emplace(key, Held{decorate(rank, text), fd, 0, now + hold_, now});
  if (first) {
    order_.push_back(key);
    return;
  }
  // Each repeat extends the wait for more, up to four times the hold after the first.
  Held& h = it->second;
  ++h.more;
  h.until = std::min(now + hold_, h.first + 4 * hold_);
}

void OutputMerger::release(Clock::time_point now, bool all) {
  std::string out;
  int fd = -1;
  for (auto k = order_.begin(); k != order_.end();) {
    const Held& h = held_.at(*k);
    if (!all && h.until > now) {
      ++k;
      continue;
    }
    std::string text = h.line;
    if (h.more > 0) {
      text.insert(text.size() - 1,
                  fmt::format(" (the same on {} more PE{})", h.more, h.more == 1 ? "" : "s"));
    }
    if (fd != -1 && fd != h.fd) write_(std::exchange(fd, h.fd), std::exchange(out, {}));
    fd = h.fd;
    out += text;
    held_.erase(*k);
    k = order_.erase(k);
  }
  if (!out.empty()) write_(fd, out);
}

}  // namespace shmoe::tools
