#include "launcher.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "bootstrap/config_store.hpp"
#include "bootstrap/job_key.hpp"
#include "bootstrap/reachable_address.hpp"
#include "common/settings.hpp"
#include "hang_reports.hpp"
#include "heap/segment.hpp"
#include "output_merger.hpp"

namespace shmoe::tools {
namespace {

using Clock = std::chrono::steady_clock;

int g_wake_pipe[2] = {-1, -1};
volatile sig_atomic_t g_interrupted = 0;
volatile sig_atomic_t g_report_requested = 0;  // SIGUSR1: ask every PE for its hang report

void on_signal(int sig) {
  if (sig == SIGINT || sig == SIGTERM) g_interrupted = sig;
  if (sig == SIGUSR1) g_report_requested = 1;
  int saved = errno;
  char c = 0;
  ssize_t ignored = ::write(g_wake_pipe[1], &c, 1);
  (void)ignored;
  errno = saved;
}

void install_handlers() {
  if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGCHLD, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
}

// A PE's output stream, relayed line by line through the OutputMerger.
struct Relay {
  int fd = -1;
  int out = STDOUT_FILENO;
};

struct Pe {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // from waitpid, once it has ended
  Relay relays[2];
};

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The name the launcher's lines begin with: shmoerun, or the tool that runs the launcher.
std::string g_name = "shmoerun";

void say(const std::string& line) {
  write_all(STDERR_FILENO, fmt::format("{}: {}\n", g_name, line));
}

// "1 PE", "3 PEs".
std::string pe_count(int n) {
  return fmt::format("{} PE{}", n, n == 1 ? "" : "s");
}

pid_t spawn(const LaunchOptions& o, Pe& pe) {
  int pipes[2][2];
  for (auto& p : pipes) {
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  }
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGUSR1, SIG_DFL);
    ::dup2(pipes[0][1], STDOUT_FILENO);
    ::dup2(pipes[1][1], STDERR_FILENO);
    ::setenv("SHMOE_RANK", std::to_string(pe.rank).c_str(), 1);
    ::setenv("SHMOE_SIZE", std::to_string(o.job_size).c_str(), 1);
    ::setenv("SHMOE_STORE", o.store_address.c_str(), 1);
    set_torch_env(pe.rank, o.job_size, pe.rank - o.first_rank, o.n_pes, o.torch);
    std::vector<char*> argv;
    for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::string msg = fmt::format("{}: cannot start PE {}: {}: {}\n", g_name, pe.rank, argv[0],
                                  std::strerror(errno));
    write_all(STDERR_FILENO, msg);
    ::_exit(127);
  }
  for (int i = 0; i < 2; ++i) {
    ::close(pipes[i][1]);
    pe.relays[i].fd = pipes[i][0];
    pe.relays[i].out = i == 0 ? STDOUT_FILENO : STDERR_FILENO;
  }
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, ::strsignal(sig));
  }
  return "ended in an unknown way";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool ended_badly(const Pe& pe) {
  return !pe.running && !(WIFEXITED(pe.status) && WEXITSTATUS(pe.status) == 0);
}

// Among the PEs that failed: the one the store saw die first, else one killed by a signal (the
// others exit with a status after hearing of a death), else the lowest rank.
const Pe& pick_culprit(const std::vector<Pe>& pes, int first_lost) {
  if (first_lost >= 0 && ended_badly(pes[first_lost])) return pes[first_lost];
  const Pe* pick = nullptr;
  for (const auto& pe : pes) {
    if (!ended_badly(pe)) continue;
    if (pick == nullptr || (WIFSIGNALED(pe.status) && !WIFSIGNALED(pick->status))) pick = &pe;
  }
  return *pick;
}

// Segments are unlinked once the job has started; a PE that died before that leaves its name.
void sweep_segments(const std::vector<Pe>& pes) {
  for (const auto& pe : pes) heap::Segment::remove_name_of(pe.pid, pe.rank);
}

// Prints why the job was aborted and returns the job's exit status: shmem_global_exit(status)
// stores "exit=<status>;<why>" (shmem/runtime.cpp) and its status is the job's, 0 included;
// any other abort is a failure.
int report_abort(std::string why) {
  int status = 1;
  if (why.rfind("exit=", 0) == 0 && why.find(';') != std::string::npos) {
    status = std::atoi(why.c_str() + 5);
    why.erase(0, why.find(';') + 1);
  }
  say(fmt::format("job aborted: {}", why));
  return status;
}

// The ranks of the job that never said hello to its store ("2, 3"); empty once all did.
std::string never_arrived(const bootstrap::JobStatus& s, int job_size) {
  std::vector<int> missing;
  for (int r = 0; r < job_size; ++r) {
    if (!std::binary_search(s.arrived.begin(), s.arrived.end(), r)) missing.push_back(r);
  }
  return fmt::format("{}", fmt::join(missing, ", "));
}

// Waits until the job whose store is at `address` has ended: every PE finalized (0) or the job
// was aborted (its status, after printing why). 124 after `timeout` (0: none), or when not
// every one of the `job_size` PEs has said hello within `start_timeout` (0: no bound); 130 on
// Ctrl-C.
int wait_for_job_end(const std::string& address, std::chrono::milliseconds timeout,
                     int job_size = 0, std::chrono::milliseconds start_timeout = {}) {
  // The key is this process's SHMOE_JOB_KEY (see use_job_key).
  bootstrap::Hello hello{bootstrap::PeerRole::kTool, -1, 0, static_cast<int>(::getpid()), "", {}};
  bootstrap::ConfigStoreClient client(bootstrap::StoreAddress::parse(address), hello,
                                      std::chrono::seconds(10));
  const auto start = Clock::now();
  bool started = start_timeout.count() == 0;
  for (;;) {
    if (client.get(bootstrap::kFinalizedKey, std::chrono::milliseconds(200))) return 0;
    if (!started) {
      const std::string missing = never_arrived(client.job_status(), job_size);
      started = missing.empty();
      if (!started && Clock::now() - start > start_timeout) {
        say(fmt::format("PEs {} did not come within --start-timeout {:.1f} s; stopping the store",
                        missing, std::chrono::duration<double>(start_timeout).count()));
        return 124;
      }
    }
    if (auto why = client.get(bootstrap::kAbortKey, std::chrono::milliseconds(0))) {
      return report_abort(*why);
    }
    if (g_interrupted) {
      say("interrupted; stopping the store");
      return 130;
    }
    if (timeout.count() > 0 && Clock::now() - start > timeout) {
      say(fmt::format("the job did not end within {:.1f} s; stopping the store",
                      std::chrono::duration<double>(timeout).count()));
      return 124;
    }
  }
}

// The job's key, which every process that joins its store must prove: the user's
// SHMOE_JOB_KEY, or a fresh one when no other launcher joins this one's store. It goes into this
// process's environment, where the PEs inherit it and the launcher's own tool connections find
// it; never onto a command line, where every user of the host could read it.
bootstrap::JobKey use_job_key(bool shared_with_other_launchers) {
  std::optional<bootstrap::JobKey> key = bootstrap::JobKey::from_environment();
  if (!key && shared_with_other_launchers) {
    throw std::runtime_error(fmt::format(
        "this job's config store is shared by several launchers (--store, --size or "
        "--store-only), so they need one job key: export {}=$({}) (the same value) to every "
        "shmoerun of the job",
        bootstrap::kJobKeyVariable, bootstrap::kMakeKeyCommand));
  }
  if (!key) key = bootstrap::JobKey::generate();
  settings::set(bootstrap::kJobKeyVariable, key->text());
  return *key;
}

// This host as its PEs name it in their hello: SHMOE_HOST_ID, else the system's host name.
std::string this_host_id() {
  if (auto id = settings::host_id()) return *id;
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : "localhost";
}

// Where this host's processes reach a store that listens on `bind_host`.
std::string local_store_address(const std::string& bind_host, std::uint16_t port) {
  return fmt::format("{}:{}", bind_host == "0.0.0.0" ? "127.0.0.1" : bind_host, port);
}

// How long the launcher waits for the PEs' hang reports: they are already in the store after a
// timeout (the PE that timed out waited for them), and take a moment to come after SIGUSR1.
constexpr std::chrono::milliseconds kReportWait{3000};

HangVerdict print_verdict(HangReports& hang, const char* why) {
  HangVerdict v = hang.verdict(kReportWait);
  say(fmt::format("{}; {}", why, v.line));
  return v;
}

// When a PE stopped on a hang timeout: which PE the others waited on.
std::optional<HangVerdict> explain_hang(HangReports& hang) {
  try {
    if (hang.job_hung()) return print_verdict(hang, "a wait exceeded SHMOE_HANG_TIMEOUT");
  } catch (const std::exception& e) {
    say(fmt::format("cannot read the hang reports: {}", e.what()));
  }
  return std::nullopt;
}

// The PE of this launcher's group that has job rank `rank`, if any.
const Pe* pe_of_rank(const std::vector<Pe>& pes, int rank) {
  for (const auto& pe : pes) {
    if (pe.rank == rank) return &pe;
  }
  return nullptr;
}

// The last line after a failure. After a hang the PE that failed first is only the first whose
// wait timed out: the line names the PE the verdict blames, and then the one that stopped.
std::string failure_line(const std::vector<Pe>& pes, const Pe& failed,
                         const std::optional<HangVerdict>& hang, int running) {
  // The others may all have exited already (each on its own, or told by the store): then there
  // is nothing to stop, and saying "stopping the other 0 PEs" would be wrong.
  const std::string rest = running == 0   ? std::string("no other PE was still running")
                           : running == 1 ? std::string("stopping the other PE still running")
                                          : fmt::format("stopping the other {} PEs", running);
  if (!hang || hang->culprits.empty()) {
    return fmt::format("PE {} (pid {}) {}; {}", failed.rank, failed.pid,
                       describe_status(failed.status), rest);
  }
  std::vector<std::string> names;
  for (int rank : hang->culprits) {
    const Pe* pe = pe_of_rank(pes, rank);
    names.push_back(pe != nullptr ? fmt::format("PE {} (pid {})", rank, pe->pid)
                                  : fmt::format("PE {}", rank));
  }
  return fmt::format(
      "the job hung waiting on {} (see the verdict above); PE {} (pid {}), the first PE to stop, "
      "{}; {}",
      fmt::join(names, " and "), failed.rank, failed.pid, describe_status(failed.status), rest);
}

// SHMOE_PE_LOSS=continue: the line that says a PE failed and whether the job goes on.
std::string loss_line(const Pe& pe, int running) {
  return fmt::format("PE {} (pid {}) {}; SHMOE_PE_LOSS=continue: {}", pe.rank, pe.pid,
                     describe_status(pe.status),
                     running > 0 ? "the others go on" : "no other PE was still running");
}

// Each lost PE, in the order they ended.
std::string each_lost(const std::vector<const Pe*>& lost) {
  std::vector<std::string> each;
  for (const Pe* pe : lost) {
    each.push_back(
        fmt::format("PE {} (pid {}) {}", pe->rank, pe->pid, describe_status(pe->status)));
  }
  return fmt::format("{}", fmt::join(each, "; "));
}

// The last line of a job that lost PEs and failed.
std::string lost_summary(const std::vector<const Pe*>& lost, int n_pes) {
  return fmt::format("lost {} of {} PEs (SHMOE_PE_LOSS=continue): {}", lost.size(), n_pes,
                     each_lost(lost));
}

// A job whose lost PEs all died (ended by a signal: killed, crashed) while every other PE ended
// with status 0 did what SHMOE_PE_LOSS=continue is for: it has not failed. A PE that exited with
// a nonzero status failed by its own verdict, and so did the job.
bool only_deaths_lost(const std::vector<const Pe*>& lost, int n_pes) {
  return static_cast<int>(lost.size()) < n_pes &&
         std::all_of(lost.begin(), lost.end(),
                     [](const Pe* pe) { return WIFSIGNALED(pe->status); });
}

// The last line of such a job (its status is 0).
std::string done_without_line(const std::vector<const Pe*>& lost, int n_pes) {
  return fmt::format(
      "done without {} of {} PEs (SHMOE_PE_LOSS=continue): the other {} ended with status 0; "
      "lost: {}",
      lost.size(), n_pes, n_pes - static_cast<int>(lost.size()), each_lost(lost));
}

// SIGUSR1 to shmoerun: every running PE writes its report, and shmoerun judges them.
void request_reports(HangReports& hang, const std::vector<Pe>& pes) {
  try {
    hang.clear();
    for (int rank : hang.running_ranks()) {
      const Pe* pe = pe_of_rank(pes, rank);
      if (pe != nullptr && pe->running) ::kill(pe->pid, SIGUSR1);
    }
    print_verdict(hang, "hang reports on SIGUSR1");
  } catch (const std::exception& e) {
    say(fmt::format("cannot read the hang reports: {}", e.what()));
  }
}

// Stops relaying one stream (at its end): what is left of its last line is printed.
void end_relay(int rank, Relay& r, OutputMerger& merger) {
  merger.add(rank, r.out, {}, true, Clock::now());
  ::close(r.fd);
  r.fd = -1;
}

// Waits up to `wait_ms` for the PEs' output (or a signal) and hands what came to the merger.
void relay_output(std::vector<Pe>& pes, OutputMerger& merger, int wait_ms) {
  std::vector<pollfd> fds{{g_wake_pipe[0], POLLIN, 0}};
  std::vector<std::pair<int, Relay*>> owners;  // (rank, stream) per pollfd after the first
  for (auto& pe : pes) {
    for (Relay& r : pe.relays) {
      if (r.fd < 0) continue;
      fds.push_back({r.fd, POLLIN, 0});
      owners.emplace_back(pe.rank, &r);
    }
  }
  ::poll(fds.data(), fds.size(), wait_ms);
  if (fds[0].revents & POLLIN) {
    char buf[64];
    while (::read(g_wake_pipe[0], buf, sizeof buf) > 0) {
    }
  }
  for (std::size_t k = 1; k < fds.size(); ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto [rank, relay] = owners[k - 1];
    Relay& r = *relay;
    char buf[65536];
    const ssize_t n = ::read(r.fd, buf, sizeof buf);
    if (n > 0) {
      merger.add(rank, r.out, std::string_view(buf, static_cast<std::size_t>(n)), false,
                 Clock::now());
    } else if (n == 0 || errno != EINTR) {
      end_relay(rank, r, merger);
    }
  }
}

// Stops relaying every stream: what is left of its last line is printed.
void close_relays(std::vector<Pe>& pes, OutputMerger& merger) {
  for (auto& pe : pes) {
    for (Relay& r : pe.relays) {
      if (r.fd >= 0) end_relay(pe.rank, r, merger);
    }
  }
}

// The ranks this launcher starts lie within the job.
void check_ranks(const LaunchOptions& o) {
  if (o.first_rank < 0 || o.first_rank + o.n_pes > o.job_size) {
    throw std::runtime_error(
        fmt::format("--first-rank {} with -n {} does not fit a job of --size {} (ranks 0..{})",
                    o.first_rank, o.n_pes, o.job_size, o.job_size - 1));
  }
}

// One run of a job (run_job), a method per phase: host the store, start the PEs, watch them and
// their output until both have ended, conclude. The members are what the phases share.
class JobRun {
 public:
  explicit JobRun(LaunchOptions o) : o_(std::move(o)) {}

  int run() {
    const bootstrap::JobKey job_key = use_job_key(!hosts_store_ || o_.job_size > o_.n_pes);
    if (hosts_store_) host_store(job_key);
    o_.torch = torch_rendezvous(o_.job_size == o_.n_pes);
    install_handlers();
    hang_.emplace(o_.store_address, o_.job_size);
    start_pes();
    watch();
    return conclude();
  }

 private:
  // The launcher runs the job's config store, as oshrun's daemon would.
  void host_store(const bootstrap::JobKey& job_key) {
    bootstrap::ConfigStoreServer::Options store_options;
    store_options.bind_host = o_.store_bind;
    store_options.port = o_.store_port;
    store_options.job_size = o_.job_size;
    store_options.job_key = job_key;
    const int first = o_.first_rank, count = o_.n_pes;
    std::atomic<int>& first_lost = first_lost_;
    store_options.on_pe_lost = [&first_lost, first, count](const bootstrap::Hello& lost) {
      if (lost.rank < first || lost.rank >= first + count) return;  // a PE of another host
      heap::Segment::remove_name_of(lost.pid, lost.rank);
      int none = -1;
      first_lost.compare_exchange_strong(none, lost.rank - first);
    };
    store_.emplace(store_options);
    store_->start();
    o_.store_address = local_store_address(o_.store_bind, store_->port());
  }

  void start_pes() {
    pes_.resize(o_.n_pes);
    for (int r = 0; r < o_.n_pes; ++r) {
      pes_[r].rank = o_.first_rank + r;
      pes_[r].pid = spawn(o_, pes_[r]);
      pes_[r].running = true;
    }
    running_ = o_.n_pes;
    start_ = Clock::now();
  }

  // Relays the PEs' output and acts on their ends, the signals and the timeout until every PE
  // has ended and its output is read.
  void watch() {
    while (running_ > 0 || output_open()) {
      relay_output(pes_, merger_, blame_at_ || merger_.holding() ? 20 : 200);
      merger_.release(Clock::now(), false);
      reap();
      blame_when_due();
      act_on_signals();
      stop_on_timeout();
      drop_orphaned_output();
      kill_after_grace();
    }
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& pe : pes_) {
        if (pe.pid == pid && pe.running) ended(pe, status);
      }
    }
  }

  void ended(Pe& pe, int status) {
    pe.running = false;
    --running_;
    pe.status = status;
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && continue_on_loss_) {
      // Under SHMOE_PE_LOSS=continue a failed PE is lost, not the end of the job; once the
      // launcher stops the PEs itself (timeout, interrupt) their ends say nothing new.
      lost_.push_back(&pe);
      if (!kill_deadline_) {
        merger_.release(Clock::now(), true);
        say(loss_line(pe, running_));
      }
      return;
    }
    if (failed && !kill_deadline_ && !blame_at_) {
      // The others may be failing too, only because of this one or of another: give the
      // exits a moment to arrive before naming a culprit.
      blame_at_ = Clock::now() + std::chrono::milliseconds(300);
    }
  }

  // The culprit is named after the reports the PEs share (all of them, once every PE has ended
  // and its output is read).
  void blame_when_due() {
    if (!blame_at_ || kill_deadline_) return;
    if (!((Clock::now() >= *blame_at_ && !merger_.holding()) ||
          (running_ == 0 && !output_open()))) {
      return;
    }
    merger_.release(Clock::now(), true);
    const std::optional<HangVerdict> hung = explain_hang(*hang_);
    const Pe& failed = pick_culprit(pes_, first_lost_.load());
    stop_all(exit_code_of(failed.status), failure_line(pes_, failed, hung, running_));
  }

  void act_on_signals() {
    if (g_report_requested && !kill_deadline_) {
      g_report_requested = 0;
      merger_.release(Clock::now(), true);
      request_reports(*hang_, pes_);
    }
    if (g_interrupted && !kill_deadline_) {
      stop_all(130, fmt::format("interrupted by {}; stopping {}", ::strsignal(g_interrupted),
                                pe_count(running_)));
    }
  }

  void stop_on_timeout() {
    if (o_.job_timeout.count() > 0 && !kill_deadline_ && Clock::now() - start_ > o_.job_timeout) {
      stop_all(124, fmt::format("the job exceeded --timeout ({:.1f} s); stopping {}",
                                std::chrono::duration<double>(o_.job_timeout).count(),
                                pe_count(running_)));
    }
  }

  // A process the PEs left behind may hold their output open: it is not waited for long.
  void drop_orphaned_output() {
    if (running_ == 0 && output_open()) {
      if (!all_ended_at_) all_ended_at_ = Clock::now();
      if (Clock::now() - *all_ended_at_ > std::chrono::seconds(1)) close_relays(pes_, merger_);
    }
  }

  void kill_after_grace() {
    if (kill_deadline_ && Clock::now() > *kill_deadline_) {
      for (auto& pe : pes_) {
        if (pe.running) ::kill(pe.pid, SIGKILL);
      }
    }
  }

  void stop_all(int code, const std::string& why) {
    merger_.release(Clock::now(), true);
    if (!verdict_) {
      verdict_ = code;
      if (!why.empty()) say(why);
    }
    if (!kill_deadline_) {
      for (auto& pe : pes_) {
        if (pe.running) ::kill(pe.pid, SIGTERM);
      }
      kill_deadline_ = Clock::now() + o_.kill_grace;
    }
  }

  bool output_open() const {
    return std::any_of(pes_.begin(), pes_.end(),
                       [](const Pe& p) { return p.relays[0].fd >= 0 || p.relays[1].fd >= 0; });
  }

  // Names the lost PEs, and waits for the PEs of other hosts where they still need the store.
  int conclude() {
    merger_.release(Clock::now(), true);
    if (!lost_.empty()) {
      // The first PE to fail may have failed on a hang timeout: the verdict names whom it waited
      // on.
      if (!verdict_) explain_hang(*hang_);
      if (!verdict_ && only_deaths_lost(lost_, o_.n_pes)) {
        say(done_without_line(lost_, o_.n_pes));
      } else {
        say(lost_summary(lost_, o_.n_pes));
        // Otherwise the job's status is that of the first PE lost: a failure is never a success.
        if (!verdict_) verdict_ = exit_code_of(lost_.front()->status);
      }
    }
    sweep_segments(pes_);
    // PEs of other hosts may still use the store: for their finalize, or, when this group
    // failed, to learn of the failure from it (their monitors read the abort within
    // milliseconds).
    if (hosts_store_ && o_.job_size > o_.n_pes && !g_interrupted) {
      if (verdict_) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
      } else {
        verdict_ = wait_for_job_end(o_.store_address, std::chrono::seconds(60));
      }
    }
    return verdict_.value_or(0);
  }

  LaunchOptions o_;
  // SHMOE_PE_LOSS (a bad value is refused here, before any PE starts): with continue, a PE that
  // fails is lost and the others go on; the launcher names the lost PEs once the rest are done.
  const bool continue_on_loss_ = settings::pe_loss() == settings::PeLoss::kContinue;
  std::vector<const Pe*> lost_;  // in the order they ended
  // The first PE the store saw leave without finalizing: when several PEs fail at once (the
  // others stop because that one died), it is the one to name.
  std::atomic<int> first_lost_{-1};
  const bool hosts_store_ = o_.store_address.empty();
  std::optional<bootstrap::ConfigStoreServer> store_;
  std::optional<HangReports> hang_;
  std::vector<Pe> pes_;
  int running_ = 0;
  Clock::time_point start_;
  std::optional<int> verdict_;  // the launcher's exit status, once decided
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<Clock::time_point> blame_at_;      // when to name the failed PE
  std::optional<Clock::time_point> all_ended_at_;  // when the last PE ended
  // PEs' lines merged; a report held for identical ones goes out before the launcher's next line.
  OutputMerger merger_{o_.prefix_output, std::chrono::milliseconds(500), write_all};
};

}  // namespace

int run_store_only(const std::string& bind_host, std::uint16_t port, int job_size,
                   std::chrono::milliseconds timeout, std::chrono::milliseconds start_timeout) {
  bootstrap::ConfigStoreServer::Options store_options;
  store_options.bind_host = bind_host;
  store_options.port = port;
  store_options.job_size = job_size;
  store_options.job_key = use_job_key(true);
  // A PE that died before the job started leaves its shared-memory name: removed here for the
  // PEs of this host, as the PEs' own launcher would.
  store_options.on_pe_lost = [here = this_host_id()](const bootstrap::Hello& lost) {
    if (lost.host == here) heap::Segment::remove_name_of(lost.pid, lost.rank);
  };
  bootstrap::ConfigStoreServer store(store_options);
  store.start();
  install_handlers();
  // Listening on every interface, it names the address other hosts reach it by.
  const std::string shown =
      bind_host == "0.0.0.0" ? bootstrap::address_for_other_hosts() : bind_host;
  write_all(STDOUT_FILENO, fmt::format("{}: config store for {} listening on {}:{}\n", g_name,
                                       pe_count(job_size), shown, store.port()));
  return wait_for_job_end(local_store_address(bind_host, store.port()), timeout, job_size,
                          start_timeout);
}

int run_job(LaunchOptions o) {
  g_name = o.name;
  if (o.job_size == 0) o.job_size = o.n_pes;
  check_ranks(o);
  JobRun job(std::move(o));
  return job.run();
}

}  // namespace shmoe::tools
