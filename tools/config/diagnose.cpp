#include "diagnose.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "common/bytes.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/settings.hpp"
#include "shmem/segment_size.hpp"
#include "system_libraries.hpp"

namespace shmoe::tools::config {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kShmDir = "/dev/shm";

// Collects the sections of the report and one next step per problem found.
struct Report {
  Json json = Json::object();
  std::vector<std::string> next_steps;
  void problem(std::string step) { next_steps.push_back(std::move(step)); }
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command and returns its stdout, or nothing when it could not run or failed.
std::optional<std::string> capture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::optional<fs::path> find_on_path(const std::string& program) {
  auto path = env::get("PATH");
  if (!path) return std::nullopt;
  std::stringstream dirs(*path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  return ec ? p : c;
}

// --- files -----------------------------------------------------------------------------------

void check_layout(const Layout& layout, Report& r) {
  if (layout.kind == LayoutKind::kUnknown) {
    r.problem(fmt::format(
        "shmoe-config runs from {}, not from <prefix>/bin: run the copy that `cmake --install` "
        "put in <prefix>/bin, so it can find the installation it belongs to",
        layout.exe.parent_path().string()));
  }
}

void check_files(const Layout& layout, Report& r) {
  Json checked = Json::object();
  Json missing = Json::array();
  for (const auto& f : layout.expected) {
    checked[f.name] = f.path.string();
    std::error_code ec;
    if (!fs::exists(f.path, ec)) missing.push_back(f.name);
  }
  r.json["files"] = {{"complete", missing.empty()}, {"missing", missing}, {"checked", checked}};
  if (missing.empty()) return;
  std::vector<std::string> names(missing.begin(), missing.end());
  if (layout.kind == LayoutKind::kBuildTree) {
    r.problem(fmt::format("the build tree lacks {}: run `ninja` (or `cmake --build`) in {}",
                          fmt::join(names, ", "), layout.root.string()));
  } else {
    r.problem(fmt::format(
        "{} lacks {}: reinstall with `cmake --install BUILD_DIR --prefix {}` from a complete "
        "build",
        layout.root.string(), fmt::join(names, ", "), layout.root.string()));
  }
}

// --- copies of libshmoe the loader could pick instead -------------------------------------------

struct LibraryCopy {
  fs::path path;
  std::string found_via;
};

bool is_libshmoe_name(const std::string& name) {
  return name.rfind("libshmoe.so", 0) == 0;
}

std::vector<LibraryCopy> copies_on_ld_library_path() {
  std::vector<LibraryCopy> out;
  auto value = env::get("LD_LIBRARY_PATH");
  if (!value) return out;
  std::stringstream dirs(*value);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
      if (is_libshmoe_name(entry.path().filename().string())) {
        out.push_back({entry.path(), "LD_LIBRARY_PATH"});
      }
    }
  }
  return out;
}

// `ldconfig -p` lines look like "\tlibshmoe.so.0 (libc6,x86-64) => /usr/local/lib/libshmoe.so.0".
// ldconfig lives in /sbin, which is not on every user's PATH.
std::vector<LibraryCopy> copies_in_ldconfig_cache() {
  std::vector<LibraryCopy> out;
  auto listing =
      capture("{ ldconfig -p || /sbin/ldconfig -p || /usr/sbin/ldconfig -p; } 2>/dev/null");
  if (!listing) return out;
  static const std::regex line(R"(^\s*(libshmoe\.so\S*)\s.*=>\s*(\S+)\s*$)");
  std::stringstream lines(*listing);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) out.push_back({m[2].str(), "ldconfig cache"});
  }
  return out;
}

void check_loader_path(const Layout& layout, Report& r) {
  std::vector<LibraryCopy> copies = copies_on_ld_library_path();
  for (auto& c : copies_in_ldconfig_cache()) copies.push_back(std::move(c));
  // Symlinks (libshmoe.so -> .so.0 -> .so.0.1.0) are the same library, so compare resolved
  // paths; a leftover libshmoe.so.0.0.9 next to the installed one is still a different file.
  std::error_code ec;
  const bool have_installed = fs::exists(layout.library, ec);
  const fs::path installed = resolved(layout.library);
  Json list = Json::array();
  std::set<std::string> seen;
  std::vector<std::string> conflicts;
  for (const auto& c : copies) {
    const fs::path target = resolved(c.path);
    if (!seen.insert(c.path.string() + '\n' + c.found_via).second) continue;
    const bool conflict = !have_installed || target != installed;
    list.push_back({{"path", c.path.string()},
                    {"resolves_to", target.string()},
                    {"found_via", c.found_via},
                    {"conflict", conflict}});
    if (conflict) conflicts.push_back(fmt::format("{} ({})", c.path.string(), c.found_via));
  }
  r.json["loader_path"] = {{"installed_library", layout.library.string()}, {"copies", list}};
  if (!conflicts.empty()) {
    r.problem(fmt::format(
        "other copies of libshmoe can be loaded instead of {}: {}. Remove them, or take their "
        "directories out of LD_LIBRARY_PATH (it overrides the rpath that --libs sets) and run "
        "`ldconfig` after removing ones from system directories",
        layout.library.string(), fmt::join(conflicts, ", ")));
  }
}

// --- shared memory ------------------------------------------------------------------------------

struct SymmetricSize {
  std::size_t bytes = 0;
  std::string source = "default";
  std::optional<std::string> error;
};

// The settings the runtime reads: SHMEM_SYMMETRIC_SIZE, else the older SMA_ spelling.
SymmetricSize symmetric_size() {
  SymmetricSize s;
  try {
    const settings::SymmetricSize in_force = settings::symmetric_size_in_force();
    s.bytes = in_force.bytes;
    if (!in_force.text.empty()) s.source = in_force.variable;
  } catch (const Error& e) {
    s.error = e.what();
    s.source =
        settings::text_of("SHMEM_SYMMETRIC_SIZE") ? "SHMEM_SYMMETRIC_SIZE" : "SMA_SYMMETRIC_SIZE";
  }
  return s;
}

void shm_problem(const SymmetricSize& size, int pes, std::uint64_t needed, std::uint64_t free,
                 Report& r) {
  const std::uint64_t per_pe = free / static_cast<std::uint64_t>(pes);
  r.problem(fmt::format(
      "the symmetric heaps of {} PEs need {} ({} x {} from {}) but {} has only {} free: lower "
      "SHMEM_SYMMETRIC_SIZE to at most {}M per PE (e.g. export SHMEM_SYMMETRIC_SIZE={}M), plan "
      "for fewer PEs (--pes), or enlarge {} (mount -o remount,size=... {}; in Docker, "
      "--shm-size)",
      pes, human_bytes(needed), pes, human_bytes(size.bytes), size.source, kShmDir,
      human_bytes(free), per_pe >> 20, std::max<std::uint64_t>(1, (per_pe >> 20) * 9 / 10), kShmDir,
      kShmDir));
}

// Heap segments are sparse tmpfs files: a job starts even when they do not fit, and dies with
// SIGBUS once the PEs touch more of their heaps than /dev/shm has left. So the check compares
// the full planned size with what is free now.
void check_shared_memory(int pes, Report& r) {
  const SymmetricSize size = symmetric_size();
  Json j = {{"path", kShmDir},
            {"symmetric_size_bytes", size.bytes},
            {"symmetric_size_from", size.source},
            {"pes", pes}};
  if (size.error) {
    j["error"] = *size.error;
    r.json["shared_memory"] = j;
    r.problem(
        fmt::format("{} (set SHMEM_SYMMETRIC_SIZE to a size such as 512M or 2G)", *size.error));
    return;
  }
  struct statvfs vfs {};
  if (::statvfs(kShmDir, &vfs) != 0) {
    j["error"] = fmt::format("statvfs({}): {}", kShmDir, std::strerror(errno));
    r.json["shared_memory"] = j;
    r.problem(fmt::format("{} is not available: mount a tmpfs there (mount -t tmpfs tmpfs {})",
                          kShmDir, kShmDir));
    return;
  }
  const std::uint64_t total = saturating_mul(vfs.f_blocks, vfs.f_frsize);
  const std::uint64_t free = saturating_mul(vfs.f_bavail, vfs.f_frsize);
  const std::uint64_t needed = saturating_mul(heap_segment_bytes(size.bytes), pes);
  j["segment_bytes_per_pe"] = heap_segment_bytes(size.bytes);
  j["needed_bytes"] = needed;
  j["total_bytes"] = total;
  j["free_bytes"] = free;
  j["ok"] = needed <= free;
  r.json["shared_memory"] = j;
  if (needed > free) shm_problem(size, pes, needed, free, r);
}

// Segments named /shmoe-PID-RANK (and -data) whose PE is gone. Names are normally removed as soon
// as every PE mapped them, so a leftover comes from a PE that died during start-up without shmoerun
// to sweep it, and it holds /dev/shm space until removed. (A PID from another PID namespace reads
// as gone too, hence "probably".)
void check_stale_segments(Report& r) {
  static const std::regex name(R"(shmoe-(\d+)-\d+(-data)?)");
  Json list = Json::array();
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kShmDir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name)) continue;
    const long pid = std::strtol(m[1].str().c_str(), nullptr, 10);
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    // Segments are sparse: count the pages they hold, not their apparent size.
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0)
      bytes += static_cast<std::uint64_t>(st.st_blocks) * 512;
    list.push_back(entry.path().string());
  }
  r.json["stale_segments"] = {{"paths", list}, {"bytes", bytes}};
  if (!list.empty()) {
    r.problem(fmt::format(
        "{} heap segment(s) of PEs that no longer run are left in {} ({} held): remove them with "
        "`rm -f {}/shmoe-*` once no shmoe job runs on this host",
        list.size(), kShmDir, human_bytes(bytes), kShmDir));
  }
}

// --- descriptors --------------------------------------------------------------------------------

void check_open_files(int pes, Report& r) {
  struct rlimit lim {};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const std::size_t needed = open_files_needed(pes);
  auto as_json = [](rlim_t v) { return v == RLIM_INFINITY ? Json("unlimited") : Json(v); };
  const bool ok = lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= needed;
  r.json["open_files"] = {{"soft_limit", as_json(lim.rlim_cur)},
                          {"hard_limit", as_json(lim.rlim_max)},
                          {"needed", needed},
                          {"pes", pes},
                          {"ok", ok}};
  if (ok) return;
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= needed) {
    r.problem(fmt::format(
        "the open-file limit {} is below the {} descriptors a {}-PE job needs on its busiest "
        "process: run `ulimit -n {}` in the shell that starts the job",
        lim.rlim_cur, needed, pes, needed));
  } else {
    r.problem(fmt::format(
        "the open-file limit {} (hard limit {}) is below the {} descriptors a {}-PE job needs: "
        "raise the hard limit (nofile in /etc/security/limits.conf, LimitNOFILE= for a systemd "
        "service, --ulimit nofile= for Docker), then `ulimit -n {}`",
        lim.rlim_cur, lim.rlim_max, needed, pes, needed));
  }
}

// --- UCX ----------------------------------------------------------------------------------------

std::optional<fs::path> ucx_library() {
  for (const char* name : {"libucp.so.0", "libucp.so"}) {
    void* handle = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) continue;
    link_map* map = nullptr;
    fs::path path = name;
    if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
      path = map->l_name;
    }
    // Left loaded: UCX allocates in its load-time constructors and frees nothing at unload, and
    // a leak report against a still-loaded library can at least name it (sanitizer runs
    // suppress it by that name, see tests/lsan.supp).
    return path;
  }
  return std::nullopt;
}

// `ucx_info -d` prints one "#      Transport: NAME" line per device; names repeat across devices.
std::vector<std::string> ucx_transports(const fs::path& ucx_info) {
  std::vector<std::string> out;
  auto listing = capture(shell_quote(ucx_info.string()) + " -d 2>/dev/null");
  if (!listing) return out;
  static const std::regex line(R"(^#?\s*Transport:\s*(\S+)\s*$)");
  std::set<std::string> seen;
  std::stringstream lines(*listing);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line) && seen.insert(m[1].str()).second) out.push_back(m[1].str());
  }
  return out;
}

// Informational: shmoe reaches PEs of other hosts (and every peer under SHMOE_TRANSPORT=ucx)
// through UCX, whose transports decide what links a multi-host job can use; a bug report about a
// mixed setup (e.g. also running OSHMEM for comparison) wants to know them too.
void check_ucx(Report& r) {
  auto lib = ucx_library();
  if (!lib) {
    r.json["ucx"] = {{"available", false}, {"note", "libucp.so not found by the loader"}};
    return;
  }
  Json j = {{"available", true}, {"library", lib->string()}};
  if (auto info = find_on_path("ucx_info")) {
    j["ucx_info"] = info->string();
    j["transports"] = ucx_transports(*info);
  } else {
    j["ucx_info"] = nullptr;
    j["note"] = "ucx_info is not on PATH, transports not listed";
  }
  r.json["ucx"] = j;
}

// The system libraries a wheel cannot carry, each where the loader finds it, and whether the
// installation's libshmoe.so loads with them (its dlerror names a missing one).
void check_system_libraries(const Layout& layout, Report& r) {
  Json j = Json::object();
  for (const SystemLibrary& lib : system_libraries()) {
    j[lib.soname] = {{"what", lib.what},
                     {"path", lib.path.empty() ? Json(nullptr) : Json(lib.path)}};
    if (lib.path.empty()) {
      r.problem(
          fmt::format("{} ({}) is missing: apt-get install {} (Debian), or run "
                      "scripts/install-deps.sh from shmoe's source",
                      lib.soname, lib.what, lib.package));
    }
  }
  if (fs::exists(layout.library)) {
    const std::string why = load_error(layout.library);
    j["libshmoe_loads"] = why.empty();
    if (!why.empty()) r.problem(fmt::format("{} does not load: {}", layout.library.string(), why));
  }
  r.json["system_libraries"] = j;
}

}  // namespace

// Descriptors held at the same time, by the busiest process of an N-PE job on this host:
//  * every PE: stdin/out/err (3), two config-store connections (requests and the abort monitor),
//    and one segment descriptor at a time while mapping: heap segments are closed right after
//    mmap, so the N peer mappings hold no descriptors (they count against vm.max_map_count);
//  * the store host (shmoerun, or PE 0 under mpirun/srun) on top: a listening socket, a wake-up
//    pipe (2), two connections per PE, and with `shmoerun --prefix` two output pipes per PE;
//  * a margin for what the program itself opens (files, libraries, the copy engine's threads).
std::size_t open_files_needed(int pes) {
  constexpr std::size_t kPerPe = 3 + 2 + 1;
  constexpr std::size_t kStoreFixed = 1 + 2;
  constexpr std::size_t kPerPeAtStore = 2 + 2;
  constexpr std::size_t kMargin = 64;
  return kPerPe + kStoreFixed + kPerPeAtStore * static_cast<std::size_t>(pes) + kMargin;
}

Diagnosis diagnose(const Layout& layout, const DiagnoseOptions& options) {
  Report r;
  r.json["version"] = SHMOE_VERSION_STRING;
  r.json["layout"] = kind_name(layout.kind);
  r.json["install_root"] = layout.root.string();
  r.json["executable"] = layout.exe.string();
  check_layout(layout, r);
  check_files(layout, r);
  check_loader_path(layout, r);
  check_shared_memory(options.pes, r);
  check_stale_segments(r);
  check_open_files(options.pes, r);
  check_ucx(r);
  check_system_libraries(layout, r);
  Diagnosis d;
  d.healthy = r.next_steps.empty();
  r.json["healthy"] = d.healthy;
  r.json["next_steps"] = r.next_steps;
  d.report = std::move(r.json);
  return d;
}

}  // namespace shmoe::tools::config
