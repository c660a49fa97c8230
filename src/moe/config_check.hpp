// The rules an operator's configuration must follow, written once: MoeBuffer and MegaMoE refuse
// a configuration that breaks one, and shmoe-moe checks its options against the same rules
// before it starts any PE, naming each field as its user spells it.
#pragma once

#include <string>

#include "moe/mega_moe.hpp"
#include "moe/moe.hpp"

namespace shmoe::moe {

// How the caller spells each field in a message.
struct MoeConfigNames {
  const char* experts_per_pe = "num_experts_per_pe";
  const char* max_bs = "max_tokens_per_pe";
  const char* hidden = "hidden";
  const char* topk = "num_topk";
  const char* workers = "workers";
  const char* token_side_bytes = "token_side_bytes";
  const char* header_ints = "header_ints";
  const char* shrink_timeout_ms = "shrink_timeout_ms";
  const char* max_recv_rows = "max_recv_rows";
  const char* recv_blocks = "recv_blocks";
};

struct MegaConfigNames {
  const char* tokens = "max_tokens_per_pe";
  const char* model_dim = "hidden";
  const char* ffn_dim = "intermediate_hidden";
  const char* topk = "num_topk";
  const char* experts_per_pe = "num_experts_per_pe";
  const char* matrix_workers = "workers.matrix";
  const char* vector_workers = "workers.vector";
  const char* wave_rows = "wave_rows";
  const char* schedule = "schedule";
};

// What is wrong with `c` on `n_pes` PEs, or "" when nothing is.
std::string config_error(const MoeConfig& c, int n_pes, const MoeConfigNames& names = {});
std::string config_error(const MegaMoEConfig& c, int n_pes, const MegaConfigNames& names = {});

}  // namespace shmoe::moe
