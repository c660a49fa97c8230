/* CHECK for the multi-PE tests written in C: a failed condition is reported with the PE, the
 * place and the condition, and counted in `failures` (the program's exit status reports it). */
#ifndef SHMOE_TESTS_C_CHECK_H
#define SHMOE_TESTS_C_CHECK_H

#include <shmem.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "PE %d: %s:%d: check failed: %s\n", shmem_my_pe(), __FILE__, __LINE__, \
              #cond);                                                                        \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

#endif
