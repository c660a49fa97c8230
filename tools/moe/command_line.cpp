#include "command_line.hpp"

#include <CLI/CLI.hpp>

namespace shmoe::tools {

int parse_command_line(int argc, char** argv, MoeCommandLine& out) {
  CLI::App app{
      "shmoe-moe: run MoE dispatch/combine on N PEs of this machine, with generated "
      "inputs, golden outputs, verification and perf CSVs",
      "shmoe-moe"};
  app.set_help_flag("--help", "print this help");
  app.set_version_flag("--version", SHMOE_VERSION_STRING);
  // Every option's default shows in --help (the mega subcommand inherits this).
  app.option_defaults()->always_capture_default();
  MoeOptionText moe_text;
  add_moe_options(app, moe_text, out.moe);
  CLI::App* mega = app.add_subcommand(
      "mega",
      "run the fused MegaMoE layer (dispatch, FP8 quantization, GEMM1, SwiGLU, GEMM2, combine) "
      "on N PEs of this machine, verify it and time it");
  mega->set_help_flag("--help", "print this help");
  MegaOptionText mega_text;
  add_mega_options(*mega, mega_text, out.mega_options);
  try {
    app.parse(reversed_args(argc, argv));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  out.mega = mega->parsed();
  return out.mega ? finish_mega_options(mega_text, out.mega_options)
                  : finish_moe_options(moe_text, out.moe);
}

}  // namespace shmoe::tools
