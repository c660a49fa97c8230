// A PE program that misbehaves on request, for the failure tests: pe_faults MODE [ARG].
#include <fcntl.h>
#include <shmem.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  std::printf("pid=%d pe=%d\n", static_cast<int>(getpid()), me);
  std::fflush(stdout);
  long* word = static_cast<long*>(shmem_calloc(1, sizeof(long)));
  if (mode == "ok") {
    shmem_long_atomic_inc(word, 0);
    shmem_barrier_all();
    if (me == 0 && *word != n) return 1;
  } else if (mode == "exit3" && me == 1) {
    std::_Exit(3);
  } else if (mode == "kill9" && me == 1) {
    raise(SIGKILL);
  } else if (mode == "kill9_pe0") {  // PE 0 dies, the others wait for it in a barrier
    if (me == 0) raise(SIGKILL);
    shmem_barrier_all();
  } else if (mode == "kill9_last") {  // the last PE dies, the others wait for it in a barrier
    if (me == n - 1) raise(SIGKILL);
    shmem_barrier_all();
  } else if (mode == "kill9_in_barrier") {  // the others already wait for PE 1 when it dies
    if (me == 1) {
      usleep(200000);
      raise(SIGKILL);
    }
    shmem_barrier_all();
  } else if (mode == "kill9_others_go_on" || mode == "kill9_then_broadcast") {
    // PE 1 is killed; the others wait until it is gone for good (reaped), then work together
    // without it, say so, and end: shmem_barrier_all, shmem_free and shmem_finalize go on over
    // the live PEs; a broadcast from PE 1 cannot complete without it.
    long* pids = static_cast<long*>(shmem_calloc(static_cast<std::size_t>(n), sizeof(long)));
    for (int pe = 0; pe < n; ++pe) shmem_long_p(pids + me, getpid(), pe);
    shmem_barrier_all();
    if (me == 1) raise(SIGKILL);
    while (kill(static_cast<pid_t>(pids[1]), 0) == 0) usleep(1000);
    shmem_long_atomic_inc(word, 0);
    if (me == 0) shmem_long_wait_until(word, SHMEM_CMP_EQ, n - 1);
    std::printf("PE %d went on without PE 1\n", me);
    std::fflush(stdout);
    if (mode == "kill9_then_broadcast") {
      long* from_pe1 = static_cast<long*>(shmem_calloc(1, sizeof(long)));
      shmem_long_broadcast(SHMEM_TEAM_WORLD, from_pe1, word, 1, 1);
    }
    shmem_free(pids);
  } else if (mode == "global_exit" && me == 1) {
    shmem_global_exit(7);
  } else if (mode == "global_exit0" && me == 0) {
    shmem_global_exit(0);
  } else if (mode == "skip_barrier" && me == 1) {
    for (;;) sleep(600);  // busy elsewhere (a signal ends sleep early): never reaches the barrier
  } else if (mode == "skip_reduction") {  // PE 1 never joins the sum the others wait in
    long* sum = static_cast<long*>(shmem_calloc(1, sizeof(long)));
    if (me == 1) {
      for (;;) sleep(600);
    }
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, sum, word, 1);
  } else if (mode == "finalize_early" && me == 1) {
    // Skips the others' barrier: its finalize's barrier matches that one, and it leaves.
    shmem_finalize();
    return 0;
  } else if (mode == "finalize_early") {
    shmem_barrier_all();
  } else if (mode == "wait_forever") {
    shmem_long_wait_until(word, SHMEM_CMP_EQ, 42);  // nobody ever writes 42
  } else if (mode == "bad_pe") {
    shmem_long_p(word, 1, n + 3);
  } else if (mode == "bad_address") {
    long local = 0;
    shmem_long_put(&local, &local, 1, 0);
  } else if (mode == "library_global") {  // C library data: not the executable's, not symmetric
    char buf[8];
    shmem_getmem(buf, static_cast<const void*>(stdout), sizeof(buf), 0);
  } else if (mode == "bad_cmp") {
    shmem_long_wait_until(word, 99, 0);
  } else if (mode == "asymmetric_malloc") {
    void* p = shmem_malloc(me == n - 1 ? 8192 : 4096);
    shmem_free(p);
  } else if (mode == "fill_dev_shm") {
    // Another user takes all of /dev/shm's free space, then this PE touches its heap: the pages
    // cannot come. Only in a small private /dev/shm (dev_shm_small.sh), never the machine's.
    struct statvfs s {};
    if (statvfs("/dev/shm", &s) != 0 || s.f_blocks * s.f_frsize > (256ul << 20)) {
      std::fprintf(stderr, "fill_dev_shm: /dev/shm is not a small private tmpfs; refusing\n");
      return 2;
    }
    char* heap = static_cast<char*>(shmem_malloc(16 << 20));
    const int fd = open("/dev/shm/filler", O_CREAT | O_RDWR, 0600);
    const int err =
        fd < 0 ? -1 : posix_fallocate(fd, 0, static_cast<off_t>(s.f_bavail * s.f_frsize));
    std::printf("filled /dev/shm: %d\n", err);
    std::fflush(stdout);
    std::memset(heap, 1, 16 << 20);
    std::printf("touched the heap without a bus error\n");
    return 1;
  } else if (mode == "foreign_bus_error" && me == 1) {
    // A bus error outside shmoe's segments (a file mapped past its end) is not shmoe's to explain.
    char path[] = "/tmp/pe_faults_busXXXXXX";
    const int fd = mkstemp(path);
    unlink(path);
    auto* page =
        static_cast<volatile char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    *page = 1;  // the file is empty: SIGBUS
  } else if (mode == "sent_bus_error" && me == 1) {
    raise(SIGBUS);
  } else if (mode == "sleep") {
    sleep(600);
  } else if (mode == "orphan_output" && me == 0) {  // a child outlives the PE, holding its output
    if (fork() == 0) {
      for (int fd = 3; fd < 1024; ++fd) close(fd);  // only the PE's output, not the test's pipe
      sleep(8);
      std::_Exit(0);
    }
  } else if (mode == "partial_lines") {  // each line in three writes, the PEs' writes interleaved
    shmem_barrier_all();
    const std::string pieces[] = {"PE " + std::to_string(me) + "/" + std::to_string(n) + ": ", "o",
                                  "k\n"};
    for (int i = 0; i < 20; ++i) {
      for (const std::string& piece : pieces) {
        if (::write(STDOUT_FILENO, piece.data(), piece.size()) < 0) return 1;
        usleep(1000);
      }
    }
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
