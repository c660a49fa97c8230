#include "mega_options.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "cli_checks.hpp"

namespace shmoe::tools {

MegaMoEConfig mega_config(const MegaOptions& o) {
  MegaMoEConfig c;
  c.max_tokens_per_pe = o.tokens;
  c.hidden = o.model_dim;
  c.intermediate_hidden = o.ffn_dim;
  c.num_topk = o.topk;
  c.num_experts_per_pe = o.experts_per_pe;
  c.format = o.mode;
  c.max_recv_rows = o.max_received_tokens;
  c.matrix_workers = o.matrix_workers;
  c.vector_workers = o.vector_workers;
  c.wave_rows = o.wave_rows;
  c.schedule = o.schedule == "overlapped" ? SHMOE_MEGA_SCHEDULE_OVERLAPPED
               : o.schedule == "inline"   ? SHMOE_MEGA_SCHEDULE_INLINE
               : o.schedule == "solo"     ? SHMOE_MEGA_SCHEDULE_SOLO
                                          : SHMOE_MEGA_SCHEDULE_AUTO;
  c.weights = o.weights == "fp8"    ? SHMOE_MEGA_WEIGHTS_FP8
              : o.weights == "bf16" ? SHMOE_MEGA_WEIGHTS_BF16
                                    : SHMOE_MEGA_WEIGHTS_AUTO;
  return c;
}

void add_mega_options(CLI::App& app, MegaOptionText& text, MegaOptions& o) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last one wins
  std::string& mode = text.mode;
  std::string& routing = text.routing;
  app.add_option("--pes,-n", o.pes, "number of PEs")
      ->envname("RANK_SIZE")
      ->check(CLI::Range(1, 64));
  app.add_option("--tokens", o.tokens, "tokens per PE")
      ->envname("TOKEN_COUNT")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--model-dim", o.model_dim)->envname("MODEL_DIM")->check(CLI::Range(1, 1 << 16));
  app.add_option("--ffn-dim", o.ffn_dim, "even: SwiGLU splits it in two halves")
      ->envname("FFN_DIM")
      ->check(CLI::Range(2, 1 << 17));
  app.add_option("--topk", o.topk)->envname("EXPERTS_PER_TOKEN")->check(CLI::Range(1, 4096));
  app.add_option("--experts-per-pe", o.experts_per_pe)
      ->envname("LOCAL_EXPERT_COUNT")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mode", mode, "e4m3 | e5m2")
      ->envname("MODE")
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  app.add_option("--max-received-tokens", o.max_received_tokens,
                 "rows a PE can receive (0: automatic, never overflows)")
      ->envname("MAX_RECEIVED_TOKENS")
      ->check(CLI::Range(std::size_t{0}, kMaxReceivedRows));
  app.add_option("--warmup", o.warmup)->envname("WARMUP")->check(CLI::Range(0, 1000000));
  app.add_option("--loops", o.loops)->envname("LOOP")->check(CLI::Range(1, 1000000));
  text.matrix_workers = app.add_option("--matrix-workers", o.matrix_workers, "matrix workers (AIC)")
                            ->envname("AIC_NUM");
  text.vector_workers = app.add_option("--vector-workers", o.vector_workers, "vector workers (AIV)")
                            ->envname("AIV_NUM");
  app.add_option("--wave-rows", o.wave_rows,
                 "rows per GEMM tile (0: automatic, 128 with the overlapped schedule, else 512)");
  app.add_option("--schedule", o.schedule,
                 "who runs SwiGLU and the write-back: overlapped (the vector workers, overlapping "
                 "the GEMMs), inline (the matrix worker), solo (no workers: the calling thread "
                 "does every part), auto (overlapped if the PE's share of the cores runs all its "
                 "workers at once, solo if it is under two cores, else inline)")
      ->check(CLI::IsMember({"auto", "overlapped", "inline", "solo"}));
  app.add_option("--weights", o.weights,
                 "how the experts' weights are kept: fp8 (the codes and scales, read directly by "
                 "small tiles), bf16 (expanded and packed for oneDNN), auto (fp8 where tokens * "
                 "topk <= 4 * experts-per-pe)")
      ->check(CLI::IsMember({"auto", "fp8", "bf16"}));
  app.add_flag("--unfused", o.unfused, "time the unfused chain instead of the fused operator");
  app.add_flag("--compare", o.compare,
               "also run the unfused chain on every verified call; outputs must match bitwise");
  app.add_flag("--perf", o.perf, "time warmup + loops calls and print the perf line");
  app.add_option("--iterations", o.iterations, "verified back-to-back calls")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--verify-tokens", o.verify_tokens,
                 "check each PE's first N tokens against the fp64 references (0: all; at a real "
                 "layer shape a whole prefill's references take minutes)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--trace", o.trace, "write one fused call's worker timeline (Chrome trace JSON)");
  app.add_option("--csv", o.csv, "append the perf line to this CSV file");
  app.add_option("--seed", o.routing.seed, "input seed (default: fresh, printed)")
      ->check(digits_only());
  app.add_option("--routing", routing, "uniform | zipf | hot")
      ->check(CLI::IsMember({"uniform", "zipf", "hot"}));
  app.add_option("--zipf-s", o.routing.zipf_s)->check(finite_range(0.0, 10.0));
  app.add_option("--drop", o.routing.drop, "probability of a -1 (no expert) entry")
      ->check(finite_range(0.0, 1.0));
  app.add_option("--empty-pes", o.routing.empty_pes, "the last N PEs have no tokens")
      ->check(CLI::Range(0, 64));
  app.add_option("--timeout", o.routing.timeout_s, "stop the whole run after this many seconds")
      ->check(finite_range(1.0, 1e6));
}

int finish_mega_options(const MegaOptionText& text, MegaOptions& o) {
  const std::string& mode = text.mode;
  const std::string& routing = text.routing;
  const CLI::Option* aic = text.matrix_workers;
  const CLI::Option* aiv = text.vector_workers;
  o.mode = mode == "e5m2" ? SHMOE_FP8_E5M2 : SHMOE_FP8_E4M3;
  o.routing.routing = routing == "zipf"  ? Routing::kZipf
                      : routing == "hot" ? Routing::kHot
                                         : Routing::kUniform;
  o.routing.pes = o.pes;
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "shmoe-moe mega: %s\n", why.c_str());
    return 2;
  };
  if (aic->count() != aiv->count()) {
    return refuse(
        "AIC_NUM/--matrix-workers and AIV_NUM/--vector-workers must be given together "
        "(or neither: 1 and 2)");
  }
  // The operator's own rules (the public API's check, which needs no PE), in the names of this
  // command line.
  static const std::map<std::string, std::string, std::less<>> kOptionOf = {
      {"max_tokens_per_pe", "TOKEN_COUNT (--tokens)"},
      {"hidden", "MODEL_DIM (--model-dim)"},
      {"intermediate_hidden", "FFN_DIM (--ffn-dim)"},
      {"num_topk", "EXPERTS_PER_TOKEN (--topk)"},
      {"num_experts_per_pe", "LOCAL_EXPERT_COUNT (--experts-per-pe)"},
      {"matrix_workers", "AIC_NUM (--matrix-workers)"},
      {"vector_workers", "AIV_NUM (--vector-workers)"},
      {"wave_rows", "--wave-rows"},
  };
  if (const std::string e = MegaMoE::config_error(mega_config(o), o.pes); !e.empty())
    return refuse(in_option_names(e, kOptionOf));
  if (o.routing.empty_pes > o.pes) {
    return refuse("--empty-pes=" + std::to_string(o.routing.empty_pes) + " is out of range (0.." +
                  std::to_string(o.pes) + ")");
  }
  return -1;
}

}  // namespace shmoe::tools
