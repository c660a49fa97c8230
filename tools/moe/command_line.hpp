// shmoe-moe's command line: dispatch/combine on the main command, and the fused MegaMoE layer as
// the CLI11 subcommand `mega`.
#pragma once

#include "mega_options.hpp"
#include "options.hpp"

namespace shmoe::tools {

struct MoeCommandLine {
  bool mega = false;  // `shmoe-moe mega ...`: mega_options; otherwise moe
  MoeRunOptions moe;
  MegaOptions mega_options;
};

// Parses argv. Returns an exit code to stop with (help, or an error said on stderr), or -1 to
// go on.
int parse_command_line(int argc, char** argv, MoeCommandLine& out);

}  // namespace shmoe::tools
