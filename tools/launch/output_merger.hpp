// What the launcher prints of its PEs' output: whole lines only (two PEs' writes never mix within
// a line), optionally prefixed "[PE r] ", and a shmoe error or warning that several PEs report in
// the same words printed once, with "(the same on N more PEs)".
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace shmoe::tools {

class OutputMerger {
 public:
  using Clock = std::chrono::steady_clock;
  // write(fd, text): where the merged text goes (one call per line or group of lines).
  using Writer = std::function<void(int fd, const std::string& text)>;

  // `hold`: how long a reported error waits for the same report from other PEs.
  OutputMerger(bool prefix, std::chrono::milliseconds hold, Writer write);

  // Bytes PE `rank` wrote to `fd` (STDOUT_FILENO or STDERR_FILENO); `at_end`: its stream closed,
  // so a last line without a newline is complete.
  void add(int rank, int fd, std::string_view bytes, bool at_end, Clock::time_point now);

  // Prints the held reports whose wait has passed, or all of them (before the launcher's own
  // lines, and at the end of the job).
  void release(Clock::time_point now, bool all);

  // Whether a report is held (the launcher then polls more often, to release it in time).
  bool holding() const { return !held_.empty(); }

 private:
  struct Held {
    std::string line;  // the first PE's line, as printed
    int fd;
    int more = 0;             // other PEs that reported the same
    Clock::time_point until;  // when it is printed, unless the launcher needs it out sooner
    Clock::time_point first;  // when the first PE reported it
  };
  void line(int rank, int fd, std::string_view text, Clock::time_point now);
  std::string decorate(int rank, std::string_view text) const;

  bool prefix_;
  std::chrono::milliseconds hold_;
  Writer write_;
  std::map<std::pair<int, int>, std::string> partial_;  // (rank, fd) -> bytes after the last \n
  std::map<std::string, Held> held_;                    // by the report without its PE number
  std::vector<std::string> order_;                      // held_'s keys, first reported first
};

// The words of a shmoe error or warning line ("shmoe: PE 3: error: TEXT") without the PE number
// ("error: TEXT"), or empty for any other line.
std::string report_without_pe(std::string_view line);

}  // namespace shmoe::tools
