// Options that users of mpirun and Open MPI's oshrun bring to shmoerun, each with what shmoerun
// does instead: they are refused by name, not taken for the program.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shmoe::tools {

// The advice for a foreign option spelled `name` (without any "=value"), if it is one.
std::optional<std::string> advice_for_foreign_option(std::string_view name);

// The program to run: `program` as given when it names a path (it has a '/'), else the first
// executable of that name in PATH, else ./program in the working directory (as mpirun finds
// it). nullopt with `why` filled when there is none.
std::optional<std::string> find_program(const std::string& program, std::string& why);

}  // namespace shmoe::tools
