// Failure cases of start-up and of running jobs, each checked for its message, its exit status
// and an end within a bounded time (nothing may hang).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  int status = -1;  // exit code, or 128+signal
  std::string output;
  double seconds = 0;
  bool timed_out = false;
};

struct Proc {
  pid_t pid = -1;
  int out = -1;
};

// Starts `sh -c command` with stdout+stderr on a pipe.
Proc start(const std::string& command) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

Result finish(Proc p, double limit_s, Clock::time_point t0 = Clock::now()) {
  Result r;
  const auto deadline = t0 + std::chrono::duration<double>(limit_s);
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) {
      r.timed_out = true;
      ::kill(-p.pid, SIGKILL);
      break;
    }
    pollfd pfd{p.out, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    ssize_t n = ::read(p.out, buf, sizeof buf);
    if (n <= 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(p.out);
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

Result run(const std::string& command, double limit_s = 60) {
  return finish(start(command), limit_s);
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string shmoerun(int n, const std::string& mode, const std::string& env = "") {
  return fmt::format("{} {} -n {} {} {}", env, SHMOERUN, n, PE_FAULTS, mode);
}

// A PE started by hand, the way mpirun would: Open MPI's rank variables, SHMOE_STORE and the
// job's key given (each test's job has a port of its own).
std::string by_hand(int rank, int size, int port, const std::string& mode,
                    const std::string& env = "") {
  return fmt::format(
      "env OMPI_COMM_WORLD_RANK={} OMPI_COMM_WORLD_SIZE={} SHMOE_STORE=127.0.0.1:{} "
      "SHMOE_JOB_KEY=launcher-test-job-key-0123456789abcdef {} {} {}",
      rank, size, port, env, PE_FAULTS, mode);
}

void expect_match(const Result& r, const std::string& pattern) {
  EXPECT_TRUE(std::regex_search(r.output, std::regex(pattern)))
      << "expected /" << pattern << "/ in:\n"
      << r.output;
}

// The output ends with shmoerun's line matching `pattern` (from "shmoerun: " to its newline).
void expect_last_launcher_line(const Result& r, const std::string& pattern) {
  const auto last = r.output.rfind("shmoerun: ");
  ASSERT_NE(last, std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output.substr(last), std::regex("^" + pattern + "\n$")))
      << "expected the last line /" << pattern << "/ in:\n"
      << r.output;
}

// No /dev/shm object of a PE whose pid the output names may survive the job.
void expect_no_leaked_segments(const Result& r) {
  std::regex pid_re("pid=(\\d+) pe=(\\d+)");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), pid_re), end; it != end; ++it) {
    for (const char* suffix : {"", "-data"}) {
      auto path = fmt::format("/dev/shm/shmoe-{}-{}{}", (*it)[1].str(), (*it)[2].str(), suffix);
      EXPECT_FALSE(std::filesystem::exists(path)) << path << " leaked";
    }
  }
}

std::set<std::string> shm_names() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("shmoe-", 0) == 0) names.insert(n);
  }
  return names;
}

// A zombie (dead, not yet reaped by whatever adopted it) counts as dead.
bool alive(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

// Names that appeared since `before` and belong to a process that no longer exists are leaks.
// (Tests running in parallel only add names of live processes.)
void expect_no_new_dead_segments(const std::set<std::string>& before) {
  for (const auto& n : shm_names()) {
    if (before.count(n)) continue;
    const int pid = std::atoi(n.c_str() + 6);
    EXPECT_FALSE(pid > 0 && !alive(pid)) << "/dev/shm/" << n << " leaked";
  }
}

TEST(Launcher, HealthyJobSucceeds) {
  Result r = run(shmoerun(4, "ok"));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_no_leaked_segments(r);
}

TEST(Launcher, PrefixesOutputWithThePe) {
  Result r = run(fmt::format("{} -n 2 --prefix {} ok", SHMOERUN, PE_FAULTS));
  EXPECT_EQ(r.status, 0) << r.output;
  expect_match(r, "\\[PE 0\\] pid=\\d+ pe=0");
  expect_match(r, "\\[PE 1\\] pid=\\d+ pe=1");
}

TEST(Launcher, NonZeroExitStopsTheOthersAndIsNamed) {
  Result r = run(shmoerun(4, "exit3"), 30);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 3);
  expect_match(r, "shmoerun: PE 1 \\(pid \\d+\\) exited with status 3");
  EXPECT_LT(r.seconds, 15);
}

TEST(Launcher, KilledPeIsNamedWithItsSignal) {
  Result r = run(shmoerun(3, "kill9"), 30);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 128 + SIGKILL);
  expect_match(r, "PE 1 \\(pid \\d+\\) was killed by signal 9");
  expect_no_leaked_segments(r);
}

// SHMOE_PE_LOSS=continue: a killed PE does not stop the others, who go on without it; their
// shmem_barrier_all, shmem_free and shmem_finalize run over the live PEs, so they end with status
// 0, and so does the job, whose last line names the PE it lost (not at the hang timeout: an hour
// here; the job's --timeout of 60 s would end it first, with status 124).
TEST(Launcher, KilledPeInContinueModeLetsTheOthersEndCleanly) {
  // Both barrier algorithms (on 2 cores, 3 PEs choose the central one) end over the live PEs.
  for (const char* barrier : {"", "SHMOE_BARRIER=dissemination"}) {
    Result r = run(fmt::format("SHMOE_PE_LOSS=continue SHMOE_HANG_TIMEOUT=3600 {} {} -n 3 "
                               "--timeout 60 {} kill9_others_go_on",
                               barrier, SHMOERUN, PE_FAULTS),
                   90);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.status, 0) << barrier << "\n" << r.output;
    expect_match(r,
                 "shmoerun: PE 1 \\(pid \\d+\\) was killed by signal 9 \\(Killed\\); "
                 "SHMOE_PE_LOSS=continue: the others go on\n");
    expect_match(r, "PE 0 went on without PE 1");
    expect_match(r, "PE 2 went on without PE 1");
    EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
    // The others go on: nothing stops them (the launcher's abort-mode line says it does).
    EXPECT_EQ(r.output.find("stopping the other"), std::string::npos) << r.output;
    expect_last_launcher_line(r,
                              "shmoerun: done without 1 of 3 PEs \\(SHMOE_PE_LOSS=continue\\): the "
                              "other 2 ended with status 0; lost: PE 1 \\(pid \\d+\\) was killed "
                              "by signal 9 \\(Killed\\)");
    EXPECT_LT(r.seconds, 30) << r.output;
    expect_no_leaked_segments(r);
  }
}

// PE 1 dies while the others wait for it in shmem_barrier_all: under SHMOE_PE_LOSS=continue
// their barrier ends over the live PEs once the store declares PE 1 lost, with either algorithm.
TEST(Launcher, ABarrierThatWaitsForAPeThatDiesGoesOnWithoutIt) {
  for (const char* barrier : {"SHMOE_BARRIER=central", "SHMOE_BARRIER=dissemination"}) {
    Result r = run(fmt::format("SHMOE_PE_LOSS=continue SHMOE_HANG_TIMEOUT=3600 {} {} -n 4 "
                               "--timeout 60 {} kill9_in_barrier",
                               barrier, SHMOERUN, PE_FAULTS),
                   90);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.status, 0) << barrier << "\n" << r.output;
    EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
    expect_match(r,
                 "shmoerun: done without 1 of 4 PEs \\(SHMOE_PE_LOSS=continue\\): the other 3 "
                 "ended with status 0; lost: PE 1 \\(pid \\d+\\) was killed by signal 9");
    EXPECT_LT(r.seconds, 30) << r.output;
  }
}

// A call whose data needs the lost PE (a broadcast from it) still fails at once naming it; the
// PEs that fail so are lost too, and the job's status is then the first lost PE's.
TEST(Launcher, ACollectiveThatNeedsALostPeFailsNamingIt) {
  Result r = run(fmt::format("SHMOE_PE_LOSS=continue SHMOE_HANG_TIMEOUT=3600 {} -n 3 --timeout 60 "
                             "{} kill9_then_broadcast",
                             SHMOERUN, PE_FAULTS),
                 90);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 128 + SIGKILL) << r.output;
  expect_match(r,
               "PE 1 was lost \\(SHMOE_PE_LOSS=continue\\); this call cannot complete without it");
  expect_last_launcher_line(r,
                            "shmoerun: lost 3 of 3 PEs \\(SHMOE_PE_LOSS=continue\\): PE 1 \\(pid "
                            "\\d+\\) was killed by signal 9 \\(Killed\\); PE [02] \\(pid \\d+\\) "
                            "exited with status 1; PE [02] \\(pid \\d+\\) exited with status 1");
  EXPECT_LT(r.seconds, 30) << r.output;
  expect_no_leaked_segments(r);
}

// The default, and SHMOE_PE_LOSS=abort said outright: the first death ends the job, as it always
// did; a value that is neither is refused before any PE starts, naming the variable and the
// values it takes.
TEST(Launcher, AbortModeIsUnchangedAndBadModesAreRefused) {
  for (const char* env : {"", "SHMOE_PE_LOSS=abort"}) {
    Result r = run(
        fmt::format("{} {} -n 3 --timeout 60 {} kill9_others_go_on", env, SHMOERUN, PE_FAULTS), 90);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.status, 128 + SIGKILL) << env << "\n" << r.output;
    expect_match(r,
                 "shmoerun: PE 1 \\(pid \\d+\\) was killed by signal 9 \\(Killed\\); "
                 "(stopping the other|no other PE)");
    EXPECT_EQ(r.output.find("SHMOE_PE_LOSS=continue"), std::string::npos) << r.output;
    EXPECT_LT(r.seconds, 30) << r.output;
  }
  Result bad = run(fmt::format("SHMOE_PE_LOSS=ignore {} -n 2 {} ok", SHMOERUN, PE_FAULTS), 30);
  EXPECT_NE(bad.status, 0);
  expect_match(bad, "SHMOE_PE_LOSS=ignore is not one of the accepted values: abort, continue");
  EXPECT_EQ(bad.output.find("pid="), std::string::npos) << "a PE started:\n" << bad.output;
}

// shmoe explains bus errors in its own segments only (dev_shm_small.sh); any other SIGBUS, faulting
// or sent, goes to the handler that was there before: the default action (death by SIGBUS), or
// whichever was installed first (UCX's error handler prints a backtrace and aborts,
// AddressSanitizer's reports and exits).
TEST(Launcher, BusErrorsOutsideTheHeapAreNotExplainedAsDevShm) {
  for (const char* mode : {"foreign_bus_error", "sent_bus_error"}) {
    Result r = run(shmoerun(2, mode), 30);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.status, 0) << mode << "\n" << r.output;
    expect_match(r, "PE 1 \\(pid \\d+\\) (was killed by signal|exited with status)");
    EXPECT_EQ(r.output.find("could not supply"), std::string::npos) << mode << "\n" << r.output;
  }
}

// Options of mpirun and Open MPI's oshrun are refused by name, with what shmoerun does instead,
// before any PE starts (no PE prints its pid).
TEST(Launcher, ForeignOptionsAreRefusedByNameWithAdvice) {
  const std::pair<const char*, const char*> cases[] = {
      {"--oversubscribe", "--oversubscribe is not a shmoerun option: not needed: shmoerun starts"},
      {"-x FOO",
       "-x is not a shmoerun option: not needed: every PE inherits shmoerun's environment"},
      {"--map-by core",
       "--map-by is not a shmoerun option: shmoerun starts every PE on this host "
       "and binds none"},
      {"--bind-to=core", "--bind-to is not a shmoerun option: shmoerun starts every PE"},
      {"--frobnicate", "unknown option --frobnicate \\(shmoerun's options come before PROGRAM"}};
  for (const auto& [option, message] : cases) {
    Result r = run(fmt::format("{} -np 2 {} {} ok", SHMOERUN, option, PE_FAULTS));
    EXPECT_EQ(r.status, 2) << option << ": " << r.output;
    expect_match(r, std::string("shmoerun: ") + message);
    EXPECT_EQ(r.output.find("pid="), std::string::npos) << option << " started PEs:\n" << r.output;
  }
}

// No PE count: the error names the spellings users type, not CLI11's option name.
TEST(Launcher, MissingPeCountIsNamed) {
  Result r = run(fmt::format("{} {} ok", SHMOERUN, PE_FAULTS));
  EXPECT_EQ(r.status, 2) << r.output;
  expect_match(
      r, "shmoerun: -n N \\(or -np N\\) is required: how many PEs to start \\(1\\.\\.1024\\)");
  EXPECT_EQ(r.output.find("pid="), std::string::npos) << "started PEs:\n" << r.output;
}

// -np=N, -n=N and `--` as mpirun takes them; a program named without a path is found in PATH and
// then in the working directory.
TEST(Launcher, MpirunSpellingsAndProgramLookup) {
  const std::filesystem::path program(PE_FAULTS);
  const std::string dir = program.parent_path().string(), name = program.filename().string();
  for (const std::string& args :
       {fmt::format("-np=2 -- {} ok", name), fmt::format("-n=2 {} ok", name),
        fmt::format("--np 2 --timeout=60 {} ok", name)}) {
    Result r = run(fmt::format("cd {} && {} {}", dir, SHMOERUN, args));
    EXPECT_EQ(r.status, 0) << args << ":\n" << r.output;
    expect_match(r, "pid=\\d+ pe=0");
    expect_match(r, "pid=\\d+ pe=1");
  }
  Result missing = run(fmt::format("{} -n 3 no_such_program_here ok", SHMOERUN));
  EXPECT_EQ(missing.status, 127) << missing.output;
  expect_match(missing,
               "shmoerun: cannot run PROGRAM no_such_program_here: not found in PATH nor "
               "in the working directory /");
  EXPECT_EQ(missing.output.find("cannot start PE"), std::string::npos) << missing.output;
}

// Lines written in pieces by several PEs at once come out whole, with or without --prefix.
TEST(Launcher, OutputIsMergedByLines) {
  for (const char* prefix : {"", "--prefix "}) {
    Result r = run(fmt::format("{} -n 3 {}{} partial_lines", SHMOERUN, prefix, PE_FAULTS));
    EXPECT_EQ(r.status, 0) << r.output;
    std::istringstream lines(r.output);
    int ok_lines = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.find("pid=") != std::string::npos) continue;
      EXPECT_TRUE(std::regex_match(line, std::regex("(\\[PE [0-2]\\] )?PE [0-2]/3: ok"))) << line;
      ++ok_lines;
    }
    EXPECT_EQ(ok_lines, 60) << r.output;
  }
}

// A process a PE leaves behind with the PE's output open does not keep shmoerun waiting.
TEST(Launcher, OutputHeldByAnOrphanDoesNotHoldTheJob) {
  Result r = run(shmoerun(2, "orphan_output"), 30);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_LT(r.seconds, 6) << r.output;
}

// An error every PE reports in the same words is printed once, with how many more reported it.
TEST(Launcher, IdenticalErrorsOfSeveralPesArePrintedOnce) {
  Result r = run(shmoerun(4, "ok", "SHMEM_SYMMETRIC_SIZE=lots"));
  EXPECT_NE(r.status, 0);
  const std::regex error("SHMEM_SYMMETRIC_SIZE='lots' is not a size");
  const auto count = std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), error),
                                   std::sregex_iterator());
  EXPECT_EQ(count, 1) << r.output;
  expect_match(r, "SHMEM_SYMMETRIC_SIZE='lots' is not a size .*\\(the same on 3 more PEs\\)");
}

// A misspelt variable is warned about once, by PE 0, naming the setting meant; the variables
// shmoerun gives its PEs are not warned about.
TEST(Launcher, UnknownVariableIsWarnedOnceByPe0) {
  Result r = run(shmoerun(3, "ok", "SHMOE_TRANSPRT=ucx"));
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string warning =
      "SHMOE_TRANSPRT is not a shmoe setting and is ignored; did you mean SHMOE_TRANSPORT?";
  EXPECT_EQ(r.output.find(warning), r.output.rfind(warning)) << r.output;
  expect_match(r, "shmoe: PE 0: warning: " + std::string("SHMOE_TRANSPRT is not a shmoe setting"));
  Result quiet = run(shmoerun(2, "ok", "SHMOE_TRANSPRT=ucx SHMOE_WARN_UNKNOWN_ENV=0"));
  EXPECT_EQ(quiet.status, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("is not a shmoe setting"), std::string::npos) << quiet.output;
  Result plain = run(shmoerun(2, "ok"));
  EXPECT_EQ(plain.output.find("is not a shmoe setting"), std::string::npos) << plain.output;
}

TEST(Launcher, GlobalExitEndsTheJobWithItsStatus) {
  Result r = run(shmoerun(3, "global_exit"), 30);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 7) << r.output;
  expect_match(r, "PE 1 called shmem_global_exit\\(7\\)");
}

TEST(Launcher, InterruptEndsEveryPe) {
  Proc p = start(shmoerun(3, "sleep"));
  ::usleep(1500 * 1000);
  auto t0 = Clock::now();
  ::kill(-p.pid, SIGINT);
  Result r = finish(p, 20, t0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.seconds, 10);
}

TEST(Launcher, JobTimeoutStopsAHungJob) {
  Result r = run(fmt::format("{} -n 2 --timeout 2 {} sleep", SHMOERUN, PE_FAULTS), 30);
  EXPECT_EQ(r.status, 124);
  expect_match(r, "exceeded --timeout \\(2\\.0 s\\); stopping 2 PEs");
  Result one = run(fmt::format("{} -n 1 --timeout 1 {} sleep", SHMOERUN, PE_FAULTS), 30);
  EXPECT_EQ(one.status, 124);
  expect_match(one, "exceeded --timeout \\(1\\.0 s\\); stopping 1 PE\n");
}

TEST(Waits, HangIsReportedWithTheCallAndTheValues) {
  Result r = run(shmoerun(1, "wait_forever", "SHMOE_HANG_TIMEOUT=1"), 30);
  EXPECT_NE(r.status, 0);
  expect_match(r, "hang: shmem_long_wait_until on symmetric offset 0x[0-9a-f]+ .*want EQ 42");
}

TEST(Waits, BarrierHangNamesThePeThatNeverCame) {
  Result r = run(shmoerun(2, "skip_barrier", "SHMOE_HANG_TIMEOUT=1"), 30);
  EXPECT_NE(r.status, 0);
  expect_match(r, "PE 0: error: hang: barrier #\\d+ round 0 \\(waiting for PE 1");
}

// The three classic causes of a hung job, each planted in one PE; shmoerun's verdict (or the
// refusal, for parameters) must name that PE. Bounded: the hang timeout is 2 s.
TEST(HangVerdict, PeThatSkipsABarrierIsNamed) {
  Result r = run(shmoerun(3, "skip_barrier", "SHMOE_HANG_TIMEOUT=2"), 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmoerun: a wait exceeded SHMOE_HANG_TIMEOUT; verdict: PE 1 is the one the others "
               "wait on \\(PE 0 waits for it in barrier #\\d+, PE 2 waits for it in barrier "
               "#\\d+\\); PE 1 itself is not waiting inside shmoe");
  // Every PE wrote its own line, PE 1 included (it answered the others' hang).
  expect_match(r, "PE 1: info: hang report: PE 1 \\(pid \\d+, peer_hang\\): no thread is waiting");
  expect_match(r,
               "PE 0: info: hang report: PE 0 \\(pid \\d+, (timeout|peer_hang)\\): thread \\d+ "
               "waits in barrier for PE 1");
  EXPECT_LT(r.seconds, 30);
}

// A reduction's waits name no single PE: the one PE not waiting is the one to name, in the
// verdict and in the last line (not PE 0 or 2, whose waits timed out first).
TEST(HangVerdict, PeThatSkipsAReductionIsNamed) {
  Result r = run(shmoerun(3, "skip_reduction", "SHMOE_HANG_TIMEOUT=2"), 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmoerun: a wait exceeded SHMOE_HANG_TIMEOUT; verdict: PE 1 is the one the others "
               "wait on \\(it is the only PE not waiting inside shmoe: PE 0 waits in reduction .* "
               "for no single PE, PE 2 waits in reduction .* for no single PE\\); PE 1 itself is "
               "not waiting inside shmoe");
  // shmoerun's last line names the PE the verdict blames, not the first PE that timed out.
  const auto last = r.output.rfind("shmoerun: ");
  ASSERT_NE(last, std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_match(
      r.output.substr(last, r.output.find('\n', last) - last),
      std::regex("shmoerun: the job hung waiting on PE 1 \\(pid \\d+\\) \\(see the verdict "
                 "above\\); PE [02] \\(pid \\d+\\), the first PE to stop, exited with status "
                 "\\d+; (stopping the other \\d+ PEs|stopping the other PE still running|no other "
                 "PE was still running)")))
      << r.output;
  EXPECT_LT(r.seconds, 30);
}

// PE 1 skips a barrier and finalizes (its finalize's barrier matches the others' barrier): the
// others wait for it in their finalize, and the verdict says that it has finalized.
TEST(HangVerdict, PeThatFinalizedEarlyIsSaidToHaveFinalized) {
  Result r = run(shmoerun(3, "finalize_early", "SHMOE_HANG_TIMEOUT=2"), 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "verdict: PE 1 is the one the others wait on \\(PE 0 waits for it in barrier #\\d+, "
               "PE 2 waits for it in barrier #\\d+\\); PE 1 has already called shmem_finalize "
               "\\(it skipped the barrier the others wait in\\)");
  expect_match(r, "shmoerun: the job hung waiting on PE 1 \\(pid \\d+\\)");
  EXPECT_LT(r.seconds, 30);
}

TEST(HangVerdict, DispatchWithAnotherTopkIsRefusedNamingThePeAndTheParameter) {
  Result r = run(fmt::format("{} -n 3 {} topk_mismatch", SHMOERUN, MOE_FAULTS), 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 3) << r.output;
  for (int pe : {0, 2}) {
    expect_match(r,
                 fmt::format("PE {0}: refused: dispatch: PEs disagree on the parameters "
                             "\\(num_topk\\): PE 1 called with hidden=4 num_topk=1 .*, PE {0} with "
                             "hidden=4 num_topk=2",
                             pe));
  }
  expect_match(r,
               "PE 1: refused: dispatch: PEs disagree on the parameters \\(num_topk\\): PE 0 "
               "called with hidden=4 num_topk=2 .*, PE 1 with hidden=4 num_topk=1");
  EXPECT_LT(r.seconds, 30);
}

TEST(HangVerdict, PeThatNeverCallsCombineIsNamed) {
  Result r =
      run(fmt::format("SHMOE_HANG_TIMEOUT=2 {} -n 3 {} skip_combine", SHMOERUN, MOE_FAULTS), 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "verdict: PE 1 is the one the others wait on \\(PE 0 waits for it in combine entry "
               "#3, PE 2 waits for it in combine entry #3\\); PE 1 itself is not waiting inside "
               "shmoe");
  expect_match(r, "hang: combine entry #3: waiting for PE 1");
  EXPECT_LT(r.seconds, 30);
}

// Reads the output of `p` into `out` until `done(out)` or `limit_s` passes.
template <typename Done>
bool read_until(const Proc& p, std::string& out, Done done, double limit_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(limit_s);
  char buf[4096];
  while (!done(out) && Clock::now() < deadline) {
    pollfd pfd{p.out, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    ssize_t n = ::read(p.out, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return done(out);
}

TEST(HangReport, Sigusr1MakesEveryPeWriteItsJsonReport) {
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("shmoe-hang-{}", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // exec: the signal goes to shmoerun itself, not to a shell in between.
  Proc p = start(fmt::format("SHMOE_HANG_TIMEOUT=0 SHMOE_HANG_REPORT={}/pe%p.json exec {}",
                             dir.string(), shmoerun(3, "skip_barrier")));
  std::string early;
  const bool started = read_until(
      p, early,
      [](const std::string& o) {
        std::regex started_re("pid=\\d+ pe=\\d+");
        return std::distance(std::sregex_iterator(o.begin(), o.end(), started_re),
                             std::sregex_iterator()) == 3;
      },
      30);
  EXPECT_TRUE(started) << early;
  ::sleep(1);  // PEs 0 and 2 reach the barrier
  ::kill(p.pid, SIGUSR1);
  auto path = [&](int pe) { return dir / fmt::format("pe{}.json", pe); };
  read_until(
      p, early,
      [&](const std::string&) {
        return std::filesystem::exists(path(0)) && std::filesystem::exists(path(1)) &&
               std::filesystem::exists(path(2));
      },
      20);
  for (int pe = 0; pe < 3; ++pe) {
    std::ifstream in(path(pe));
    ASSERT_TRUE(in) << path(pe) << " missing; output:\n" << early;
    const nlohmann::json report = nlohmann::json::parse(in);
    EXPECT_EQ(report.at("pe"), pe);
    EXPECT_EQ(report.at("reason"), "signal");
    EXPECT_GT(report.at("pid").get<int>(), 0);
    const auto& waits = report.at("waits");
    if (pe == 1) {
      EXPECT_TRUE(waits.empty()) << report.dump(2);  // busy in the program, outside shmoe
      continue;
    }
    ASSERT_EQ(waits.size(), 1u) << report.dump(2);
    EXPECT_EQ(waits[0].at("op"), "barrier");
    EXPECT_EQ(waits[0].at("peer"), 1);
    EXPECT_GE(waits[0].at("generation").get<std::uint64_t>(), 1u);
    EXPECT_GT(waits[0].at("expected").get<std::uint64_t>(),
              waits[0].at("seen").get<std::uint64_t>());
    EXPECT_GT(waits[0].at("waited_s").get<double>(), 0.5);
  }
  ::kill(p.pid, SIGINT);
  Result r = finish(p, 20);
  r.output = early + r.output;
  expect_match(r, "shmoerun: hang reports on SIGUSR1; verdict: PE 1 is the one the others wait on");
  std::filesystem::remove_all(dir);
}

TEST(BadInput, PeOutOfRange) {
  Result r = run(shmoerun(2, "bad_pe"));
  EXPECT_NE(r.status, 0);
  expect_match(r, "shmem_long_p: pe=5 is out of range \\(0\\.\\.1\\)");
}

TEST(BadInput, NonSymmetricAddress) {
  Result r = run(shmoerun(1, "bad_address"));
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmem_long_put: dest=0x[0-9a-f]+ \\(8 bytes\\) is not symmetric: it is not inside "
               "the symmetric heap \\[0x[0-9a-f]+, \\+[0-9]+\\) nor the program's global data "
               "\\[0x[0-9a-f]+, \\+[0-9]+\\): allocate it with shmem_malloc");
}

TEST(BadInput, GlobalOfASharedLibrary) {
  Result r = run(shmoerun(1, "library_global"));
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmem_getmem: source=0x[0-9a-f]+ \\(8 bytes\\) is not symmetric: .* it lies in "
               "[^ ]*libc\\.so\\.6: only the executable's writable global and static variables "
               "are symmetric");
}

TEST(BadInput, UnknownComparison) {
  Result r = run(shmoerun(1, "bad_cmp"));
  EXPECT_NE(r.status, 0);
  expect_match(r, "shmem_long_wait_until: cmp=99 is not a comparison");
}

TEST(BadInput, HangReportFileWithoutThePeNumber) {
  Result r = run(shmoerun(2, "ok", "SHMOE_HANG_REPORT=/tmp/hang.json"));
  EXPECT_NE(r.status, 0);
  expect_match(r, "SHMOE_HANG_REPORT=/tmp/hang.json has no %p: the 2 PEs would write one file");
}

TEST(BadInput, HangReportFileThatCannotBeWritten) {
  Result r = run(shmoerun(2, "ok", "SHMOE_HANG_REPORT=/proc/nonexistent/pe%p.json"));
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmem_init failed: SHMOE_HANG_REPORT=/proc/nonexistent/pe[01]\\.json: cannot write "
               "it: the directory /proc/nonexistent does not exist");
}

TEST(BadInput, BadSymmetricSize) {
  Result r = run(shmoerun(2, "ok", "SHMEM_SYMMETRIC_SIZE=lots"));
  EXPECT_NE(r.status, 0);
  expect_match(r, "SHMEM_SYMMETRIC_SIZE='lots' is not a size");
}

// A heap of 0 bytes used to become the runtime's own 2 MB; one larger than the machine, a SIGBUS
// at the first touch. Both are refused at shmem_init with the value and the allowed range.
TEST(BadInput, EmptySymmetricHeap) {
  for (const char* variable : {"SHMEM_SYMMETRIC_SIZE", "SMA_SYMMETRIC_SIZE"}) {
    Result r = run(shmoerun(2, "ok", fmt::format("{}=0", variable)));
    EXPECT_NE(r.status, 0);
    expect_match(r,
                 fmt::format("shmem_init failed: {}=0 \\(0 bytes\\) is out of range: a PE's "
                             "symmetric heap must be 1 byte to [0-9.]+ GiB \\([0-9]+ bytes, this "
                             "machine's memory\\)",
                             variable));
  }
}

TEST(BadInput, SymmetricHeapLargerThanTheMachine) {
  if (::sysconf(_SC_PHYS_PAGES) * ::sysconf(_SC_PAGESIZE) >= (1l << 40)) {
    GTEST_SKIP() << "this machine has 1 TiB of memory or more";
  }
  Result r = run(shmoerun(2, "ok", "SHMEM_SYMMETRIC_SIZE=1T"), 30);
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "shmem_init failed: SHMEM_SYMMETRIC_SIZE=1T \\(1099511627776 bytes\\) is out of "
               "range: a PE's symmetric heap must be 1 byte to [0-9.]+ GiB \\([0-9]+ bytes, this "
               "machine's memory\\)");
  EXPECT_EQ(r.output.find("Bus error"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 15);
}

TEST(Debug, AsymmetricAllocationNamesThePe) {
  Result r = run(shmoerun(3, "asymmetric_malloc", "SHMOE_DEBUG=1"));
  EXPECT_NE(r.status, 0);
  expect_match(r,
               "asymmetric allocation .*PE 2 called shmem_malloc size=8192.* PE 0 called "
               "shmem_malloc size=4096");
}

TEST(Startup, ForeignLauncherWithPe0HostingTheStore) {
  int port = free_port();
  Proc a = start(by_hand(0, 2, port, "ok"));
  Proc b = start(by_hand(1, 2, port, "ok"));
  Result ra = finish(a, 30), rb = finish(b, 30);
  EXPECT_EQ(ra.status, 0) << ra.output;
  EXPECT_EQ(rb.status, 0) << rb.output;
}

TEST(Startup, DuplicateRankIsRefusedOnEveryPe) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  ::usleep(300 * 1000);
  Proc b = start(by_hand(1, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  Proc c = start(by_hand(1, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  Result ra = finish(a, 30), rb = finish(b, 30), rc = finish(c, 30);
  for (const Result* r : {&ra, &rb, &rc}) {
    EXPECT_FALSE(r->timed_out);
    EXPECT_NE(r->status, 0) << r->output;
    expect_match(*r, "rank 1");
    EXPECT_LT(r->seconds, 15);
  }
  expect_no_new_dead_segments(before);
}

TEST(Startup, DifferentSizesAreRefused) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 2, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  ::usleep(300 * 1000);
  Proc b = start(by_hand(1, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  Result ra = finish(a, 30), rb = finish(b, 30);
  for (const Result* r : {&ra, &rb}) {
    EXPECT_NE(r->status, 0) << r->output;
    expect_match(*r, "size");
    EXPECT_LT(r->seconds, 15);
  }
  expect_no_new_dead_segments(before);
}

TEST(Startup, UnreachableStoreIsNamed) {
  int port = free_port();
  Result r = run(by_hand(1, 2, port, "ok", "SHMOE_INIT_TIMEOUT=1"), 30);
  EXPECT_NE(r.status, 0);
  expect_match(r, fmt::format("cannot reach the config store at 127\\.0\\.0\\.1:{}", port));
  EXPECT_LT(r.seconds, 10);
}

TEST(Startup, MissingPesAreListedAfterTheInitTimeout) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 4, port, "ok", "SHMOE_INIT_TIMEOUT=2"));
  Proc b = start(by_hand(2, 4, port, "ok", "SHMOE_INIT_TIMEOUT=2"));
  Result ra = finish(a, 30), rb = finish(b, 30);
  for (const Result* r : {&ra, &rb}) {
    EXPECT_NE(r->status, 0);
    expect_match(*r, "PEs 1, 3");
    EXPECT_LT(r->seconds, 15);
  }
  expect_no_new_dead_segments(before);
}

// A PE killed while the job is still starting cannot remove its segment's name: the store
// does it, and the PE that then aborts removes its own.
TEST(Startup, PeKilledDuringStartupLeavesNoSegment) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  Proc b = start(by_hand(1, 3, port, "ok", "SHMOE_INIT_TIMEOUT=20"));
  ::usleep(800 * 1000);  // both are now in start-up, waiting for PE 2
  ::kill(-b.pid, SIGKILL);
  Result rb = finish(b, 10), ra = finish(a, 30);
  EXPECT_EQ(rb.status, 128 + SIGKILL);
  EXPECT_NE(ra.status, 0);
  expect_match(ra, "PE 1 \\(pid \\d+ on .*\\) disconnected without finalizing");
  expect_no_new_dead_segments(before);
}

TEST(Startup, PeDeathWithoutLauncherIsNamedByTheOthers) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 3, port, "kill9"));
  Proc b = start(by_hand(1, 3, port, "kill9"));
  Proc c = start(by_hand(2, 3, port, "kill9"));
  Result ra = finish(a, 30), rb = finish(b, 30), rc = finish(c, 30);
  EXPECT_EQ(rb.status, 128 + SIGKILL);
  for (const Result* r : {&ra, &rc}) {
    EXPECT_FALSE(r->timed_out);
    EXPECT_NE(r->status, 0);
    expect_match(*r, "PE 1 \\(pid \\d+ on .*\\) disconnected without finalizing");
    EXPECT_LT(r->seconds, 15);
  }
  expect_no_new_dead_segments(before);
}

// Outside shmoerun PE 0 hosts the store: its death is reported naming PE 0.
TEST(Startup, DeathOfPe0IsNamedAsTheStoreHost) {
  const auto before = shm_names();
  int port = free_port();
  Proc a = start(by_hand(0, 2, port, "kill9_pe0"));
  Proc b = start(by_hand(1, 2, port, "kill9_pe0"));
  Result ra = finish(a, 30), rb = finish(b, 30);
  EXPECT_EQ(ra.status, 128 + SIGKILL);
  EXPECT_FALSE(rb.timed_out);
  EXPECT_NE(rb.status, 0);
  expect_match(rb,
               "lost the config store at 127\\.0\\.0\\.1:\\d+ \\(.*\\): PE 0, which hosts the "
               "store, has died or cannot be reached");
  EXPECT_LT(rb.seconds, 15);
  expect_no_new_dead_segments(before);
}

}  // namespace
