/* shmoe: <mpp/shmem.h>, the header path of SGI and Cray SHMEM that older OpenSHMEM programs and
 * test suites still include; other implementations ship it too. It is shmem.h.
 */
#ifndef SHMOE_MPP_SHMEM_H
#define SHMOE_MPP_SHMEM_H

#include "../shmem.h"

#endif /* SHMOE_MPP_SHMEM_H */
