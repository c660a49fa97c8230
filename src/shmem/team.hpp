// Teams (OpenSHMEM 1.5 section 9.4): a strided set of PEs with its own symmetric scratch.
//
// The scratch of a team is one slot of a pool reserved at start-up at the same offset on every
// PE (so no shmem_malloc is ever needed on a subset of PEs, which would desynchronise the
// allocators of PEs outside it). A split agrees on a slot with an OR-reduction of the parent
// team's "slots in use" masks: the lowest slot free on every parent member is free on every
// member of the new team. Disjoint teams from one split (the rows of split_2d) share a slot
// number: their scratch lives in different PEs' segments.
//
// The deprecated active-set collectives use slots of a second pool, one per distinct active set,
// found through a table of keys on PE 0 that members claim with compare-and-swap, so the PEs of
// an active set agree on its slot without any collective call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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

class TeamRegistry {
 public:
  static constexpr int kTeamSlots = 32;  // two of them for SHMEM_TEAM_WORLD and _SHARED
  static constexpr int kActiveSetSlots = SHMOE_MAX_ACTIVE_SETS;
  static constexpr std::size_t kKeyTableBytes = 64 * 8;
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

  // The internal team of the active set `pes` (which must contain this PE).
  Team& active_set(PeSet pes, const char* fn);

 private:
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
  std::map<std::uint64_t, std::unique_ptr<Team>> active_sets_;
  std::mutex mutex_;
};

}  // namespace shmoe
