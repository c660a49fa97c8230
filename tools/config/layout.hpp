// Where this shmoe lives. shmoe-config finds its installation from its own path
// (<prefix>/bin/shmoe-config), so a copy moved with its prefix keeps answering for that prefix,
// and nothing is baked in except the layout under the prefix. The binary the build produced
// answers for the build tree instead (headers in the source tree, libraries in the build tree).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shmoe::tools::config {

enum class LayoutKind { kInstalled, kBuildTree, kUnknown };

// A file a complete installation holds: its path relative to the prefix (the name reports use)
// and where this layout keeps it.
struct ExpectedFile {
  std::string name;
  std::filesystem::path path;
};

struct Layout {
  LayoutKind kind = LayoutKind::kUnknown;
  std::filesystem::path exe;   // this program, symlinks resolved
  std::filesystem::path root;  // the install prefix, or the build directory
  std::filesystem::path include_dir;
  std::filesystem::path lib_dir;
  std::filesystem::path library;  // libshmoe.so, the name the linker and the loader use
  std::vector<ExpectedFile> expected;
};

// /proc/self/exe, resolved; empty when it cannot be read.
std::filesystem::path self_exe();

Layout locate(const std::filesystem::path& exe);

std::string kind_name(LayoutKind kind);

std::string cflags(const Layout& layout);
std::string libs(const Layout& layout);

}  // namespace shmoe::tools::config
