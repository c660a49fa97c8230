// Whether shmoe's put-with-signal waits for a PE stopped (SIGSTOP) on another host, and what a
// quiet does then: the premise of step 1 of docs/moe.md's design for that case. PE 1 stops
// itself; PE 0 times shmem_putmem_signal to it and then shmem_quiet, while a thread of PE 0
// resumes PE 1 after 1 s; PE 1 checks the data under the signal. Two PEs, on two simulated
// hosts (UCX between them):
//
//   UCX_TLS=tcp,self build/tools/shmoerun/shmoerun -n 2 tests/pe/fake_hosts.sh 1
//       build/bench/stopped_peer_signal [KIB]      (one command line)
//
// KIB: the data's size (64 unless given, at most 1024). Results of 2026-12-06:
// docs/performance/2026-12-06-ucx-stopped-peer.md.
#include <shmem.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxBytes = 1 << 20;
char data[kMaxBytes];  // symmetric (a global)
std::uint64_t signal_word;
long pids[2];

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The state letter of /proc/PID/stat ('T' once stopped).
char state_of(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const std::size_t p = line.rfind(')');
  return p == std::string::npos || p + 2 >= line.size() ? '?' : line[p + 2];
}

void stopped_pe(std::size_t bytes) {
  raise(SIGSTOP);
  const auto resumed = Clock::now();
  shmem_uint64_wait_until(&signal_word, SHMEM_CMP_EQ, 1);
  std::size_t landed = 0;
  for (std::size_t i = 0; i < bytes; ++i) landed += data[i] == 'x';
  std::printf("PE 1: resumed; the signal came %.1f ms later, with %zu of %zu data bytes\n",
              ms_since(resumed), landed, bytes);
}

void sender(std::size_t bytes) {
  while (state_of(pids[1]) != 'T') usleep(1000);
  static char src[kMaxBytes];
  std::memset(src, 'x', sizeof src);
  const auto t0 = Clock::now();
  shmem_putmem_signal(data, src, bytes, &signal_word, 1, SHMEM_SIGNAL_SET, 1);
  const auto t1 = Clock::now();
  std::printf("PE 0: put-with-signal of %zu bytes to the stopped PE 1 returned in %.2f ms\n", bytes,
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  std::thread resume([] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    kill(static_cast<pid_t>(pids[1]), SIGCONT);
  });
  shmem_quiet();
  std::printf("PE 0: its quiet returned %.0f ms after the put (PE 1 resumed at 1000 ms)\n",
              ms_since(t1));
  resume.join();
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t bytes = (argc > 1 ? std::stoul(argv[1]) : 64) * 1024;
  if (bytes == 0 || bytes > kMaxBytes) {
    std::fprintf(stderr, "stopped_peer_signal: KIB is %zu, allowed 1 to %zu\n", bytes / 1024,
                 kMaxBytes / 1024);
    return 1;
  }
  shmem_init();
  if (shmem_n_pes() != 2) {
    std::fprintf(stderr, "stopped_peer_signal: runs on 2 PEs, not %d\n", shmem_n_pes());
    shmem_global_exit(1);
  }
  const int me = shmem_my_pe();
  shmem_long_p(&pids[me], getpid(), 0);
  shmem_barrier_all();
  if (me == 1) {
    stopped_pe(bytes);
  } else {
    sender(bytes);
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
