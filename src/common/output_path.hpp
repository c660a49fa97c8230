// Checks of the files and directories a program is told to write (a CSV, a trace, hang
// reports), made before any work starts, so that a path that cannot be written is refused with
// its option and the reason instead of failing (or being silently skipped) at the end of a run.
#pragma once

#include <string>
#include <string_view>

namespace shmoe {

// Empty when `path` can be created or appended to; else "OPTION=PATH: <why>".
std::string why_not_writable_file(std::string_view option, const std::string& path);

// Creates the directory `dir` (and its parents) if needed. Empty when it exists and files can be
// created in it; else "OPTION=DIR: <why>".
std::string why_not_writable_directory(std::string_view option, const std::string& dir);

}  // namespace shmoe
