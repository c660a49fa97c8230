// The job the security checks attack: victim DIR. Every PE writes values that encode its PE
// number and the index into its right neighbour's symmetric array and checks what its left
// neighbour wrote; PE 0 then creates DIR/ready, and the PEs wait (outside shmoe) for DIR/go
// before a second exchange in the other direction, which they check too. Each PE prints
// "PE r of n: phase K verified from PE s" per phase; any mismatch exits 1.
#include <shmem.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr int kCount = 4096;

long code(int pe, int phase, int i) {
  return (static_cast<long>(pe) << 32) | (static_cast<long>(phase) << 24) | i;
}

// Puts this PE's codes into `to`'s array, then checks the codes `from` put into this PE's.
bool exchange(long* data, int phase, int to, int from) {
  const int me = shmem_my_pe();
  long mine[kCount];
  for (int i = 0; i < kCount; ++i) mine[i] = code(me, phase, i);
  shmem_long_put(data, mine, kCount, to);
  shmem_barrier_all();
  for (int i = 0; i < kCount; ++i) {
    if (data[i] != code(from, phase, i)) {
      std::printf("PE %d: phase %d: element %d is %#lx, want %#lx (from PE %d)\n", me, phase, i,
                  data[i], code(from, phase, i), from);
      return false;
    }
  }
  std::printf("PE %d of %d: phase %d verified from PE %d\n", me, shmem_n_pes(), phase, from);
  std::fflush(stdout);
  shmem_barrier_all();
  return true;
}

bool wait_for_file(const std::string& path, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(50 * 1000);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: victim DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  long* data = static_cast<long*>(shmem_calloc(kCount, sizeof(long)));
  if (!exchange(data, 1, (me + 1) % n, (me + n - 1) % n)) return 1;
  if (me == 0) {
    FILE* ready = std::fopen((dir + "/ready").c_str(), "w");
    if (ready != nullptr) std::fclose(ready);
  }
  if (!wait_for_file(dir + "/go", 120)) {
    std::printf("PE %d: no %s/go within 120 s\n", me, dir.c_str());
    return 1;
  }
  if (!exchange(data, 2, (me + n - 1) % n, (me + 1) % n)) return 1;
  shmem_free(data);
  shmem_finalize();
  return 0;
}
