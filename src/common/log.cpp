#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace shmoe::log {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<void (*)()> g_fatal_cleanup{nullptr};
}  // namespace

void set_rank(int r) {
  g_rank.store(r, std::memory_order_relaxed);
}
int rank() {
  return g_rank.load(std::memory_order_relaxed);
}

void write(std::string_view level, std::string_view message) {
  int r = rank();
  std::string line = r >= 0 ? fmt::format("shmoe: PE {}: {}: {}\n", r, level, message)
                            : fmt::format("shmoe: {}: {}\n", level, message);
  // One write() per line so that lines of concurrent PEs and threads never interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void set_fatal_cleanup(void (*cleanup)()) {
  g_fatal_cleanup.store(cleanup);
}

void fatal(std::string_view message, int exit_code) {
  write("error", message);
  if (auto cleanup = g_fatal_cleanup.exchange(nullptr)) cleanup();
  ::_exit(exit_code);
}

}  // namespace shmoe::log
