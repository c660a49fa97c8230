#include "run_csv.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace shmoe::tools {

const RunStamp& run_stamp() {
  static const RunStamp stamp = [] {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    return RunStamp{fmt::format("{}-{}", ::getpid(), static_cast<long long>(seconds)),
                    fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(seconds))};
  }();
  return stamp;
}

namespace {

// The first line of a regular file, empty for anything else (a device such as /dev/full reads
// without end).
std::string header_of(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "";
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string perf_name(const MoeRunOptions& o) {
  return op_name(o.op) +
         (o.op == MoeOp::kPipeline && op_uses_double_plane(o) ? "-doubleplane" : "");
}

std::string perf_csv_path(const MoeRunOptions& o, const MoeCase& c, const std::string& name,
                          int pes) {
  return fmt::format("{}/{}_pes{}_bs{}_h{}_topk{}_epp{}_{}.csv", o.output_dir, name, pes, c.bs,
                     c.hidden, c.topk, c.experts_per_pe, dtype_name(c.dtype));
}

std::ofstream open_run_csv(const std::string& path, const std::string& header) {
  const std::string existing = header_of(path);
  if (!existing.empty() && existing != header) {
    throw std::runtime_error(fmt::format(
        "{} holds rows of other columns (its header is \"{}\", this run writes \"{}\"): move it "
        "away or give another --output-dir",
        path, existing, header));
  }
  std::ofstream f(path, std::ios::app);
  if (!f) {
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  if (existing.empty()) f << header << "\n";
  return f;
}

}  // namespace shmoe::tools
