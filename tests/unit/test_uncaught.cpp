// The C API's last guard (shmem/uncaught.hpp): an exception that escapes a routine ends the PE
// with a message naming the exception's type and text, not with abort's status 134.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "shmem/uncaught.hpp"

namespace shmoe {
namespace {

// What a routine would do with an unchecked count: std::vector refuses it with length_error.
void escape_through_c_api() noexcept {
  std::vector<int> v;
  v.resize(static_cast<std::size_t>(-1));
}

TEST(UncaughtDeathTest, EscapingExceptionIsNamedAndEndsThePeWithStatus1) {
  EXPECT_EXIT(
      {
        report_uncaught_exceptions();
        escape_through_c_api();
      },
      ::testing::ExitedWithCode(1),
      "shmoe: error: internal error: a C\\+\\+ exception \\(std::length_error: .*\\) escaped an "
      "OpenSHMEM routine");
}

TEST(Uncaught, TextWithoutAnExceptionSaysSo) {
  EXPECT_EQ(uncaught_exception_text(),
            "std::terminate was called without an exception (a bug in shmoe)");
}

}  // namespace
}  // namespace shmoe
