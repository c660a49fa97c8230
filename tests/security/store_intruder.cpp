// A stranger's attempts on a running job's config store, speaking its wire protocol:
//   store_intruder HOST:PORT CASE
// prints one line and exits 0 when the store refused cleanly (a refusal, then the connection
// closed, nothing accepted), 1 when the store accepted something, 2 when it misbehaved (no
// answer, no close):
//   case=CASE outcome=refused ms=T reason="..."
// CASE is one of the stranger cases below (no key), or insider-flood, which proves the key from
// SHMOE_JOB_KEY and writes 60 MiB values until the store's total limit refuses one.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "bootstrap/config_store.hpp"
#include "bootstrap/store_auth.hpp"
#include "bootstrap/wire.hpp"

namespace {

using namespace shmoe::bootstrap;
using Clock = std::chrono::steady_clock;

struct Frame {
  std::uint8_t code = 0;
  std::string payload;
};

class Connection {
 public:
  explicit Connection(const StoreAddress& at) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &res) != 0) return;
    fd_ = ::socket(res->ai_family, SOCK_STREAM, 0);
    if (::connect(fd_, res->ai_addr, res->ai_addrlen) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    ::freeaddrinfo(res);
    timeval tv{5, 0};  // a store that neither answers nor closes is a finding, not a hang
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the store closed on us: what the reads will tell
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // One frame; nullopt on close or timeout.
  std::optional<Frame> receive() {
    std::string header(wire::kHeaderSize, '\0');
    if (!fill(header.data(), header.size())) return std::nullopt;
    wire::FrameHeader h =
        wire::parse_header(reinterpret_cast<const std::uint8_t*>(header.data()), 1u << 31);
    Frame f{h.code, std::string(h.length, '\0')};
    if (!fill(f.payload.data(), f.payload.size())) return std::nullopt;
    return f;
  }
  // Whether the store ends the connection (EOF or reset) within the receive timeout, reading
  // past anything else it sends.
  bool closed_by_store() {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool fill(char* p, std::size_t n) {
    while (n > 0) {
      ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  int fd_ = -1;
};

std::string reason_of(const Frame& f) {
  try {
    wire::Reader r(f.payload);
    return std::string(r.str());
  } catch (const wire::WireError&) {
    return "(no reason)";
  }
}

std::string frame(wire::Op op, const std::function<void(wire::Writer&)>& fields) {
  wire::Writer w(static_cast<std::uint8_t>(op));
  fields(w);
  return w.frame();
}

// A hello for `job_id`, signed with `key` when there is one, else with a mac of random bytes.
std::string hello(std::string_view nonce, PeerRole role, int rank, int size,
                  const std::string& job_id, const std::optional<JobKey>& key) {
  wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
  w.u16(wire::kProtocolVersion)
      .u8(static_cast<std::uint8_t>(role))
      .i32(rank)
      .i32(size)
      .i32(static_cast<std::int32_t>(::getpid()))
      .str("intruder")
      .str(job_id)
      .str(auth::random_bytes(auth::kNonceBytes));
  const std::string_view signed_fields = std::string_view(w.frame()).substr(wire::kHeaderSize);
  w.str(key ? auth::hello_mac(*key, nonce, signed_fields) : auth::random_bytes(auth::kMacBytes));
  return w.frame();
}

std::string old_hello(int rank, int size) {  // protocol version 1, as before job keys
  return frame(wire::Op::kHello, [&](wire::Writer& w) {
    w.u16(1).u8(static_cast<std::uint8_t>(PeerRole::kPe)).i32(rank).i32(size).i32(1).str("x");
  });
}

struct Outcome {
  std::string result;  // refused, ACCEPTED, error
  std::string detail;
};

// Connects, reads the challenge, sends what `attack` makes of the nonce, and judges the reply.
Outcome attempt(const StoreAddress& at, const std::function<std::string(std::string_view)>& attack,
                double* ms) {
  const auto t0 = Clock::now();
  Connection c(at);
  if (!c.ok()) return {"error", "cannot connect"};
  auto challenge = c.receive();
  if (!challenge || challenge->code != static_cast<std::uint8_t>(wire::Status::kChallenge)) {
    return {"error", "no challenge from the store"};
  }
  wire::Reader r(challenge->payload);
  r.u16();
  const std::string nonce(r.str());
  c.send(attack(nonce));
  auto reply = c.receive();
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!reply) return {"error", "the store neither answered nor closed"};
  const auto status = static_cast<wire::Status>(reply->code);
  if (status != wire::Status::kRefused && status != wire::Status::kBadRequest) {
    return {"ACCEPTED", "status " + std::to_string(reply->code)};
  }
  if (!c.closed_by_store()) return {"error", "refused, but the connection stayed open"};
  return {"refused", reason_of(*reply)};
}

// The store names the job it serves in its refusals: anyone can learn the (public) job id.
std::string learn_job_id(const StoreAddress& at) {
  double ms = 0;
  Outcome o = attempt(
      at,
      [](std::string_view n) {
        return hello(n, PeerRole::kTool, -1, 0, "000000000000", std::nullopt);
      },
      &ms);
  const std::string marker = "this config store serves job ";
  auto at_marker = o.detail.find(marker);
  if (at_marker == std::string::npos) return "unknown";
  return o.detail.substr(at_marker + marker.size(), 12);
}

// Requests before any hello, then the same with the job's real id and a forged proof: each must
// be refused.
std::map<std::string, std::function<std::string(std::string_view, const std::string&)>> cases() {
  return {
      {"read-before-hello",
       [](auto, auto&) {
         return frame(wire::Op::kGet, [](wire::Writer& w) { w.str("shmoe/ag/hosts/1").i64(0); });
       }},
      {"write-before-hello",
       [](auto, auto&) {
         return frame(wire::Op::kSet, [](wire::Writer& w) { w.str("intruder").str("x"); });
       }},
      {"abort-before-hello",
       [](auto, auto&) {
         return frame(wire::Op::kSet,
                      [](wire::Writer& w) { w.str(kAbortKey).str("intruder was here"); });
       }},
      {"status-before-hello",
       [](auto, auto&) { return frame(wire::Op::kStatus, [](wire::Writer&) {}); }},
      {"old-hello-bad-size", [](auto, auto&) { return old_hello(0, 999); }},
      {"old-hello-dup-rank", [](auto, auto&) { return old_hello(1, 4); }},
      {"forged-tool-read",
       [](std::string_view n, const std::string& job) {
         return hello(n, PeerRole::kTool, -1, 0, job, std::nullopt) +
                frame(wire::Op::kGet, [](wire::Writer& w) { w.str("shmoe/ag/hosts/1").i64(0); });
       }},
      {"forged-dup-rank-then-abort",
       [](std::string_view n, const std::string& job) {
         return hello(n, PeerRole::kPe, 1, 4, job, std::nullopt) +
                frame(wire::Op::kSet,
                      [](wire::Writer& w) { w.str(kAbortKey).str("intruder was here"); });
       }},
      {"forged-bad-size",
       [](std::string_view n, const std::string& job) {
         return hello(n, PeerRole::kPe, 0, 999, job, std::nullopt);
       }},
      {"other-job",
       [](std::string_view n, auto&) {
         JobKey other = JobKey::generate();
         return hello(n, PeerRole::kPe, 2, 4, other.job_id(), other);
       }},
      {"garbage", [](auto, auto&) { return std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"); }},
      {"huge-frame",
       [](auto, auto&) {
         std::string f = frame(wire::Op::kSet, [](wire::Writer&) {});
         f.replace(4, 4, "\x00\x00\xc0\x03", 4);  // 60 MiB promised, 4 KiB sent
         return f + std::string(4096, 'j');
       }},
  };
}

// With the key: 60 MiB values, ten times (more than the store's total limit); each refusal drops
// the connection, so the next attempt connects again.
int insider_flood(const StoreAddress& at) {
  auto key = JobKey::from_environment();
  if (!key) {
    std::printf("case=insider-flood outcome=error detail=\"SHMOE_JOB_KEY is not set\"\n");
    return 2;
  }
  const std::string value(60u << 20, 'f');
  int stored = 0;
  std::string refusal;
  for (int i = 0; i < 10; ++i) {
    try {
      ConfigStoreClient c(at, Hello{PeerRole::kTool, -1, 0, ::getpid(), "insider", *key},
                          std::chrono::seconds(5));
      c.set("flood/" + std::to_string(i), value);
      ++stored;
    } catch (const std::exception& e) {
      if (refusal.empty()) refusal = e.what();
    }
  }
  std::printf("case=insider-flood outcome=%s stored=%d reason=\"%s\"\n",
              refusal.empty() ? "ACCEPTED" : "refused", stored, refusal.c_str());
  return refusal.empty() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_intruder HOST:PORT CASE\n");
    return 2;
  }
  try {
    const StoreAddress at = StoreAddress::parse(argv[1]);
    const std::string name = argv[2];
    if (name == "insider-flood") return insider_flood(at);
    auto all = cases();
    auto it = all.find(name);
    if (it == all.end()) {
      std::fprintf(stderr, "store_intruder: unknown case '%s'; cases:", name.c_str());
      for (const auto& [n, f] : all) std::fprintf(stderr, " %s", n.c_str());
      std::fprintf(stderr, " insider-flood\n");
      return 2;
    }
    const std::string job = learn_job_id(at);
    double ms = 0;
    Outcome o = attempt(
        at, [&](std::string_view nonce) { return it->second(nonce, job); }, &ms);
    std::printf("case=%s outcome=%s ms=%.1f reason=\"%s\"\n", name.c_str(), o.result.c_str(), ms,
                o.detail.c_str());
    return o.result == "refused" ? 0 : o.result == "ACCEPTED" ? 1 : 2;
  } catch (const std::exception& e) {
    std::printf("case=%s outcome=error detail=\"%s\"\n", argv[2], e.what());
    return 2;
  }
}
