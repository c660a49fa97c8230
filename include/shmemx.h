/* shmoe: the OpenSHMEM extensions header.
 *
 * OpenSHMEM 1.5 (section 5, Language Bindings and Conformance) requires shmemx.h to exist even
 * when an implementation provides no extensions, and many programs include it unconditionally.
 * shmoe has no shmemx_ routines: everything it provides is the standard API of shmem.h.
 */
#ifndef SHMEMX_H
#define SHMEMX_H

#include "shmem.h"

#endif /* SHMEMX_H */
