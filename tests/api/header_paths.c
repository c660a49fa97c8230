/* The header names programs written for other OpenSHMEM implementations include: shmemx.h,
 * which OpenSHMEM 1.5 requires to exist even without extensions, and the SGI/Cray paths
 * mpp/shmem.h and mpp/shmemx.h. Each must compile cleanly on its own and together, and give the
 * standard API. */
#include <mpp/shmem.h>
#include <mpp/shmemx.h>
#include <shmem.h>
#include <shmemx.h>

int main(void) {
  shmem_init();
  const int me = shmem_my_pe();
  shmem_finalize();
  return me < 0;
}
