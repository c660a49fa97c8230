/* The profiling interface (OpenSHMEM 1.5 section 10) from the side of a tool: this program
 * defines its own shmem_long_put and shmem_pcontrol, which count their calls and forward to the
 * name-shifted pshmem_ entry points. The library's shmem_ symbols are weak aliases, so these
 * definitions take precedence, in a program linked against the shared library and against the
 * static one alike, and the data must still arrive. Exits non-zero on a wrong result. */
#include <pshmem.h>
#include <stdio.h>

static int put_calls = 0;
static int last_level = -1;

void shmem_long_put(long* dest, const long* source, size_t nelems, int pe) {
  ++put_calls;
  pshmem_long_put(dest, source, nelems, pe);
}

void shmem_pcontrol(const int level, ...) {
  last_level = level;
  pshmem_pcontrol(level);
}

#include "c_check.h"

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  long* dest = shmem_calloc(8, sizeof(long));
  long source[8];
  for (int i = 0; i < 8; ++i) source[i] = 100L * me + i;

  shmem_long_put(dest, source, 4, next);    /* the typed name */
  shmem_put(dest + 4, source + 4, 4, next); /* the C11 generic name selects it too */
  pshmem_long_put(dest, source, 0, next);   /* the library's own entry: not counted */
  shmem_pcontrol(2);
  shmem_barrier_all();

  CHECK(put_calls == 2);
  CHECK(last_level == 2);
  for (int i = 0; i < 8; ++i) CHECK(dest[i] == 100L * prev + i);
  shmem_barrier_all();
  shmem_free(dest);
  shmem_finalize();
  if (failures == 0) printf("PE %d: interposed shmem_long_put called %d times\n", me, put_calls);
  return failures != 0;
}
