#include "system_libraries.hpp"

#include <dlfcn.h>
#include <link.h>

namespace shmoe::tools::config {
namespace {

struct Known {
  const char* soname;
  const char* what;
  const char* package;
};

// Debian 12's sonames and packages (scripts/install-deps.sh installs their -dev packages).
constexpr Known kLibraries[] = {
    {"libucp.so.0", "UCX", "libucx0"},      {"libpmix.so.2", "PMIx", "libpmix2"},
    {"libdnnl.so.2", "oneDNN", "libdnnl2"}, {"libcrypto.so.3", "OpenSSL's libcrypto", "libssl3"},
    {"libfmt.so.9", "fmt", "libfmt9"},      {"libgomp.so.1", "GCC's OpenMP runtime", "libgomp1"},
};

// The loader's path for a library it can load (left loaded: UCX frees nothing at unload).
std::string loaded_path(const char* soname) {
  void* handle = ::dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return "";
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    return map->l_name;
  return soname;
}

}  // namespace

std::vector<SystemLibrary> system_libraries() {
  std::vector<SystemLibrary> out;
  for (const Known& k : kLibraries)
    out.push_back({k.soname, k.what, k.package, loaded_path(k.soname)});
  return out;
}

std::string load_error(const std::filesystem::path& library) {
  ::dlerror();
  if (::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL) != nullptr) return "";
  const char* why = ::dlerror();
  return why != nullptr ? why : "dlopen failed";
}

}  // namespace shmoe::tools::config
