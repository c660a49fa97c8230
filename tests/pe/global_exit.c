/* PE 1 (PE 0 when alone) calls shmem_global_exit(STATUS) while every other PE waits in a
 * barrier that cannot complete without it: the global exit must end every PE, with STATUS. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s STATUS\n", argv[0]);
    return 2;
  }
  const int status = atoi(argv[1]);
  shmem_init();
  const int me = shmem_my_pe(), caller = shmem_n_pes() > 1 ? 1 : 0;
  if (me == caller) shmem_global_exit(status);
  shmem_barrier_all();
  fprintf(stderr, "PE %d left the barrier although PE %d called shmem_global_exit\n", me, caller);
  return 99;
}
