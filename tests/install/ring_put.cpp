// The C++ twin of ring_put.c, built with oshc++: each PE puts values that encode (its PE number,
// index) into its right neighbour's symmetric array, through the type-generic shmem_put (an
// overload in C++), and checks what its left neighbour put. Prints "PE r/N: ok" when all match.
#include <mpp/shmem.h>  // the SGI/Cray header path, which older programs use

#include <cstdio>
#include <span>
#include <vector>

namespace {

constexpr int kCount = 64;

long encode(int pe, int i) {
  return 1000L * pe + i + 1;
}

}  // namespace

int main() {
  shmem_init();
  const int me = shmem_my_pe(), npes = shmem_n_pes();
  const int right = (me + 1) % npes, left = (me + npes - 1) % npes;
  auto* inbox = static_cast<long*>(shmem_calloc(kCount, sizeof(long)));
  if (inbox == nullptr) {
    std::fprintf(stderr, "PE %d/%d: shmem_calloc failed\n", me, npes);
    shmem_global_exit(1);
  }
  std::vector<long> outbox(kCount);
  for (int i = 0; i < kCount; ++i) outbox[i] = encode(me, i);
  shmem_put(inbox, outbox.data(), outbox.size(), right);
  shmem_barrier_all();

  int wrong = 0;
  for (int i = 0; long got : std::span(inbox, kCount)) {
    if (got != encode(left, i) && wrong++ == 0) {
      std::fprintf(stderr, "PE %d/%d: inbox[%d] = %ld, want %ld from PE %d\n", me, npes, i, got,
                   encode(left, i), left);
    }
    ++i;
  }
  if (wrong == 0) std::printf("PE %d/%d: ok\n", me, npes);
  shmem_free(inbox);
  shmem_finalize();
  return wrong == 0 ? 0 : 1;
}
