// The last guard of the C API: a C++ exception that escapes a routine (a C caller cannot catch
// it, and the runtime would end the PE with status 134 and no word of why) ends the PE with a
// shmoe message naming the exception, through the same path as every other fatal error.
#pragma once

#include <string>

namespace shmoe {

// Installs the report as the terminate handler (once; shmem_init calls it).
void report_uncaught_exceptions();

// The report's text for the exception in flight, or for a terminate without one.
std::string uncaught_exception_text();

}  // namespace shmoe
