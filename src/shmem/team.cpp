#include "shmem/team.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "shmem/collectives.hpp"
#include "shmem/runtime.hpp"

struct shmoe_team shmoe_team_world, shmoe_team_shared;

namespace shmoe {

Team::Team(Runtime& rt, PeSet pes, int my_index, int slot, std::size_t scratch_offset,
           shmem_team_config_t config, shmoe_team* handle)
    : rt_(rt),
      pes_(pes),
      my_index_(my_index),
      slot_(slot),
      scratch_(scratch_offset),
      config_(config),
      handle_(handle),
      barrier_(rt.transport(), scratch_offset + TeamScratch::kBarrierOffset,
               rt.heap_base() + scratch_offset + TeamScratch::kBarrierOffset, pes, my_index) {}

int Team::index_of(int pe) const {
  int delta = pe - pes_.start;
  if (pes_.stride == 0) return delta == 0 ? 0 : -1;
  if (delta % pes_.stride != 0) return -1;
  int index = delta / pes_.stride;
  return index >= 0 && index < pes_.size ? index : -1;
}

transport::Transport& Team::transport() const {
  return rt_.transport();
}

std::byte* Team::local_data() const {
  return rt_.heap_base() + data_offset();
}

void Team::signal(int index, int flag, std::uint64_t value) {
  auto& t = rt_.transport();
  t.fence();  // the data this flag announces lands first (non-temporal stores included)
  t.atomic(world_pe(index), scratch_ + TeamScratch::kFlagsOffset + flag * TeamScratch::kFlagStride,
           {transport::AmoOp::kStore, 8, value, 0});
}

void Team::wait(int flag, std::uint64_t value, const char* what, int from) {
  auto* word = reinterpret_cast<std::uint64_t*>(
      rt_.heap_base() + scratch_ + TeamScratch::kFlagsOffset + flag * TeamScratch::kFlagStride);
  std::atomic_ref<std::uint64_t> seen(*word);
  wait_until([&] { return seen.load(std::memory_order_acquire) >= value; },
             [&] {
               const std::uint64_t now = seen.load();
               return WaitState{
                   what,
                   fmt::format("{} on team [start {}, stride {}, size {}] (slot {}): flag {} is {} "
                               "< {}",
                               what, pes_.start, pes_.stride, pes_.size, slot_, flag, now, value),
                   from >= 0 ? world_pe(from) : -1,
                   value,
                   now,
                   value};
             });
}

namespace {

// SHMEM_TEAM_SHARED: the PEs whose heaps this PE maps (its host's PEs), when they form a strided
// set as teams must; otherwise this PE alone, which is still a valid shared team. PEs of
// different hosts hold different teams in the same slot, which is fine: no PE is in two of them.
PeSet shared_memory_set(const std::vector<int>& pes, int me) {
  const int n = static_cast<int>(pes.size());
  const int stride = n > 1 ? pes[1] - pes[0] : 1;
  for (int i = 1; i < n; ++i) {
    if (pes[i] - pes[i - 1] != stride) {
      log::warn(
          "the PEs of this host ({} of them, from PE {}) are not evenly spaced: "
          "SHMEM_TEAM_SHARED holds this PE alone",
          n, pes[0]);
      return PeSet{me, 1, 1};
    }
  }
  return PeSet{pes[0], stride, n};
}

}  // namespace

TeamRegistry::TeamRegistry(Runtime& rt, std::size_t offset) : rt_(rt), offset_(offset) {
  PeSet all{0, 1, rt.size()};
  shmem_team_config_t config{0};
  shmoe_team_world.team = create(all, 0, config, &shmoe_team_world);
  shmoe_team_shared.team =
      create(shared_memory_set(rt.shared_memory_pes(), rt.rank()), 1, config, &shmoe_team_shared);
  slots_in_use_ = 0b11;
}

TeamRegistry::~TeamRegistry() {
  for (auto& team : teams_) team->handle()->team = nullptr;
}

Team* TeamRegistry::create(PeSet pes, int slot, shmem_team_config_t config, shmoe_team* handle) {
  int me = -1;
  for (int i = 0; i < pes.size; ++i) {
    if (pes.pe(i) == rt_.rank()) me = i;
  }
  teams_.push_back(std::make_unique<Team>(rt_, pes, me, slot, slot_offset(slot), config, handle));
  return teams_.back().get();
}

Team* TeamRegistry::resolve(shmem_team_t handle, const char* fn, const char* param) {
  if (handle == nullptr) return nullptr;
  bool known = handle == &shmoe_team_world || handle == &shmoe_team_shared;
  if (!known) {
    std::lock_guard lock(mutex_);
    known = std::any_of(handles_.begin(), handles_.end(),
                        [&](const std::unique_ptr<shmoe_team>& h) { return h.get() == handle; });
  }
  if (!known) {
    log::warn(
        "{}: {}={} is not a team handle (SHMEM_TEAM_WORLD, SHMEM_TEAM_SHARED or one a split "
        "returned): the call fails",
        fn, param, static_cast<const void*>(handle));
    return nullptr;
  }
  return handle->team;
}

std::string TeamRegistry::split(Team& parent, const std::vector<PeSet>& sets,
                                const std::vector<shmem_team_config_t>& configs,
                                std::uint64_t call, const std::string& refusal,
                                std::vector<shmem_team_t>& out) {
  out.assign(sets.size(), SHMEM_TEAM_INVALID);
  // One reduction answers three questions: which slots are in use anywhere, whether every
  // member passed the same arguments (all calls agree iff OR(call) == call and OR(~call) ==
  // ~call everywhere), and whether any member refused its arguments.
  std::uint64_t mine[4];
  {
    std::lock_guard lock(mutex_);
    mine[0] = slots_in_use_;
  }
  mine[1] = call;
  mine[2] = ~call;
  mine[3] = refusal.empty() ? 0 : 1;
  std::uint64_t all[4] = {};
  collectives::reduce_or_u64(parent, all, mine, 4);
  if (all[3] != 0) {
    return refusal.empty() ? "another PE of the parent team passed arguments it refused" : refusal;
  }
  if (all[1] != call || all[2] != ~call) {
    return "the PEs of the parent team passed different arguments (every member must pass the "
           "same)";
  }
  // The teams of one call overlap (split_2d: each PE is in an x and a y team), so each takes its
  // own slot: the i-th lowest slot free on every parent member.
  std::vector<int> slots;
  for (int s = 0; s < kTeamSlots && slots.size() < sets.size(); ++s) {
    if ((all[0] & (std::uint64_t{1} << s)) == 0) slots.push_back(s);
  }
  if (slots.size() < sets.size()) {
    return fmt::format("no free team slot: at most {} teams besides SHMEM_TEAM_WORLD and "
                       "SHMEM_TEAM_SHARED exist at once (destroy one first)",
                       kTeamSlots - 2);
  }
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < sets.size(); ++i) {
    if (sets[i].size == 0) continue;
    slots_in_use_ |= std::uint64_t{1} << slots[i];
    auto* handle = handles_.emplace_back(std::make_unique<shmoe_team>()).get();
    handle->team = create(sets[i], slots[i], configs[i], handle);
    out[i] = handle;
  }
  return "";
}

void TeamRegistry::destroy(Team& team) {
  // After this barrier no member writes into this PE's scratch of the team any more, so the slot
  // can be cleared for its next team, whose flags and barrier counters start from zero.
  team.sync();
  std::lock_guard lock(mutex_);
  std::memset(rt_.heap_base() + slot_offset(team.slot()), 0, TeamScratch::kBytes);
  slots_in_use_ &= ~(std::uint64_t{1} << team.slot());
  team.handle()->team = nullptr;  // the handle stays (reading as invalid) until finalize
  std::erase_if(teams_, [&](const std::unique_ptr<Team>& t) { return t.get() == &team; });
}

Team& TeamRegistry::active_set(PeSet pes, const char* fn) {
  if (pes.size == 1) pes.stride = 1;  // one PE: every stride names the same set
  const std::uint64_t key = (std::uint64_t(pes.start) << 42) | (std::uint64_t(pes.stride) << 21) |
                            std::uint64_t(pes.size);
  std::lock_guard lock(mutex_);
  if (auto it = active_sets_.find(key); it != active_sets_.end()) return *it->second;
  if (pes.start >= (1 << 21) || pes.stride >= (1 << 21) || pes.size >= (1 << 21)) {
    api_error(fn, "active set (start {}, stride {}, size {}) is too large", pes.start, pes.stride,
              pes.size);
  }
  // The table of active-set keys lives on PE 0; entry s names the set that owns slot s. Members
  // of a set all find the same entry: keys are only ever added, by compare-and-swap.
  int slot = -1;
  for (int s = 0; s < kActiveSetSlots; ++s) {
    std::uint64_t found =
        rt_.transport().atomic(0, offset_ + s * 8, {transport::AmoOp::kCompareSwap, 8, key + 1, 0});
    if (found == 0 || found == key + 1) {
      slot = s;
      break;
    }
  }
  if (slot < 0) {
    api_error(fn,
              "more than {} distinct active sets in one job: shmoe keeps symmetric scratch for "
              "each; use teams (shmem_team_split_strided) instead",
              kActiveSetSlots);
  }
  int me = -1;
  for (int i = 0; i < pes.size; ++i) {
    if (pes.pe(i) == rt_.rank()) me = i;
  }
  auto team =
      std::make_unique<Team>(rt_, pes, me, kTeamSlots + slot, slot_offset(kTeamSlots + slot),
                             shmem_team_config_t{0}, nullptr);
  return *active_sets_.emplace(key, std::move(team)).first->second;
}

}  // namespace shmoe
