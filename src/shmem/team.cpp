#include "shmem/team.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "common/settings.hpp"
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
  t.fence(nullptr);  // the data this flag announces lands first (non-temporal stores included)
  t.fetch_atomic(nullptr, world_pe(index),
                 scratch_ + TeamScratch::kFlagsOffset + flag * TeamScratch::kFlagStride,
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

TeamRegistry::TeamRegistry(Runtime& rt, std::size_t offset)
    : rt_(rt), offset_(offset), slots_(static_cast<int>(settings::active_set_slots())) {
  static_assert(kActiveSetSlots == 16, "settings.def gives SHMOE_ACTIVE_SET_SLOTS 1..16");
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
                                const std::vector<shmem_team_config_t>& configs, std::uint64_t call,
                                const std::string& refusal, std::vector<shmem_team_t>& out) {
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
    return fmt::format(
        "no free team slot: at most {} teams besides SHMEM_TEAM_WORLD and "
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

namespace {

// An active set's key: its triple, as the table on PE 0 holds it (plus one, so 0 means "none").
std::uint64_t active_set_key(const PeSet& pes) {
  return (std::uint64_t(pes.start) << 42) | (std::uint64_t(pes.stride) << 21) |
         std::uint64_t(pes.size);
}
PeSet active_set_of_key(std::uint64_t key) {
  constexpr std::uint64_t kField = (std::uint64_t{1} << 21) - 1;
  return PeSet{static_cast<int>(key >> 42), static_cast<int>((key >> 21) & kField),
               static_cast<int>(key & kField)};
}

// A slot's state word: calls under way (bits 0..31), an eviction in progress (bit 32), the
// generation (bits 33..63), which changes whenever the slot changes owner.
constexpr std::uint64_t kCallsMask = 0xffff'ffff;
constexpr std::uint64_t kEvicting = std::uint64_t{1} << 32;
constexpr std::uint64_t kGenerationStep = std::uint64_t{1} << 33;
std::uint64_t generation_of(std::uint64_t state) {
  return state & ~(kCallsMask | kEvicting);
}

}  // namespace

ActiveSetCall::~ActiveSetCall() {
  registry_->leave(slot_);
}

std::uint64_t TeamRegistry::atomic0(std::size_t offset, transport::AmoOp op, std::uint64_t operand,
                                    std::uint64_t compare) {
  return rt_.transport().fetch_atomic(nullptr, 0, offset_ + offset, {op, 8, operand, compare});
}

bool TeamRegistry::enter(int slot, std::uint64_t generation) {
  // One atomic on the common path. A PE whose set has lost the slot (or is losing it) takes its
  // increment back; until then the slot looks busy, which only delays taking it over.
  const std::size_t state_word = kStatesOffset + static_cast<std::size_t>(slot) * 8;
  const std::uint64_t state = atomic0(state_word, transport::AmoOp::kAdd, 1);
  if (generation_of(state) == generation && (state & kEvicting) == 0) return true;
  leave(slot);
  return false;
}

void TeamRegistry::leave(int slot) {
  atomic0(kStatesOffset + static_cast<std::size_t>(slot) * 8, transport::AmoOp::kAdd,
          ~std::uint64_t{0});  // minus one
}

std::optional<std::pair<int, std::uint64_t>> TeamRegistry::try_claim(std::uint64_t key,
                                                                     const char* fn) {
  using transport::AmoOp;
  wait_until([&] { return atomic0(kLockOffset, AmoOp::kCompareSwap, 1, 0) == 0; },
             [&] {
               return WaitState{
                   fn, fmt::format("{}: the active-set table lock on PE 0", fn), 0, 0, 1, 0};
             });
  const std::uint64_t pool = atomic0(kPoolSizeOffset, AmoOp::kCompareSwap, slots_, 0);
  if (pool != 0 && pool != static_cast<std::uint64_t>(slots_)) {
    atomic0(kLockOffset, AmoOp::kStore, 0);
    api_error(fn,
              "SHMOE_ACTIVE_SET_SLOTS is {} on this PE but {} on another; it must be the same "
              "on every PE",
              slots_, pool);
  }
  auto state_word = [](int s) { return kStatesOffset + static_cast<std::size_t>(s) * 8; };
  auto key_word = [](int s) { return kKeysOffset + static_cast<std::size_t>(s) * 8; };
  int slot = -1, free_slot = -1;
  for (int s = 0; s < slots_ && slot < 0; ++s) {
    const std::uint64_t owner = atomic0(key_word(s), AmoOp::kLoad, 0);
    if (owner == key + 1) slot = s;
    if (owner == 0 && free_slot < 0) free_slot = s;
  }
  if (slot < 0 && free_slot >= 0) {
    slot = free_slot;
    atomic0(key_word(slot), AmoOp::kStore, key + 1);
  }
  if (slot < 0) {
    // Every slot has an owner: take over one whose set has no call under way. Only the lock
    // holder sets kEvicting, and a call only enters while it is clear.
    std::uint64_t state = 0;
    for (int i = 0; i < slots_ && slot < 0; ++i) {
      const int s = (next_victim_ + i) % slots_;
      state = atomic0(state_word(s), AmoOp::kLoad, 0);
      if ((state & (kCallsMask | kEvicting)) == 0 &&
          atomic0(state_word(s), AmoOp::kCompareSwap, state | kEvicting, state) == state) {
        slot = s;
      }
    }
    if (slot < 0) {  // all busy: let their calls finish (their members may need this lock)
      atomic0(kLockOffset, AmoOp::kStore, 0);
      return std::nullopt;
    }
    next_victim_ = (slot + 1) % slots_;
    // Its old members' flags and barrier counters start from zero for the new owner (the data
    // area needs no clearing: every byte of it is written before the flag announcing it).
    const PeSet old_set = active_set_of_key(atomic0(key_word(slot), AmoOp::kLoad, 0) - 1);
    const std::vector<std::byte> zeros(TeamScratch::kDataOffset);
    for (int i = 0; i < old_set.size; ++i) {
      rt_.transport().put(nullptr, old_set.pe(i), slot_offset(kTeamSlots + slot), zeros.data(),
                          zeros.size());
    }
    rt_.transport().quiet(nullptr);
    atomic0(key_word(slot), AmoOp::kStore, key + 1);
    // Next generation, kEvicting cleared; an add, so the increments of callers that have found
    // the slot changed and are taking them back stay counted.
    atomic0(state_word(slot), AmoOp::kAdd, kGenerationStep - kEvicting);
  }
  // Entered while the lock is held, so the slot cannot change owner before this call holds it.
  const std::uint64_t generation = generation_of(atomic0(state_word(slot), AmoOp::kLoad, 0));
  const bool entered = enter(slot, generation);
  atomic0(kLockOffset, AmoOp::kStore, 0);
  if (!entered) {  // only the lock holder changes a generation: this cannot happen
    log::fatal(
        fmt::format("{}: internal error: active-set slot {} changed owner while this PE "
                    "held the table lock",
                    fn, slot));
  }
  return std::pair{slot, generation};
}

ActiveSetCall TeamRegistry::active_set(PeSet pes, const char* fn) {
  if (pes.size == 1) pes.stride = 1;  // one PE: every stride names the same set
  if (pes.start >= (1 << 21) || pes.stride >= (1 << 21) || pes.size >= (1 << 21)) {
    api_error(fn, "active set (start {}, stride {}, size {}) is too large", pes.start, pes.stride,
              pes.size);
  }
  const std::uint64_t key = active_set_key(pes);
  std::shared_ptr<Team> team;
  int slot = -1;
  auto start_call = [&] {
    std::lock_guard lock(mutex_);
    if (auto it = active_sets_.find(key); it != active_sets_.end()) {
      if (enter(it->second.slot, it->second.generation)) {
        team = it->second.team;
        slot = it->second.slot;
        return true;
      }
      active_sets_.erase(it);  // its slot changed owner since this PE's last call on it
    }
    const auto claimed = try_claim(key, fn);
    if (!claimed) return false;
    int me = -1;
    for (int i = 0; i < pes.size; ++i) {
      if (pes.pe(i) == rt_.rank()) me = i;
    }
    slot = claimed->first;
    team = std::make_shared<Team>(rt_, pes, me, kTeamSlots + slot, slot_offset(kTeamSlots + slot),
                                  shmem_team_config_t{0}, nullptr);
    active_sets_[key] = KnownSet{team, slot, claimed->second};
    return true;
  };
  if (!start_call()) {
    wait_until(start_call, [&] {
      return WaitState{fn,
                       fmt::format("{} on the active set (start {}, stride {}, size {}): all {} "
                                   "active-set slots have calls under way; waiting for one",
                                   fn, pes.start, pes.stride, pes.size, slots_),
                       -1,
                       0,
                       0,
                       0};
    });
  }
  return ActiveSetCall(*this, std::move(team), slot);
}

}  // namespace shmoe
