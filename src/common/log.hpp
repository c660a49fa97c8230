// One place for messages to stderr, so every line says which PE wrote it.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace shmoe::log {

// Set once the PE knows its rank; -1 before that ("PE ?").
void set_rank(int rank);
int rank();

void write(std::string_view level, std::string_view message);

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write("error", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write("warning", fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  write("info", fmt::format(f, std::forward<Args>(args)...));
}

// Prints the message and ends the process without running atexit handlers (which would try a
// collective finalize with peers that are already gone).
[[noreturn]] void fatal(std::string_view message, int exit_code = 1);

// Work fatal() does before the process ends: the layers above register what must not outlive
// the process (shared-memory names). nullptr clears it.
void set_fatal_cleanup(void (*cleanup)());

}  // namespace shmoe::log
