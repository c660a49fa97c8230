// Team management routines (OpenSHMEM 1.5 section 9.4). Invalid arguments give the error values
// of the specification (-1, nonzero, SHMEM_TEAM_INVALID) instead of stopping the PE.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "common/log.hpp"
#include "common/splitmix.hpp"
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"
#include "shmem/team.hpp"

namespace {

using shmoe::PeSet;
using shmoe::Team;

Team* resolve(shmem_team_t team, const char* fn, const char* param = "team") {
  return shmoe::runtime(fn).teams().resolve(team, fn, param);
}

// A split's arguments as one word, for the check that every member passed the same.
std::uint64_t fingerprint(std::initializer_list<long> args) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  for (long a : args) h = shmoe::splitmix64(h ^ static_cast<std::uint64_t>(a));
  return h;
}

// Forms the teams of a split, or says on every member why it could not (the specification's
// error return alone tells the program nothing).
int finish_split(shmoe::Runtime& rt, Team& parent, const std::vector<PeSet>& sets,
                 const std::vector<shmem_team_config_t>& configs, std::uint64_t call,
                 const std::string& refusal, std::vector<shmem_team_t>& out, const char* fn) {
  std::lock_guard lock(parent.mutex());
  const std::string why = rt.teams().split(parent, sets, configs, call, refusal, out);
  if (why.empty()) return 0;
  shmoe::log::warn("{}: no team formed: {}", fn, why);
  return -1;
}

shmem_team_config_t config_or_default(const shmem_team_config_t* config, long mask) {
  shmem_team_config_t c{0};
  if (config != nullptr && (mask & SHMEM_TEAM_NUM_CONTEXTS) != 0)
    c.num_contexts = config->num_contexts;
  return c;
}

// The world PEs of parent indices start + i * stride, i < size (a strided set of a strided set).
PeSet compose(const Team& parent, int start, int stride, int size) {
  const PeSet& p = parent.pes();
  return PeSet{p.pe(start), stride * p.stride, size};
}

bool contains(const PeSet& set, int pe) {
  for (int i = 0; i < set.size; ++i) {
    if (set.pe(i) == pe) return true;
  }
  return false;
}

}  // namespace

extern "C" {

int pshmem_team_my_pe(shmem_team_t team) {
  Team* t = resolve(team, "shmem_team_my_pe");
  return t == nullptr ? -1 : t->my_index();
}

int pshmem_team_n_pes(shmem_team_t team) {
  Team* t = resolve(team, "shmem_team_n_pes");
  return t == nullptr ? -1 : t->size();
}

int pshmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config) {
  Team* t = resolve(team, "shmem_team_get_config");
  if (t == nullptr) return -1;
  // OpenSHMEM 1.6 (errata): a mask of 0 asks for nothing, so config is not read and may be NULL.
  if (config_mask == 0) return 0;
  if (config == nullptr) {
    shmoe::log::warn("shmem_team_get_config: config=NULL with config_mask={}: nowhere to write",
                     config_mask);
    return -1;
  }
  if ((config_mask & SHMEM_TEAM_NUM_CONTEXTS) != 0) config->num_contexts = t->config().num_contexts;
  return 0;
}

// OpenSHMEM 1.6 (9.1.10): shmem_ptr of the team's PE `pe`; NULL for a PE outside the team.
void* pshmem_team_ptr(shmem_team_t team, const void* dest, int pe) {
  Team* t = resolve(team, "shmem_team_ptr");
  if (t == nullptr || pe < 0 || pe >= t->size()) return nullptr;
  return pshmem_ptr(dest, t->world_pe(pe));
}

int pshmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  Team* src = resolve(src_team, "shmem_team_translate_pe", "src_team");
  Team* dst = resolve(dest_team, "shmem_team_translate_pe", "dest_team");
  if (src == nullptr || dst == nullptr || src_pe < 0 || src_pe >= src->size()) return -1;
  return dst->index_of(src->world_pe(src_pe));
}

int pshmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                              const shmem_team_config_t* config, long config_mask,
                              shmem_team_t* new_team) {
  const char* fn = "shmem_team_split_strided";
  auto& rt = shmoe::runtime(fn);
  if (new_team == nullptr) {
    shmoe::log::warn("{}: new_team=NULL: nowhere to return the team", fn);
    return -1;
  }
  *new_team = SHMEM_TEAM_INVALID;
  Team* parent = resolve(parent_team, fn, "parent_team");
  if (parent == nullptr) return -1;  // no team to agree with
  const int n = parent->size();
  std::string refusal;
  const long last = start + static_cast<long>(stride) * (size - 1);
  if (size < 1) {
    refusal = fmt::format("size={} is not positive", size);
  } else if (start < 0 || start >= n) {
    refusal = fmt::format("start={} is out of range for a parent team of {} PEs (0..{})", start, n,
                          n - 1);
  } else if (stride == 0 && size > 1) {
    refusal = fmt::format("stride=0 with size={} names PE {} {} times", size, start, size);
  } else if (last < 0 || last >= n) {
    refusal = fmt::format(
        "start={} stride={} size={} reaches parent PE {}, outside the parent team (0..{})", start,
        stride, size, last, n - 1);
  }
  PeSet set{0, 1, 0};
  if (refusal.empty()) {
    set = compose(*parent, start, size == 1 ? 1 : stride, size);
    if (!contains(set, rt.rank())) set.size = 0;
  }
  std::vector<shmem_team_t> out;
  const int status =
      finish_split(rt, *parent, {set}, {config_or_default(config, config_mask)},
                   fingerprint({start, size == 1 ? 1 : stride, size}), refusal, out, fn);
  *new_team = out[0];
  return status;
}

int pshmem_team_split_2d(shmem_team_t parent_team, int xrange,
                         const shmem_team_config_t* xaxis_config, long xaxis_mask,
                         shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                         long yaxis_mask, shmem_team_t* yaxis_team) {
  const char* fn = "shmem_team_split_2d";
  auto& rt = shmoe::runtime(fn);
  if (xaxis_team == nullptr || yaxis_team == nullptr) {
    shmoe::log::warn("{}: xaxis_team={} yaxis_team={}: nowhere to return the teams", fn,
                     static_cast<void*>(xaxis_team), static_cast<void*>(yaxis_team));
    return -1;
  }
  *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
  Team* parent = resolve(parent_team, fn, "parent_team");
  if (parent == nullptr) return -1;
  const int n = parent->size(), me = parent->my_index();
  std::string refusal;
  if (xrange < 1) refusal = fmt::format("xrange={} is not positive", xrange);
  const int given_xrange = xrange;
  xrange = std::clamp(xrange, 1, n);  // above n: the x-axis team is the whole parent
  // x: the row of xrange consecutive parent indices holding this PE (the last may be short);
  // y: the column of indices congruent to this PE's modulo xrange.
  const int x_start = me / xrange * xrange, x_size = std::min(xrange, n - x_start);
  const int y_start = me % xrange, y_size = (n - y_start + xrange - 1) / xrange;
  std::vector<PeSet> sets = {compose(*parent, x_start, 1, x_size),
                             compose(*parent, y_start, xrange, y_size)};
  if (!refusal.empty()) sets[0].size = sets[1].size = 0;
  std::vector<shmem_team_t> out;
  const int status = finish_split(
      rt, *parent, sets,
      {config_or_default(xaxis_config, xaxis_mask), config_or_default(yaxis_config, yaxis_mask)},
      fingerprint({given_xrange}), refusal, out, fn);
  *xaxis_team = out[0];
  *yaxis_team = out[1];
  return status;
}

void pshmem_team_destroy(shmem_team_t team) {
  auto& rt = shmoe::runtime("shmem_team_destroy");
  if (team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED) {
    shmoe::api_error("shmem_team_destroy", "the predefined teams cannot be destroyed");
  }
  Team* t = rt.teams().resolve(team, "shmem_team_destroy", "team");
  if (t == nullptr) return;  // destroying SHMEM_TEAM_INVALID does nothing
  rt.teams().destroy(*t);
}

int pshmem_team_sync(shmem_team_t team) {
  Team* t = resolve(team, "shmem_team_sync");
  if (t == nullptr) return -1;
  std::lock_guard lock(t->mutex());
  t->sync();
  return 0;
}

// A context made on a team addresses PEs by their number in that team; check_remote translates.
int pshmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx) {
  Team* t = resolve(team, "shmem_team_create_ctx");
  if (ctx == nullptr) return -1;
  *ctx = SHMEM_CTX_INVALID;
  if (t == nullptr) return -1;
  if (pshmem_ctx_create(options, ctx) != 0) return -1;
  (*ctx)->team = team;
  (*ctx)->pe_start = t->pes().start;
  (*ctx)->pe_stride = t->pes().stride;
  (*ctx)->pe_count = t->size();
  return 0;
}

int pshmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team) {
  if (team == nullptr) return -1;
  if (!shmoe::live_contexts::contains(ctx)) {
    *team = SHMEM_TEAM_INVALID;
    return -1;
  }
  *team = ctx == SHMEM_CTX_DEFAULT || ctx->team == nullptr ? SHMEM_TEAM_WORLD : ctx->team;
  return 0;
}

SHMOE_WEAK_ALIAS(shmem_team_my_pe)
SHMOE_WEAK_ALIAS(shmem_team_n_pes)
SHMOE_WEAK_ALIAS(shmem_team_get_config)
SHMOE_WEAK_ALIAS(shmem_team_ptr)
SHMOE_WEAK_ALIAS(shmem_team_translate_pe)
SHMOE_WEAK_ALIAS(shmem_team_split_strided)
SHMOE_WEAK_ALIAS(shmem_team_split_2d)
SHMOE_WEAK_ALIAS(shmem_team_destroy)
SHMOE_WEAK_ALIAS(shmem_team_sync)
SHMOE_WEAK_ALIAS(shmem_team_create_ctx)
SHMOE_WEAK_ALIAS(shmem_ctx_get_team)

}  // extern "C"
