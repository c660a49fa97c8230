// What UCX does with operations to a peer stopped by SIGSTOP, and with its late answers once it
// resumes: the facts a design for shrink mode's stopped PE across hosts rests on (docs/moe.md,
// "a PE stopped on another host"). Two processes, A and B, over plain UCX (no shmoe); B is
// stopped while A's operation to it is outstanding; then, for get, put and amo, A force-closes
// its endpoint (UCP_EP_CLOSE_FLAG_FORCE), B resumes, and the program reports whether the late
// answer still lands in A's memory, whether B's own old endpoint to A still works, and whether a
// new endpoint does. For flag, B resumes with A's puts sitting unread in its socket, and reports
// what its memory holds before and while its worker progresses.
//
//   UCX_TLS=tcp,self build/bench/ucx_stopped_peer get|put|amo|flag none|peer [KIB]
//
// none|peer: the endpoints' error-handling mode (shmoe's are none); KIB: the size of a get or put
// (256 unless given). Results of 2026-12-06:
// docs/performance/2026-12-06-ucx-stopped-peer.md.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
std::size_t kZone = 256 * 1024;  // each of the buffer's four zones (KIB, the third argument)
constexpr int kFlags = 16;
bool peer_mode = false;
const char* me = "A";

void check(ucs_status_t s, const char* what) {
  if (s == UCS_OK) return;
  std::fprintf(stderr, "%s: %s: %s\n", me, what, ucs_status_string(s));
  std::exit(2);
}

// One side: a worker, and a buffer of four zones mapped for the other's RMA: 0 its own bytes
// ('A' or 'B'), 1 where a get lands (A) or a put lands (B), 2 flags, 3 atomics and late puts.
struct Side {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::vector<char> buffer = std::vector<char>(4 * kZone);
  std::string address, rkey;
  char* zone(int z) { return buffer.data() + static_cast<std::size_t>(z) * kZone; }
};

void set_up(Side& s, char mine) {
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
  check(ucp_init(&p, nullptr, &s.context), "ucp_init");
  ucp_worker_params_t wp{};
  check(ucp_worker_create(s.context, &wp, &s.worker), "ucp_worker_create");
  ucp_address_t* a = nullptr;
  std::size_t length = 0;
  check(ucp_worker_get_address(s.worker, &a, &length), "ucp_worker_get_address");
  s.address.assign(reinterpret_cast<const char*>(a), length);
  ucp_worker_release_address(s.worker, a);
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = s.buffer.data();
  mp.length = s.buffer.size();
  ucp_mem_h mem = nullptr;
  check(ucp_mem_map(s.context, &mp, &mem), "ucp_mem_map");
  void* packed = nullptr;
  check(ucp_rkey_pack(s.context, mem, &packed, &length), "ucp_rkey_pack");
  s.rkey.assign(static_cast<const char*>(packed), length);
  ucp_rkey_buffer_release(packed);
  std::memset(s.zone(0), mine, kZone);
  std::memset(s.zone(1), mine + ('a' - 'A'), kZone);
}

void send_text(int fd, const std::string& t) {
  const auto n = static_cast<std::uint32_t>(t.size());
  if (write(fd, &n, 4) != 4 || write(fd, t.data(), n) != static_cast<ssize_t>(n)) std::exit(3);
}

std::string receive_text(int fd) {
  std::uint32_t n = 0;
  if (read(fd, &n, 4) != 4) std::exit(3);
  std::string t(n, '\0');
  for (std::size_t got = 0; got < n;) {
    const ssize_t r = read(fd, &t[got], n - got);
    if (r <= 0) std::exit(3);
    got += static_cast<std::size_t>(r);
  }
  return t;
}

// What each side tells the other: worker address, rkey, buffer address.
void send_side(int fd, Side& s) {
  send_text(fd, s.address);
  send_text(fd, s.rkey);
  send_text(fd, std::to_string(reinterpret_cast<std::uintptr_t>(s.buffer.data())));
}

struct Remote {
  std::string address, rkey;
  std::uint64_t base = 0;
};

Remote receive_side(int fd) {
  Remote r;
  r.address = receive_text(fd);
  r.rkey = receive_text(fd);
  r.base = std::stoull(receive_text(fd));
  return r;
}

void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  std::printf("%s: endpoint error callback: %s\n", static_cast<const char*>(arg),
              ucs_status_string(status));
}

struct Connection {
  ucp_ep_h ep = nullptr;
  ucp_rkey_h rkey = nullptr;
  std::uint64_t base = 0;
};

Connection connect_to(Side& s, const Remote& r) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  p.address = reinterpret_cast<const ucp_address_t*>(r.address.data());
  if (peer_mode) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = on_error;
    p.err_handler.arg = const_cast<char*>(me);
  }
  Connection c;
  c.base = r.base;
  check(ucp_ep_create(s.worker, &p, &c.ep), "ucp_ep_create");
  check(ucp_ep_rkey_unpack(c.ep, r.rkey.data(), &c.rkey), "ucp_ep_rkey_unpack");
  return c;
}

// Waits up to `seconds`; a request still in progress then is returned as is (not freed).
ucs_status_t wait_for(Side& s, ucs_status_ptr_t r, double seconds) {
  if (r == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
  const auto give_up = Clock::now() + std::chrono::duration<double>(seconds);
  while (ucp_request_check_status(r) == UCS_INPROGRESS) {
    ucp_worker_progress(s.worker);
    if (Clock::now() >= give_up) return UCS_INPROGRESS;
  }
  const ucs_status_t status = ucp_request_check_status(r);
  ucp_request_free(r);
  return status;
}

void progress_for(Side& s, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    ucp_worker_progress(s.worker);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

int count(const char* p, std::size_t n, char c) {
  int k = 0;
  for (std::size_t i = 0; i < n; ++i) k += p[i] == c;
  return k;
}

int flags_seen(Side& s) {
  int k = 0;
  for (int i = 0; i < kFlags; ++i) {
    k += reinterpret_cast<volatile std::uint64_t*>(s.zone(2))[i] ==
         static_cast<std::uint64_t>(i + 1);
  }
  return k;
}

// B, just resumed: how many of A's flags its memory holds before its worker progresses, at the
// first progress call that finds nothing to do, and 0.3 s later.
void report_resume(Side& s) {
  const int before = flags_seen(s);
  int first_idle = -1, data_at_first_idle = -1, calls = 0;
  for (int idle = 0; idle < 3 && calls < 100000; ++calls) {
    if (ucp_worker_progress(s.worker) != 0) {
      idle = 0;
    } else {
      if (first_idle < 0) {
        first_idle = flags_seen(s);
        data_at_first_idle = count(s.zone(1), kZone, 'A');
      }
      ++idle;
    }
  }
  std::printf(
      "B: resumed: %d of %d flags before progress; at the first idle progress (%d calls) %d flags "
      "and %d of %zu data bytes\n",
      before, kFlags, calls, first_idle, data_at_first_idle, kZone);
  progress_for(s, 0.3);
  std::printf("B: 0.3 s later: %d of %d flags\n", flags_seen(s), kFlags);
}

// B on A's word 'p': a put to A on the endpoint B made before it was stopped, and its flush.
void put_on_old_endpoint(Side& s, Connection& a) {
  ucp_request_param_t p{};
  const ucs_status_t put =
      wait_for(s, ucp_put_nbx(a.ep, s.zone(0), 4096, a.base + 3 * kZone, a.rkey, &p), 3);
  const ucs_status_t flush = wait_for(s, ucp_ep_flush_nbx(a.ep, &p), 3);
  std::printf("B: put and flush to A on its old endpoint: %s, %s (3 s at most)\n",
              ucs_status_string(put), ucs_status_string(flush));
}

int run_b(int fd) {
  me = "B";
  Side s;
  set_up(s, 'B');
  send_side(fd, s);
  Connection a = connect_to(s, receive_side(fd));
  bool flag_case = receive_text(fd) == "flag";
  int applied = 0;
  for (auto last = Clock::now();;) {
    const auto now = Clock::now();
    if (flag_case && now - last > std::chrono::milliseconds(50)) {
      report_resume(s);  // a gap between two turns of this loop: it was stopped
      flag_case = false;
    }
    last = now;
    ucp_worker_progress(s.worker);
    if (const int holds = count(s.zone(1), kZone, 'A'); holds != applied) {
      std::printf("B: its put zone now holds %d bytes from A\n", holds);
      applied = holds;
    }
    char c = 0;
    if (recv(fd, &c, 1, MSG_DONTWAIT) == 1) {
      if (c == 'q') return 0;
      put_on_old_endpoint(s, a);
      if (write(fd, &c, 1) != 1) return 3;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A's operation to the stopped B; a put or the flags are followed by a flush, which stays
// outstanding.
ucs_status_ptr_t post(Side& s, Connection& b, const std::string& what) {
  ucp_request_param_t p{};
  if (what == "get") return ucp_get_nbx(b.ep, s.zone(1), kZone, b.base, b.rkey, &p);
  if (what == "amo") {
    static std::uint64_t one = 1, old = 0;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    p.datatype = ucp_dt_make_contig(8);
    p.reply_buffer = &old;
    return ucp_atomic_op_nbx(b.ep, UCP_ATOMIC_OP_SWAP, &one, 1, b.base + 3 * kZone, b.rkey, &p);
  }
  ucs_status_t local =
      wait_for(s, ucp_put_nbx(b.ep, s.zone(0), kZone, b.base + kZone, b.rkey, &p), 5);
  static std::uint64_t values[kFlags];
  for (int i = 0; what == "flag" && i < kFlags; ++i) {
    values[i] = static_cast<std::uint64_t>(i + 1);
    const std::uint64_t at = b.base + 2 * kZone + 8 * static_cast<std::uint64_t>(i);
    if (const ucs_status_t f = wait_for(s, ucp_put_nbx(b.ep, &values[i], 8, at, b.rkey, &p), 5);
        f != UCS_OK)
      local = f;
  }
  std::printf("A: puts' local completion: %s\n", ucs_status_string(local));
  return ucp_ep_flush_nbx(b.ep, &p);
}

// After the force close: what lands once B resumes, then a new endpoint's get, put and flush.
void after_close(Side& s, pid_t b, const Remote& rb, ucs_status_ptr_t outstanding) {
  std::memset(s.zone(1), 'a', kZone);  // a late get reply shows here
  kill(b, SIGCONT);
  progress_for(s, 1.5);
  if (outstanding != nullptr) {
    std::printf("A: the outstanding operation 1.5 s after B resumed: %s\n",
                ucs_status_string(ucp_request_check_status(outstanding)));
  }
  std::printf("A: 1.5 s after B resumed, %d of %zu bytes of B's late get reply landed\n",
              count(s.zone(1), kZone, 'B'), kZone);
  Connection fresh = connect_to(s, rb);
  ucp_request_param_t p{};
  std::memset(s.zone(2), 'z', 4096);
  const ucs_status_t get =
      wait_for(s, ucp_get_nbx(fresh.ep, s.zone(2), 4096, fresh.base, fresh.rkey, &p), 5);
  const ucs_status_t put =
      wait_for(s, ucp_put_nbx(fresh.ep, s.zone(0), 4096, fresh.base + kZone, fresh.rkey, &p), 5);
  const ucs_status_t flush = wait_for(s, ucp_ep_flush_nbx(fresh.ep, &p), 5);
  std::printf("A: new endpoint: get %s (%d of 4096 bytes from B), put %s, flush %s\n",
              ucs_status_string(get), count(s.zone(2), 4096, 'B'), ucs_status_string(put),
              ucs_status_string(flush));
}

void force_close(Side& s, Connection& b, ucs_status_ptr_t outstanding) {
  ucp_rkey_destroy(b.rkey);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  std::printf("A: force close: %s\n",
              ucs_status_string(wait_for(s, ucp_ep_close_nbx(b.ep, &p), 5)));
  if (outstanding != nullptr) {
    std::printf("A: the outstanding operation just after the close: %s\n",
                ucs_status_string(ucp_request_check_status(outstanding)));
  }
}

// A's side of one case; B is the child `b`, reached through `fd`.
int run_a(const std::string& what, pid_t b, int fd) {
  Side s;
  set_up(s, 'A');
  const Remote rb = receive_side(fd);
  send_side(fd, s);
  send_text(fd, what);
  Connection cb = connect_to(s, rb);
  char warm[64];
  ucp_request_param_t p{};
  check(wait_for(s, ucp_get_nbx(cb.ep, warm, sizeof warm, cb.base, cb.rkey, &p), 5), "warm-up get");
  kill(b, SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const ucs_status_ptr_t r = post(s, cb, what);
  const ucs_status_t status = wait_for(s, r, 0.5);
  std::printf("A: %s to the stopped B, 0.5 s later: %s\n", what.c_str(), ucs_status_string(status));
  const ucs_status_ptr_t outstanding = status == UCS_INPROGRESS ? r : nullptr;
  if (what == "flag") {
    kill(b, SIGCONT);
    std::printf("A: its flush once B resumed: %s\n", ucs_status_string(wait_for(s, r, 5)));
    progress_for(s, 0.5);
  } else {
    force_close(s, cb, outstanding);
    after_close(s, b, rb, outstanding);
    char c = 'p';
    if (write(fd, &c, 1) != 1) return 3;
    while (recv(fd, &c, 1, MSG_DONTWAIT) != 1) ucp_worker_progress(s.worker);
    progress_for(s, 0.2);
    std::printf("A: %d of 4096 bytes of B's put on its old endpoint landed\n",
                count(s.zone(3), 4096, 'B'));
  }
  const char quit = 'q';
  if (write(fd, &quit, 1) != 1) return 3;
  int wstatus = 0;
  waitpid(b, &wstatus, 0);
  std::printf("A: B ended with %s %d\n", WIFEXITED(wstatus) ? "status" : "signal",
              WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 2 ? argv[1] : "", mode = argc > 2 ? argv[2] : "";
  if ((what != "get" && what != "put" && what != "amo" && what != "flag") ||
      (mode != "none" && mode != "peer")) {
    std::fprintf(stderr, "usage: ucx_stopped_peer get|put|amo|flag none|peer [KIB]\n");
    return 1;
  }
  peer_mode = mode == "peer";
  if (argc > 3) kZone = std::strtoul(argv[3], nullptr, 10) * 1024;
  if (kZone < 4096) {
    std::fprintf(stderr, "ucx_stopped_peer: KIB is %zu, at least 4\n", kZone / 1024);
    return 1;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 3;
  const pid_t b = fork();
  if (b == 0) {
    close(fds[0]);
    return run_b(fds[1]);
  }
  close(fds[1]);
  return run_a(what, b, fds[0]);
}
