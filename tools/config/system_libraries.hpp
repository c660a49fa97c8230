// The system libraries libshmoe.so needs that a wheel cannot carry (UCX, PMIx, oneDNN,
// libcrypto, fmt, GCC's OpenMP runtime), as shmoe-config --diagnose reports them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shmoe::tools::config {

struct SystemLibrary {
  std::string soname;   // libucp.so.0
  std::string what;     // UCX
  std::string package;  // Debian's package that holds it
  std::string path;     // where the loader finds it; empty: it does not
};

// Each library as the loader finds it from this process.
std::vector<SystemLibrary> system_libraries();

// Why the loader cannot load `library` (its dlerror, which names a missing dependency); empty
// when it loads.
std::string load_error(const std::filesystem::path& library);

}  // namespace shmoe::tools::config
