/* A standard OpenSHMEM program, built by the installed tools (run.sh): each PE puts a block of
 * values that encode (its PE number, index) into its right neighbour's symmetric heap array and
 * global array, counts itself in PE 0's static counter under a global lock, and after a barrier
 * checks what its left neighbour put. Prints "PE r/N: ok" when all match. */
#include <shmem.h>
#include <shmemx.h> /* installed too, as every implementation ships it */
#include <stdio.h>

enum { kCount = 64 };

long global_inbox[kCount]; /* globals and statics are symmetric, as in every OpenSHMEM */
long lock;
static long arrivals;

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
  shmem_long_put(global_inbox, outbox, kCount, right);
  shmem_set_lock(&lock);
  shmem_long_p(&arrivals, shmem_long_g(&arrivals, 0) + 1, 0);
  shmem_quiet();
  shmem_clear_lock(&lock);
  shmem_barrier_all();

  int wrong = 0;
  for (int i = 0; i < kCount; ++i) {
    if (inbox[i] != encode(left, i) || global_inbox[i] != encode(left, i)) {
      if (wrong++ == 0) {
        fprintf(stderr, "PE %d/%d: inbox[%d] = %ld, global_inbox[%d] = %ld, want %ld from PE %d\n",
                me, npes, i, inbox[i], i, global_inbox[i], encode(left, i), left);
      }
    }
  }
  if (me == 0 && arrivals != npes) {
    fprintf(stderr, "PE 0/%d: the static counter is %ld, want %d\n", npes, arrivals, npes);
    ++wrong;
  }
  if (wrong == 0) printf("PE %d/%d: ok\n", me, npes);
  shmem_free(inbox);
  shmem_finalize();
  return wrong == 0 ? 0 : 1;
}
