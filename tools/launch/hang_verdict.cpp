#include "hang_verdict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace shmoe::tools {
namespace {

struct Edge {
  int from = -1;
  int to = -1;
  std::string op;
  std::uint64_t generation = 0;
};

// "barrier #3", "combine entry #1": the operation and which call of it.
std::string call_name(const Edge& e) {
  return e.generation != 0 ? fmt::format("{} #{}", e.op, e.generation) : e.op;
}

// What PE `pe` itself does, for the verdict's last clause.
std::string own_state(const std::vector<nlohmann::json>& reports, int pe) {
  if (pe >= static_cast<int>(reports.size()) || reports[pe].is_null()) {
    return fmt::format("PE {} sent no report (it may have died, or be stuck with signals blocked)",
                       pe);
  }
  const auto& waits = reports[pe].at("waits");
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

}  // namespace

std::string hang_verdict(const std::vector<nlohmann::json>& reports) {
  const int n = static_cast<int>(reports.size());
  std::vector<Edge> edges;
  std::vector<std::set<std::string>> own_ops(n);  // operations each PE waits in
  std::vector<std::string> unknown_peer;          // waits that name no PE
  for (int pe = 0; pe < n; ++pe) {
    if (reports[pe].is_null()) continue;
    for (const auto& w : reports[pe].at("waits")) {
      Edge e{pe, w.value("peer", -1), w.value("op", ""), w.value("generation", std::uint64_t{0})};
      own_ops[pe].insert(e.op);
      const bool seen_before = std::any_of(edges.begin(), edges.end(), [&](const Edge& o) {
        return o.from == e.from && o.to == e.to && o.op == e.op && o.generation == e.generation;
      });
      if (e.to >= 0 && e.to < n && e.to != pe) {
        // Worker threads of one PE often wait for the same flag: one clause says it.
        if (!seen_before) edges.push_back(e);
      } else {
        unknown_peer.push_back(fmt::format("PE {} waits in {} for no single PE", pe, call_name(e)));
      }
    }
  }
  // Blamed: waited on by somebody, and not waiting in that same operation itself.
  std::map<int, std::vector<const Edge*>> blamed;
  for (const Edge& e : edges) {
    if (!own_ops[e.to].count(e.op)) blamed[e.to].push_back(&e);
  }
  // A blamed PE's own wait makes its peer look out of step too (PE 1 skipped combine and waits
  // in the next barrier for PE 0, which waits in combine): a PE only blamed by blamed PEs is a
  // consequence, not a cause.
  std::map<int, std::vector<const Edge*>> causes;
  for (const auto& [pe, waiters] : blamed) {
    if (std::any_of(waiters.begin(), waiters.end(),
                    [&](const Edge* e) { return !blamed.count(e->from); })) {
      causes.emplace(pe, waiters);
    }
  }
  blamed = std::move(causes);
  std::vector<std::string> missing;
  for (int pe = 0; pe < n; ++pe) {
    if (reports[pe].is_null()) missing.push_back(std::to_string(pe));
  }
  const std::string no_report =
      missing.empty() ? "" : fmt::format(" (no report from PE {})", fmt::join(missing, ", "));
  if (blamed.empty()) {
    if (!edges.empty()) {
      std::vector<std::string> cycle;
      for (const Edge& e : edges) {
        cycle.push_back(fmt::format("PE {} waits for PE {} in {}", e.from, e.to, call_name(e)));
      }
      return fmt::format("verdict: no single PE: the PEs wait on each other ({}){}",
                         fmt::join(cycle, ", "), no_report);
    }
    if (!unknown_peer.empty()) {
      return fmt::format("verdict: no PE is named by the waits: {}{}",
                         fmt::join(unknown_peer, ", "), no_report);
    }
    return fmt::format("verdict: no PE is waiting inside shmoe{}", no_report);
  }
  std::vector<std::string> clauses;
  for (const auto& [pe, waiters] : blamed) {
    std::vector<std::string> who;
    for (const Edge* e : waiters) {
      who.push_back(fmt::format("PE {} waits for it in {}", e->from, call_name(*e)));
    }
    clauses.push_back(fmt::format("PE {} is the one the others wait on ({}); {}", pe,
                                  fmt::join(who, ", "), own_state(reports, pe)));
  }
  return fmt::format("verdict: {}{}", fmt::join(clauses, ". "), no_report);
}

}  // namespace shmoe::tools
