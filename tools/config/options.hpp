// shmoe-config's command line: --version | --prefix | --cflags | --libs | --env |
// --diagnose [--pes N].
#pragma once

namespace shmoe::tools::config {

struct Request {
  bool prefix = false, cflags = false, libs = false, env = false, diagnose = false;
  int pes = 1;  // the job size --diagnose plans for
};

// Fills `q` from argv (`q.pes` holds the default on entry). Returns -1 when there is work to do,
// otherwise the exit status (after printing the version, the help, or an error naming the option
// and the value).
int parse_config_options(int argc, char** argv, const char* version, Request& q);

}  // namespace shmoe::tools::config
