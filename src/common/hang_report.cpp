#include "common/hang_report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/output_path.hpp"
#include "common/settings.hpp"
#include "common/wait_registry.hpp"

namespace shmoe {
namespace {

std::atomic<HangHandler> g_hang_handler{nullptr};

nlohmann::json wait_json(const WaitState& s) {
  return {{"op", s.op},     {"detail", s.detail},        {"peer", s.peer}, {"expected", s.expected},
          {"seen", s.seen}, {"generation", s.generation}};
}

std::string wait_text(const nlohmann::json& w) {
  std::string peer = w.value("peer", -1) >= 0 ? fmt::format(" for PE {}", w.value("peer", -1))
                                              : std::string(" (no single PE to wait for)");
  return fmt::format("thread {} waits in {}{}: {} (seen {}, expected {}) for {:.1f} s{}",
                     w.value("thread", 0), w.value("op", ""), peer, w.value("detail", ""),
                     w.value("seen", 0ull), w.value("expected", 0ull), w.value("waited_s", 0.0),
                     w.value("timed_out", false) ? ", timed out" : "");
}

}  // namespace

nlohmann::json build_hang_report(std::string_view reason, const WaitState* timed_out) {
  const pid_t me = static_cast<pid_t>(::gettid());
  nlohmann::json waits = nlohmann::json::array();
  for (const ThreadWait& w : current_waits()) {
    nlohmann::json j = wait_json(w.state);
    j["thread"] = w.tid;
    j["waited_s"] = w.waited_s;
    j["timed_out"] = timed_out != nullptr && w.tid == me;
    waits.push_back(std::move(j));
  }
  return {{"pe", log::rank()},
          {"pid", static_cast<int>(::getpid())},
          {"reason", reason},
          {"waits", std::move(waits)}};
}

std::string hang_report_line(const nlohmann::json& report) {
  std::string waits;
  for (const auto& w : report.at("waits")) waits += (waits.empty() ? "" : "; ") + wait_text(w);
  if (waits.empty()) waits = "no thread is waiting inside shmoe (busy in the program)";
  return fmt::format("hang report: PE {} (pid {}, {}): {}", report.value("pe", -1),
                     report.value("pid", 0), report.value("reason", ""), waits);
}

std::string hang_report_path(int pe, int n_pes) {
  auto pattern = settings::hang_report();
  if (!pattern || pattern->empty()) return {};
  if (n_pes > 1 && pattern->find("%p") == std::string::npos) {
    throw make_error(
        "SHMOE_HANG_REPORT={} has no %p: the {} PEs would write one file; put %p where the PE "
        "number goes",
        *pattern, n_pes);
  }
  std::string path;
  for (std::size_t i = 0; i < pattern->size(); ++i) {
    if ((*pattern)[i] == '%' && i + 1 < pattern->size() && (*pattern)[i + 1] == 'p') {
      path += std::to_string(pe);
      ++i;
    } else {
      path += (*pattern)[i];
    }
  }
  return path;
}

void check_hang_report_destination(int pe, int n_pes) {
  const std::string path = hang_report_path(pe, n_pes);
  if (path.empty()) return;
  if (std::string why = why_not_writable_file("SHMOE_HANG_REPORT", path); !why.empty()) {
    throw Error(why);
  }
}

void write_hang_report(const nlohmann::json& report) {
  log::write("info", hang_report_line(report));
  const std::string json = report.dump();
  std::string path;
  try {
    path = hang_report_path(report.value("pe", 0), 1);
  } catch (const std::exception& e) {
    log::warn("{}", e.what());
  }
  if (path.empty()) {
    log::write("hang report json", json);
    return;
  }
  // Written to a temporary name and renamed, so a reader never sees half a report.
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json << '\n';
    if (!out) {
      log::warn("cannot write the hang report to {} (SHMOE_HANG_REPORT); here it is: {}", tmp,
                json);
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    log::warn("cannot rename {} to {} (SHMOE_HANG_REPORT)", tmp, path);
  }
}

void set_hang_handler(HangHandler handler) {
  g_hang_handler.store(handler);
}

void handle_hang(const WaitState& timed_out, double waited_s) {
  if (auto handler = g_hang_handler.load()) {
    handler(timed_out, waited_s);
    return;
  }
  write_hang_report(build_hang_report("timeout", &timed_out));
}

}  // namespace shmoe
