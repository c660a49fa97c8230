// `shmoe-moe mega`: the MegaMoE layer's command line. Every option also reads the reference
// system's environment name (RANK_SIZE, TOKEN_COUNT, ...); a command-line value wins.
#pragma once

#include <cstdint>
#include <string>

#include "options.hpp"

namespace shmoe::tools {

struct MegaOptions {
  int pes = 2;
  int tokens = 16;  // per PE
  int model_dim = 256, ffn_dim = 512, topk = 2, experts_per_pe = 2;
  shmoe_fp8_format_t mode = SHMOE_FP8_E4M3;
  std::size_t max_received_tokens = 0;
  int warmup = 2, loops = 10;
  int matrix_workers = 0, vector_workers = 0;
  int wave_rows = 0;              // 0: the operator's automatic choice
  std::string schedule = "auto";  // auto | overlapped | inline (shmoe_mega_schedule_t)
  std::string weights = "auto";   // auto | fp8 | bf16 (shmoe_mega_weights_t)
  bool unfused = false;           // time the unfused chain instead of the fused operator
  bool compare = false;           // also run the unfused chain and require bitwise-equal outputs
  bool perf = false;
  int iterations = 1;     // verified back-to-back calls, fresh inputs each
  int verify_tokens = 0;  // tokens per PE checked against the fp64 references (0: all)
  std::string trace;      // Chrome trace JSON of one fused call
  std::string csv;        // append the perf line to this CSV
  MoeRunOptions routing;  // seed, routing, zipf_s, drop, empty_pes, timeout_s
};

// What the command line gives as text, before finish_mega_options checks it.
struct MegaOptionText {
  std::string mode = "e4m3", routing = "uniform";
  CLI::Option* matrix_workers = nullptr;  // given together with vector_workers, or neither
  CLI::Option* vector_workers = nullptr;
};

// The options of the `mega` subcommand (command_line.hpp).
void add_mega_options(CLI::App& app, MegaOptionText& text, MegaOptions& o);
// After parsing: the refusals CLI11 cannot express. Returns an exit code to stop with (an
// error, said on stderr), or -1 to go on.
int finish_mega_options(const MegaOptionText& text, MegaOptions& o);

// The operator's configuration the options ask for (the public API's).
MegaMoEConfig mega_config(const MegaOptions& options);

}  // namespace shmoe::tools
