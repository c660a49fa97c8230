/* shmoe: the OpenSHMEM profiling interface (OpenSHMEM 1.5 section 10).
 *
 * Every function of shmem.h is also defined as pshmem_X, and the library's shmem_X is a weak
 * alias of it: a profiling tool defines its own shmem_X (which takes precedence at link time),
 * does its measurement, and calls pshmem_X for the real work. The declarations come from the
 * same declaration macros as shmem.h (shmoe/functions.h), with the prefix `p`. The type-generic
 * names of shmoe/generic.h are macros (C11) or inline overloads (C++) and so have no pshmem_
 * form; they call the typed shmem_ functions, which a tool can intercept.
 */
#ifndef PSHMEM_H
#define PSHMEM_H

#include "shmem.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHMOE_PREFIX p
#include "shmoe/functions.h"
#undef SHMOE_PREFIX

#ifdef __cplusplus
}
#endif

#endif /* PSHMEM_H */
