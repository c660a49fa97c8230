#include "shmem/uncaught.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

#include "common/log.hpp"

namespace shmoe {
namespace {

// "std::length_error" for St12length_error.
std::string readable_type(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

[[noreturn]] void on_terminate() {
  log::fatal(uncaught_exception_text());
}

}  // namespace

std::string uncaught_exception_text() {
  const std::exception_ptr in_flight = std::current_exception();
  if (!in_flight) return "std::terminate was called without an exception (a bug in shmoe)";
  try {
    std::rethrow_exception(in_flight);
  } catch (const std::exception& e) {
    return fmt::format(
        "internal error: a C++ exception ({}: {}) escaped an OpenSHMEM routine; no exception may "
        "cross the C API, so please report this with the call that raised it",
        readable_type(typeid(e)), e.what());
  } catch (...) {
    return "internal error: a C++ exception of unknown type escaped an OpenSHMEM routine";
  }
}

void report_uncaught_exceptions() {
  static const bool installed = [] {
    std::set_terminate(on_terminate);
    return true;
  }();
  (void)installed;
}

}  // namespace shmoe
