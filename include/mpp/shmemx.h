/* shmoe: <mpp/shmemx.h>, the legacy path of shmemx.h (see mpp/shmem.h). */
#ifndef SHMOE_MPP_SHMEMX_H
#define SHMOE_MPP_SHMEMX_H

#include "../shmemx.h"

#endif /* SHMOE_MPP_SHMEMX_H */
