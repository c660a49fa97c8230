/* A plain OpenSHMEM program, started the way users start one with mpirun: each PE puts values
 * that encode (its PE, index) into a symmetric array of its right neighbour, then checks what its
 * left neighbour put into its own, and prints one line. */
#include <shmem.h>
#include <stdio.h>

enum { kCount = 4096 };

static long encode(int pe, int index) {
  return (long)pe * 1000003L + index;
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe();
  const int npes = shmem_n_pes();
  const int right = (me + 1) % npes;
  const int left = (me + npes - 1) % npes;
  long* inbox = shmem_malloc(kCount * sizeof(long));
  static long outbox[kCount];
  for (int i = 0; i < kCount; ++i) {
    inbox[i] = -1;
    outbox[i] = encode(me, i);
  }
  shmem_barrier_all(); /* no put may land before its target cleared the inbox */
  shmem_long_put(inbox, outbox, kCount, right);
  shmem_barrier_all();
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    if (inbox[i] != encode(left, i)) {
      if (wrong == 0) {
        printf("PE %d: inbox[%d] = %ld, expected %ld (from PE %d)\n", me, i, inbox[i],
               encode(left, i), left);
      }
      ++wrong;
    }
  }
  printf("PE %d of %d: %s %d values from PE %d\n", me, npes, wrong ? "WRONG" : "received",
         kCount - wrong, left);
  fflush(stdout);
  shmem_free(inbox);
  shmem_finalize();
  return wrong ? 1 : 0;
}
