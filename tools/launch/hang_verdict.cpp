#include "hang_verdict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace shmoe::tools {
namespace {

// One wait of one PE; `to` is the PE it waits for (-1: no single PE).
struct Edge {
  int from = -1;
  int to = -1;
  std::string op;
  std::uint64_t generation = 0;
  bool operator==(const Edge&) const = default;
};

// "barrier #3", "combine entry #1": the operation and which call of it.
std::string call_name(const Edge& e) {
  return e.generation != 0 ? fmt::format("{} #{}", e.op, e.generation) : e.op;
}

// What the verdict knows of each PE: its report, unless it has finalized (a report it wrote
// before it finalized is out of date).
class Job {
 public:
  Job(const std::vector<nlohmann::json>& reports, const std::vector<bool>& finalized)
      : reports_(reports), finalized_(finalized) {}
  int size() const { return static_cast<int>(reports_.size()); }
  bool finalized(int pe) const {
    return pe >= 0 && pe < static_cast<int>(finalized_.size()) && finalized_[pe];
  }
  // The PE's report, or null when it sent none or has finalized.
  const nlohmann::json* report(int pe) const {
    if (pe < 0 || pe >= size() || finalized(pe) || reports_[pe].is_null()) return nullptr;
    return &reports_[pe];
  }
  bool waiting(int pe) const {
    const nlohmann::json* r = report(pe);
    return r != nullptr && !r->at("waits").empty();
  }

 private:
  const std::vector<nlohmann::json>& reports_;
  const std::vector<bool>& finalized_;
};

// What PE `pe` itself does, for the verdict's last clause; `ops` are the operations the others
// wait for it in.
std::string own_state(const Job& job, int pe, const std::set<std::string>& ops) {
  if (job.finalized(pe)) {
    return fmt::format(
        "PE {} has already called shmem_finalize (it skipped the {} the others wait in)", pe,
        fmt::join(ops, " and "));
  }
  const nlohmann::json* report = job.report(pe);
  if (report == nullptr) {
    return fmt::format("PE {} sent no report (it may have died, or be stuck with signals blocked)",
                       pe);
  }
  const auto& waits = report->at("waits");
  if (waits.empty()) {
    return fmt::format(
        "PE {} itself is not waiting inside shmoe: it is busy in the program, or "
        "never made the call",
        pe);
  }
  std::vector<std::string> parts;
  for (const auto& w : waits) {
    const int peer = w.value("peer", -1);
    parts.push_back(fmt::format("{}{}", w.value("detail", w.value("op", "?")),
                                peer >= 0 ? fmt::format(" (for PE {})", peer) : ""));
  }
  return fmt::format("PE {} itself is waiting in {}", pe, fmt::join(parts, "; "));
}

// Every wait of every PE that reported, once (worker threads of one PE often wait for the same
// flag: one clause says it).
std::vector<Edge> collect_waits(const Job& job) {
  std::vector<Edge> waits;
  for (int pe = 0; pe < job.size(); ++pe) {
    const nlohmann::json* report = job.report(pe);
    if (report == nullptr) continue;
    for (const auto& w : report->at("waits")) {
      Edge e{pe, w.value("peer", -1), w.value("op", ""), w.value("generation", std::uint64_t{0})};
      if (e.to < 0 || e.to >= job.size() || e.to == pe) e.to = -1;
      if (std::find(waits.begin(), waits.end(), e) == waits.end()) waits.push_back(e);
    }
  }
  return waits;
}

// The PEs waited on by a PE that is not waiting in the same operation itself, with those waits;
// a PE only blamed by blamed PEs is a consequence, not a cause (PE 1 skipped combine and waits in
// the next barrier for PE 0, which waits in combine).
std::map<int, std::vector<Edge>> blame_by_peer(const std::vector<Edge>& waits) {
  std::map<int, std::set<std::string>> own_ops;
  for (const Edge& e : waits) own_ops[e.from].insert(e.op);
  std::map<int, std::vector<Edge>> blamed;
  for (const Edge& e : waits) {
    if (e.to >= 0 && !own_ops[e.to].count(e.op)) blamed[e.to].push_back(e);
  }
  std::map<int, std::vector<Edge>> causes;
  for (const auto& [pe, waiters] : blamed) {
    if (std::any_of(waiters.begin(), waiters.end(),
                    [&](const Edge& e) { return !blamed.count(e.from); })) {
      causes.emplace(pe, waiters);
    }
  }
  return causes;
}

// Waits that name no single PE: when all PEs but one wait and some wait for no single PE, the
// one that does not wait (busy, finalized, or silent) is the PE they wait on.
std::map<int, std::vector<Edge>> blame_lone_idle_pe(const Job& job,
                                                    const std::vector<Edge>& waits) {
  const bool anonymous =
      std::any_of(waits.begin(), waits.end(), [](const Edge& e) { return e.to < 0; });
  std::vector<int> idle;
  for (int pe = 0; pe < job.size(); ++pe) {
    if (!job.waiting(pe)) idle.push_back(pe);
  }
  if (!anonymous || idle.size() != 1 || job.size() < 2) return {};
  return {{idle[0], waits}};
}

std::string describe_wait(const Edge& e, bool to_culprit) {
  if (to_culprit) return fmt::format("PE {} waits for it in {}", e.from, call_name(e));
  return e.to >= 0 ? fmt::format("PE {} waits for PE {} in {}", e.from, e.to, call_name(e))
                   : fmt::format("PE {} waits in {} for no single PE", e.from, call_name(e));
}

}  // namespace

HangVerdict hang_verdict(const std::vector<nlohmann::json>& reports,
                         const std::vector<bool>& finalized) {
  const Job job(reports, finalized);
  const std::vector<Edge> waits = collect_waits(job);
  std::map<int, std::vector<Edge>> blamed = blame_by_peer(waits);
  const bool lone_idle = blamed.empty();
  if (lone_idle) blamed = blame_lone_idle_pe(job, waits);

  HangVerdict v;
  for (const auto& [pe, waiters] : blamed) v.culprits.push_back(pe);
  std::vector<std::string> missing, gone;
  for (int pe = 0; pe < job.size(); ++pe) {
    if (job.finalized(pe) && !blamed.count(pe)) gone.push_back(std::to_string(pe));
    if (!job.finalized(pe) && reports[pe].is_null()) missing.push_back(std::to_string(pe));
  }
  std::string notes;
  if (!missing.empty()) notes += fmt::format(" (no report from PE {})", fmt::join(missing, ", "));
  if (!gone.empty()) {
    notes += fmt::format(" (PE {} {} called shmem_finalize)", fmt::join(gone, ", "),
                         gone.size() == 1 ? "has" : "have");
  }
  if (blamed.empty()) {
    std::vector<std::string> named, anonymous;
    for (const Edge& e : waits) (e.to >= 0 ? named : anonymous).push_back(describe_wait(e, false));
    if (!named.empty()) {
      v.line = fmt::format("verdict: no single PE: the PEs wait on each other ({}){}",
                           fmt::join(named, ", "), notes);
    } else if (!anonymous.empty()) {
      v.line = fmt::format("verdict: no PE is named by the waits: {}{}", fmt::join(anonymous, ", "),
                           notes);
    } else {
      v.line = fmt::format("verdict: no PE is waiting inside shmoe{}", notes);
    }
    return v;
  }
  std::vector<std::string> clauses;
  for (const auto& [pe, waiters] : blamed) {
    std::vector<std::string> who;
    std::set<std::string> ops;
    for (const Edge& e : waiters) {
      who.push_back(describe_wait(e, !lone_idle));
      ops.insert(e.op);
    }
    const std::string why =
        lone_idle
            ? fmt::format("it is the only PE not waiting inside shmoe: {}", fmt::join(who, ", "))
            : fmt::format("{}", fmt::join(who, ", "));
    clauses.push_back(fmt::format("PE {} is the one the others wait on ({}); {}", pe, why,
                                  own_state(job, pe, ops)));
  }
  v.line = fmt::format("verdict: {}{}", fmt::join(clauses, ". "), notes);
  return v;
}

}  // namespace shmoe::tools
