// Teams (OpenSHMEM 1.5 section 9.4): a strided set of PEs with its own symmetric scratch.
//
// The scratch of a team is one slot of a pool reserved at start-up at the same offset on every
// PE (so no shmem_malloc is ever needed on a subset of PEs, which would desynchronise the
// allocators of PEs outside it). A split agrees on a slot with an OR-reduction of the parent
// team's "slots in use" masks: the lowest slot free on every parent member is free on every
// member of the new team. Disjoint teams from one split (the rows of split_2d) share a slot
// number: their scratch lives in different PEs' segments.
//
// The deprecated active-set collectives use slots of a second pool. A table on PE 0 says which
// active set owns each slot, so the PEs of an active set agree on its slot without any collective
// call; a program may use any number of distinct active sets over its run, and a set gives its
// slot up to another when the pool is full and the set is idle:
//
//  - Each slot has a state word on PE 0: how many calls on its set are under way (counted per
//    PE and thread) and a generation that changes whenever the slot changes owner. A call enters
//    by raising the count, and keeps it only if the generation is the one this PE knows and no
//    takeover is in progress; it leaves by lowering it.
//  - A slot may change owner only while its count is 0. Every collective on an active set ends
//    with the set's barrier, so no member leaves call k before every member has entered it:
//    with no call under way, every member has finished the same calls and nothing is still
//    being written into any member's scratch. The new owner zeroes the old members' flags, so a
//    slot's scratch is zero on every PE its owner has not written to.
//  - Finding or claiming a slot happens under a lock word on PE 0, so two members of a new set
//    cannot claim two different slots for it.
// A PE that finds its slot's generation changed forgets the set and looks it up again: the set's
// members all do so at the same point of their calls on it, since the slot changed owner between
// two of them. Only calls in progress at the same time need slots of their own, at most
// kActiveSetSlots of them; a call that finds every slot busy waits, without holding the lock, for
// one to become idle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shmem.h"
#include "shmem/barrier.hpp"
#include "transport/transport.hpp"

namespace shmoe {

class Runtime;
class Team;

}  // namespace shmoe

// The object behind shmem_team_t. Handles stay allocated after shmem_team_destroy (with a null
// team), so a stale handle reads as an invalid team instead of freed memory.
struct shmoe_team {
  shmoe::Team* team = nullptr;
};

namespace shmoe {

// Layout of one scratch slot.
struct TeamScratch {
  static constexpr std::size_t kBarrierOffset = 0;
  static constexpr std::size_t kFlagsOffset = DisseminationBarrier::kFlagBytes;
  static constexpr std::size_t kFlagStride = 64;
  static constexpr int kNumFlags = 48;
  static constexpr std::size_t kDataOffset = kFlagsOffset + kNumFlags * kFlagStride;
  static constexpr std::size_t kDataBytes = 36u << 10;
  static constexpr std::size_t kBytes = kDataOffset + kDataBytes;

  // Flags 0..31: one per round of the partner-per-round algorithms (dissemination, Bruck,
  // recursive doubling); kTreeFlag: from the parent in a broadcast tree; kFoldFlag/kUnfoldFlag:
  // the extra step of recursive doubling on a size that is not a power of two.
  static constexpr int kTreeFlag = 32;
  static constexpr int kFoldFlag = 33;
  static constexpr int kUnfoldFlag = 34;
};

class Team {
 public:
  Team(Runtime& rt, PeSet pes, int my_index, int slot, std::size_t scratch_offset,
       shmem_team_config_t config, shmoe_team* handle);

  int size() const { return pes_.size; }
  int my_index() const { return my_index_; }
  const PeSet& pes() const { return pes_; }
  int world_pe(int index) const { return pes_.pe(index); }
  // The index of world PE `pe` in this team, or -1.
  int index_of(int pe) const;
  int slot() const { return slot_; }
  const shmem_team_config_t& config() const { return config_; }
  shmoe_team* handle() const { return handle_; }
  Runtime& runtime() const { return rt_; }
  transport::Transport& transport() const;
  std::mutex& mutex() { return mutex_; }

  void sync() { barrier_.arrive_and_wait(); }

  // A fresh value for the flags of one signalling phase: identical on every member, since they
  // make the same collective calls in the same order.
  std::uint64_t next_seq() { return ++seq_; }

  std::size_t data_offset() const { return scratch_ + TeamScratch::kDataOffset; }
  std::byte* local_data() const;
  // Stores `value` into flag `flag` of member `index`, after everything this PE wrote before.
  void signal(int index, int flag, std::uint64_t value);
  // Waits until this PE's flag `flag` holds at least `value`, which member `from` (-1: not
  // known) raises; `what` names the call in hang reports.
  void wait(int flag, std::uint64_t value, const char* what, int from = -1);

 private:
  Runtime& rt_;
  PeSet pes_;
  int my_index_;
  int slot_;
  std::size_t scratch_;
  shmem_team_config_t config_;
  shmoe_team* handle_;
  DisseminationBarrier barrier_;
  std::uint64_t seq_ = 0;
  std::mutex mutex_;
};

class TeamRegistry;

// One call on an active set, from its start to its end: holds the set's slot, which cannot change
// owner while any call holds it (see the protocol at the top of this file).
class ActiveSetCall {
 public:
  ActiveSetCall(TeamRegistry& registry, std::shared_ptr<Team> team, int slot)
      : registry_(&registry), team_(std::move(team)), slot_(slot) {}
  ActiveSetCall(const ActiveSetCall&) = delete;
  ActiveSetCall& operator=(const ActiveSetCall&) = delete;
  ~ActiveSetCall();

  Team& team() const { return *team_; }

 private:
  TeamRegistry* registry_;
  std::shared_ptr<Team> team_;
  int slot_;
};

class TeamRegistry {
 public:
  static constexpr int kTeamSlots = 32;  // two of them for SHMEM_TEAM_WORLD and _SHARED
  static constexpr int kActiveSetSlots = SHMOE_MAX_ACTIVE_SETS;
  // On PE 0: the key of each active-set slot's owner (0: none), each slot's state word, the lock.
  static constexpr std::size_t kKeyTableBytes = 64 * 8;
  static constexpr std::size_t kKeysOffset = 0;
  static constexpr std::size_t kStatesOffset = kKeysOffset + kActiveSetSlots * 8;
  static constexpr std::size_t kLockOffset = kStatesOffset + kActiveSetSlots * 8;
  static constexpr std::size_t kPoolSizeOffset = kLockOffset + 8;  // the first claimer's slots_
  static_assert(kPoolSizeOffset + 8 <= kKeyTableBytes);
  static constexpr std::size_t kReservedBytes =
      kKeyTableBytes + (kTeamSlots + kActiveSetSlots) * TeamScratch::kBytes;

  // `offset`: kReservedBytes of zeroed symmetric memory, at the same offset on every PE.
  TeamRegistry(Runtime& rt, std::size_t offset);
  ~TeamRegistry();

  // The team behind a handle, or nullptr for SHMEM_TEAM_INVALID and destroyed teams; also for a
  // value that is no team handle at all, after a warning naming `fn` and `param` (the caller
  // then returns the specification's error value instead of reading through it).
  Team* resolve(shmem_team_t handle, const char* fn, const char* param);

  // Collective over `parent`: forms the teams `sets` (world PE numbers, one entry per team this
  // call creates; size 0 where this PE is in none) on one slot number, agreed on by all parent
  // members. `out[i]` receives this PE's handle for sets[i], or SHMEM_TEAM_INVALID when this PE
  // is not in it. `call` identifies the caller's arguments and `refusal` says what is wrong with
  // them on this PE ("" if nothing): every member must pass the same call and no refusal.
  // Returns "" on success, else why no team was formed, the same verdict on every member (all
  // out[i] invalid).
  std::string split(Team& parent, const std::vector<PeSet>& sets,
                    const std::vector<shmem_team_config_t>& configs, std::uint64_t call,
                    const std::string& refusal, std::vector<shmem_team_t>& out);
  // Collective over the team.
  void destroy(Team& team);

  // Starts a call on the active set `pes` (which must contain this PE): its internal team, held
  // until the returned object is destroyed, which must be after the call's closing barrier.
  ActiveSetCall active_set(PeSet pes, const char* fn);

 private:
  friend class ActiveSetCall;

  // What this PE knows of an active set: its team and the slot (and that slot's generation)
  // where the team's scratch is.
  struct KnownSet {
    std::shared_ptr<Team> team;
    int slot = -1;
    std::uint64_t generation = 0;
  };
  // Raises the count of `slot` if its generation is still `generation` and no other set is taking
  // it over; false if the slot has changed owner or is changing it.
  bool enter(int slot, std::uint64_t generation);
  void leave(int slot);
  // Under the lock on PE 0: finds the set's slot, or claims a free one, or takes over one whose
  // set has no call under way, and enters it. Returns the slot and its generation, or nothing
  // when every slot has calls under way.
  std::optional<std::pair<int, std::uint64_t>> try_claim(std::uint64_t key, const char* fn);
  std::uint64_t atomic0(std::size_t offset, transport::AmoOp op, std::uint64_t operand,
                        std::uint64_t compare = 0);
  std::size_t slot_offset(int slot) const {
    return offset_ + kKeyTableBytes + static_cast<std::size_t>(slot) * TeamScratch::kBytes;
  }
  Team* create(PeSet pes, int slot, shmem_team_config_t config, shmoe_team* handle);

  Runtime& rt_;
  std::size_t offset_;
  std::uint64_t slots_in_use_ = 0;  // team slots whose scratch this PE uses
  std::vector<std::unique_ptr<Team>> teams_;
  // Every handle split ever returned: a destroyed team's handle must stay readable (as
  // invalid) until finalize, when these are freed.
  std::vector<std::unique_ptr<shmoe_team>> handles_;
  std::map<std::uint64_t, KnownSet> active_sets_;
  // Active-set slots in use: kActiveSetSlots, or fewer by SHMOE_ACTIVE_SET_SLOTS (for tests of
  // the slots changing owner), which must be the same on every PE.
  int slots_;
  int next_victim_ = 0;  // where the search for an idle slot to take over starts
  std::mutex mutex_;
};

}  // namespace shmoe
