#include "heap/bus_error.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "common/log.hpp"
#include "common/memory_info.hpp"

namespace shmoe::heap {
namespace {

// Everything below runs in a signal handler: no allocation, no locks, no stdio; only system
// calls and plain loops.

struct sigaction g_previous {};

// A line of text built without allocating.
class Text {
 public:
  Text& operator<<(const char* s) {
    while (*s != '\0' && n_ < sizeof(buf_)) buf_[n_++] = *s++;
    return *this;
  }
  Text& operator<<(std::uint64_t v) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0 && n_ < sizeof(buf_)) buf_[n_++] = digits[--k];
    return *this;
  }
  Text& hex(std::uintptr_t v) {
    *this << "0x";
    char digits[24];
    int k = 0;
    do {
      digits[k++] = "0123456789abcdef"[v % 16];
      v /= 16;
    } while (v != 0);
    while (k > 0 && n_ < sizeof(buf_)) buf_[n_++] = digits[--k];
    return *this;
  }
  void write_to(int fd) const {
    ssize_t ignored = ::write(fd, buf_, n_);
    (void)ignored;
  }

 private:
  char buf_[1024];
  std::size_t n_ = 0;
};

bool parse_hex(const char*& p, std::uintptr_t& out) {
  out = 0;
  const char* start = p;
  for (;; ++p) {
    const char c = *p;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) break;
    out = out * 16 + static_cast<std::uintptr_t>(d);
  }
  return p != start;
}

// Whether `line` of /proc/self/maps ("start-end perms offset dev inode path") covers `addr` and
// maps a shmoe segment; its path goes to `path` then.
bool covers_segment(const char* line, std::uintptr_t addr, char* path, std::size_t cap) {
  const char* p = line;
  std::uintptr_t start = 0, end = 0;
  if (!parse_hex(p, start) || *p++ != '-' || !parse_hex(p, end)) return false;
  if (addr < start || addr >= end) return false;
  const char* name = std::strstr(p, "/dev/shm/shmoe-");
  if (name == nullptr) return false;
  std::size_t k = 0;
  while (name[k] != '\0' && k + 1 < cap) {
    path[k] = name[k];
    ++k;
  }
  path[k] = '\0';
  return true;
}

// Looks `addr` up in /proc/self/maps (open and read are async-signal-safe).
bool segment_at(std::uintptr_t addr, char* path, std::size_t cap) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char chunk[4096], line[512];
  std::size_t used = 0;
  bool found = false;
  for (ssize_t n; !found && (n = ::read(fd, chunk, sizeof chunk)) > 0;) {
    for (ssize_t i = 0; i < n && !found; ++i) {
      if (chunk[i] != '\n') {
        if (used + 1 < sizeof line) line[used++] = chunk[i];  // a longer path is cut short
        continue;
      }
      line[used] = '\0';
      found = covers_segment(line, addr, path, cap);
      used = 0;
    }
  }
  ::close(fd);
  return found;
}

void pass_on(int sig, siginfo_t* info, void* context) {
  const bool sent = info->si_code <= 0;  // by kill() or the like, not by a faulting access
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler == SIG_IGN) {
    if (sent) return;  // a fault cannot be ignored: the default action follows
  } else if (g_previous.sa_handler != SIG_DFL) {
    return g_previous.sa_handler(sig);
  }
  // The default action: after a fault, returning re-runs the access, which now ends the
  // process; a sent signal is sent again, and arrives once this handler returns.
  ::signal(SIGBUS, SIG_DFL);
  if (sent) ::raise(SIGBUS);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  char path[256];
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (info->si_code <= 0 || !segment_at(addr, path, sizeof path)) {
    errno = saved;
    return pass_on(sig, info, context);
  }
  Text t;
  t << "shmoe: ";
  if (log::rank() >= 0) t << "PE " << static_cast<std::uint64_t>(log::rank()) << ": ";
  t << "error: bus error at ";
  t.hex(addr) << " in the shared-memory segment " << path
              << " (a symmetric heap or global data): " << kShmDir << " could not supply the page";
  struct statvfs s {};
  if (::statvfs(kShmDir, &s) == 0) {
    t << " (" << static_cast<std::uint64_t>(s.f_bavail * s.f_frsize >> 20) << " MiB free of "
      << static_cast<std::uint64_t>(s.f_blocks * s.f_frsize >> 20) << " MiB)";
  }
  t << ". Heap pages are taken from " << kShmDir
    << " when first touched, and the PEs of this host (with the other users of " << kShmDir
    << ") touched more than it holds: lower SHMEM_SYMMETRIC_SIZE, run fewer PEs on this host, "
       "free space in "
    << kShmDir << " or enlarge it\n";
  t.write_to(STDERR_FILENO);
  ::signal(SIGBUS, SIG_DFL);  // the access runs again and ends the process with SIGBUS
  errno = saved;
}

}  // namespace

void explain_bus_errors_in_segments() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    // The previous handler is known before this one can run.
    ::sigaction(SIGBUS, nullptr, &g_previous);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

}  // namespace shmoe::heap
