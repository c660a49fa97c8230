/* A standard OpenSHMEM program, built by the installed tools (run.sh): each PE puts a block of
 * values that encode (its PE number, index) into the symmetric array of its right neighbour,
 * and after a barrier checks what its left neighbour put. Prints "PE r/N: ok" when all match. */
#include <shmem.h>
#include <stdio.h>

enum { kCount = 64 };

static long encode(int pe, int i) {
  return 1000L * pe + i + 1;
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), npes = shmem_n_pes();
  const int right = (me + 1) % npes, left = (me + npes - 1) % npes;
  long* inbox = shmem_calloc(kCount, sizeof(long));
  long outbox[kCount];
  if (inbox == NULL) {
    fprintf(stderr, "PE %d/%d: shmem_calloc failed\n", me, npes);
    shmem_global_exit(1);
  }
  for (int i = 0; i < kCount; ++i) outbox[i] = encode(me, i);
  shmem_long_put(inbox, outbox, kCount, right);
  shmem_barrier_all();

  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    if (inbox[i] != encode(left, i)) {
      if (wrong++ == 0) {
        fprintf(stderr, "PE %d/%d: inbox[%d] = %ld, want %ld from PE %d\n", me, npes, i, inbox[i],
                encode(left, i), left);
      }
    }
  }
  if (wrong == 0) printf("PE %d/%d: ok\n", me, npes);
  shmem_free(inbox);
  shmem_finalize();
  return wrong == 0 ? 0 : 1;
}
