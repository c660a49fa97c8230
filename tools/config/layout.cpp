#include "layout.hpp"

#include <algorithm>
#include <system_error>

namespace shmoe::tools::config {
namespace fs = std::filesystem;
namespace {

// The relative install directories come from GNUInstallDirs at configure time (the same values
// the install rules use); the build-tree locations are where this build put its outputs.
constexpr const char* kBinDir = SHMOE_INSTALL_BINDIR;
constexpr const char* kLibDir = SHMOE_INSTALL_LIBDIR;
constexpr const char* kIncludeDir = SHMOE_INSTALL_INCLUDEDIR;

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

bool is_inside(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

std::vector<ExpectedFile> installed_files(const fs::path& root) {
  const fs::path inc = root / kIncludeDir, lib = root / kLibDir, bin = root / kBinDir;
  return {
      {"include/shmem.h", inc / "shmem.h"},
      {"include/shmoe/type_tables.h", inc / "shmoe" / "type_tables.h"},
      {"lib/libshmoe.so", lib / "libshmoe.so"},
      {"bin/shmoerun", bin / "shmoerun"},
      {"bin/shmoe-moe", bin / "shmoe-moe"},
  };
}

std::vector<ExpectedFile> build_tree_files() {
  const fs::path inc = fs::path(SHMOE_API_INCLUDE_DIR);
  return {
      {"include/shmem.h", inc / "shmem.h"},
      {"include/shmoe/type_tables.h", inc / "shmoe" / "type_tables.h"},
      {"lib/libshmoe.so", fs::path(SHMOE_BUILD_LIB_DIR) / "libshmoe.so"},
      {"bin/shmoerun", fs::path(SHMOE_BUILD_SHMOERUN)},
      {"bin/shmoe-moe", fs::path(SHMOE_BUILD_SHMOE_MOE)},
  };
}

}  // namespace

fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : canonical_or_self(p);
}

Layout locate(const fs::path& exe) {
  Layout l;
  l.exe = exe;
  const fs::path build_dir = canonical_or_self(SHMOE_BUILD_TOOL_DIR);  // empty in a wheel
  if (!exe.empty() && !build_dir.empty() && is_inside(exe, build_dir)) {
    l.kind = LayoutKind::kBuildTree;
    l.root = canonical_or_self(SHMOE_BUILD_DIR);
    l.include_dir = fs::path(SHMOE_API_INCLUDE_DIR);
    l.lib_dir = SHMOE_BUILD_LIB_DIR;
    l.expected = build_tree_files();
  } else {
    // <prefix>/bin/shmoe-config. A binary elsewhere still answers for its parent's parent, but
    // says it could not tell, so --diagnose can point at the cause of the missing files.
    l.kind = exe.parent_path().filename() == fs::path(kBinDir).filename() ? LayoutKind::kInstalled
                                                                          : LayoutKind::kUnknown;
    l.root = exe.parent_path().parent_path();
    l.include_dir = l.root / kIncludeDir;
    l.lib_dir = l.root / kLibDir;
    l.expected = installed_files(l.root);
  }
  l.library = l.lib_dir / "libshmoe.so";
  return l;
}

std::string kind_name(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::kInstalled:
      return "installed";
    case LayoutKind::kBuildTree:
      return "build tree";
    case LayoutKind::kUnknown:
      return "unknown";
  }
  return "?";
}

std::string cflags(const Layout& layout) {
  return "-I" + layout.include_dir.string();
}

std::string libs(const Layout& layout) {
  const std::string dir = layout.lib_dir.string();
  return "-L" + dir + " -lshmoe -Wl,-rpath," + dir;
}

}  // namespace shmoe::tools::config
