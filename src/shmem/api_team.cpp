// Team management routines (OpenSHMEM 1.5 section 9.4). Invalid arguments give the error values
// of the specification (-1, nonzero, SHMEM_TEAM_INVALID) instead of stopping the PE.
#include "shmem/profiling.hpp"
#include "shmem/runtime.hpp"
#include "shmem/team.hpp"

namespace {

using shmoe::PeSet;
using shmoe::Team;
using shmoe::TeamRegistry;

Team* resolve(shmem_team_t team, const char* fn) {
  shmoe::runtime(fn);
  return TeamRegistry::resolve(team);
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
  if (t == nullptr || config == nullptr) return -1;
  if ((config_mask & SHMEM_TEAM_NUM_CONTEXTS) != 0) config->num_contexts = t->config().num_contexts;
  return 0;
}

int pshmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team) {
  Team* src = resolve(src_team, "shmem_team_translate_pe");
  Team* dst = TeamRegistry::resolve(dest_team);
  if (src == nullptr || dst == nullptr || src_pe < 0 || src_pe >= src->size()) return -1;
  return dst->index_of(src->world_pe(src_pe));
}

int pshmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                              const shmem_team_config_t* config, long config_mask,
                              shmem_team_t* new_team) {
  auto& rt = shmoe::runtime("shmem_team_split_strided");
  if (new_team == nullptr) return -1;
  *new_team = SHMEM_TEAM_INVALID;
  Team* parent = TeamRegistry::resolve(parent_team);
  if (parent == nullptr || size < 1 || start < 0 || start >= parent->size()) return -1;
  if (stride == 0 && size > 1) return -1;  // the same PE twice
  const long last = start + static_cast<long>(stride) * (size - 1);
  if (last < 0 || last >= parent->size()) return -1;
  PeSet set = compose(*parent, start, size == 1 ? 1 : stride, size);
  if (!contains(set, rt.rank())) set.size = 0;
  std::vector<shmem_team_t> out;
  std::lock_guard lock(parent->mutex());
  bool ok = rt.teams().split(*parent, {set}, {config_or_default(config, config_mask)}, out);
  *new_team = out[0];
  return ok ? 0 : -1;
}

int pshmem_team_split_2d(shmem_team_t parent_team, int xrange,
                         const shmem_team_config_t* xaxis_config, long xaxis_mask,
                         shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                         long yaxis_mask, shmem_team_t* yaxis_team) {
  auto& rt = shmoe::runtime("shmem_team_split_2d");
  if (xaxis_team == nullptr || yaxis_team == nullptr) return -1;
  *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
  Team* parent = TeamRegistry::resolve(parent_team);
  if (parent == nullptr || xrange < 1) return -1;
  const int n = parent->size(), me = parent->my_index();
  if (xrange > n) xrange = n;  // the x-axis team is then the whole parent
  // x: the row of xrange consecutive parent indices holding this PE (the last may be short);
  // y: the column of indices congruent to this PE's modulo xrange.
  const int x_start = me / xrange * xrange, x_size = std::min(xrange, n - x_start);
  const int y_start = me % xrange, y_size = (n - y_start + xrange - 1) / xrange;
  std::vector<PeSet> sets = {compose(*parent, x_start, 1, x_size),
                             compose(*parent, y_start, xrange, y_size)};
  std::vector<shmem_team_t> out;
  std::lock_guard lock(parent->mutex());
  bool ok = rt.teams().split(
      *parent, sets,
      {config_or_default(xaxis_config, xaxis_mask), config_or_default(yaxis_config, yaxis_mask)},
      out);
  *xaxis_team = out[0];
  *yaxis_team = out[1];
  return ok ? 0 : -1;
}

void pshmem_team_destroy(shmem_team_t team) {
  auto& rt = shmoe::runtime("shmem_team_destroy");
  if (team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED) {
    shmoe::api_error("shmem_team_destroy", "the predefined teams cannot be destroyed");
  }
  Team* t = TeamRegistry::resolve(team);
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
  if (ctx == SHMEM_CTX_INVALID || !ctx->live) {
    *team = SHMEM_TEAM_INVALID;
    return -1;
  }
  *team = ctx == SHMEM_CTX_DEFAULT || ctx->team == nullptr ? SHMEM_TEAM_WORLD : ctx->team;
  return 0;
}

SHMOE_WEAK_ALIAS(shmem_team_my_pe)
SHMOE_WEAK_ALIAS(shmem_team_n_pes)
SHMOE_WEAK_ALIAS(shmem_team_get_config)
SHMOE_WEAK_ALIAS(shmem_team_translate_pe)
SHMOE_WEAK_ALIAS(shmem_team_split_strided)
SHMOE_WEAK_ALIAS(shmem_team_split_2d)
SHMOE_WEAK_ALIAS(shmem_team_destroy)
SHMOE_WEAK_ALIAS(shmem_team_sync)
SHMOE_WEAK_ALIAS(shmem_team_create_ctx)
SHMOE_WEAK_ALIAS(shmem_ctx_get_team)

}  // extern "C"
