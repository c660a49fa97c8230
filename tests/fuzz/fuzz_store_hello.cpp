// Fuzzes the config store's authenticated hello and what follows it, against a real server
// (its service thread, a loopback connection) with small limits.
// Input: [flags][rank i32][size i32][host length][host][frames...]
//   flags bit 0: sign the hello with the job's key (else send a mac of zeros)
//         bit 1: claim the job's id (else another job's)
//         bits 2-3: the role (0 is not a role)
// The harness answers the server's challenge with that hello, then sends the frames as they are.
// Findings, besides crashes and sanitizer reports:
//  * a connection whose hello did not prove the key changed the store (any key, an abort);
//  * the store held more than its total limit (plus room for its own abort message);
//  * the server neither answered nor closed within 5 s.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "bootstrap/config_store.hpp"
#include "bootstrap/store_auth.hpp"
#include "bootstrap/wire.hpp"

namespace bs = shmoe::bootstrap;
namespace wire = shmoe::bootstrap::wire;

namespace {

const bs::JobKey& job_key() {
  static const bs::JobKey key = bs::JobKey::parse("fuzz-store-hello-job-key-0123456789", "key");
  return key;
}

bs::StoreLimits limits() {
  bs::StoreLimits l;
  l.max_value = 4096;
  l.max_total = 32u << 10;
  return l;
}

// The server's own keys (the abort message, which quotes the hello's host of at most 255
// bytes, and the finalized flag) come on top of what clients may store.
constexpr std::size_t kServerMessageRoom = 2048;

struct Input {
  std::uint8_t flags = 0;
  std::int32_t rank = 0;
  std::int32_t size = 0;
  std::string host;
  std::string_view frames;
};

Input parse(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Input out;
  auto take = [&](std::size_t n) {
    std::string_view t = in.substr(0, std::min(n, in.size()));
    in.remove_prefix(t.size());
    return t;
  };
  auto i32 = [&] {
    std::string_view t = take(4);
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < t.size(); ++i) v |= std::uint32_t(std::uint8_t(t[i])) << (8 * i);
    return static_cast<std::int32_t>(v);
  };
  std::string_view f = take(1);
  out.flags = f.empty() ? 0 : static_cast<std::uint8_t>(f[0]);
  out.rank = i32();
  out.size = i32();
  std::string_view n = take(1);
  out.host = std::string(take(n.empty() ? 0 : static_cast<std::uint8_t>(n[0])));
  out.frames = in;
  return out;
}

// libFuzzer's -timeout interrupts system calls with SIGALRM: every call here resumes.
ssize_t recv_some(int fd, char* p, std::size_t n) {
  ssize_t got;
  do {
    got = ::recv(fd, p, n, 0);
  } while (got < 0 && errno == EINTR);
  return got;
}

bool read_exact(int fd, char* p, std::size_t n) {
  while (n > 0) {
    ssize_t got = recv_some(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

std::string hello(const Input& in, std::string_view nonce) {
  const bool signed_right = in.flags & 1;
  const bool our_job = in.flags & 2;
  wire::Writer w(static_cast<std::uint8_t>(wire::Op::kHello));
  w.u16(wire::kProtocolVersion)
      .u8(static_cast<std::uint8_t>((in.flags >> 2) & 3))
      .i32(in.rank)
      .i32(in.size)
      .i32(4242)
      .str(in.host)
      .str(our_job ? job_key().job_id() : std::string("0123456789ab"))
      .str(std::string(bs::auth::kNonceBytes, 'c'));
  const std::string_view signed_fields = std::string_view(w.frame()).substr(wire::kHeaderSize);
  w.str(signed_right ? bs::auth::hello_mac(job_key(), nonce, signed_fields)
                     : std::string(bs::auth::kMacBytes, '\0'));
  return w.frame();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Input in = parse(data, size);
  const std::uint8_t role = (in.flags >> 2) & 3;
  const bool proves_key = (in.flags & 1) && (in.flags & 2) && role >= 1;

  bs::ConfigStoreServer::Options o;
  o.job_size = 4;
  o.job_key = job_key();
  o.limits = limits();
  bs::ConfigStoreServer server(o);
  server.start();

  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(server.port());
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) std::abort();
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  std::string header(wire::kHeaderSize, '\0');
  if (!read_exact(fd, header.data(), header.size())) std::abort();  // no challenge
  wire::FrameHeader h =
      wire::parse_header(reinterpret_cast<const std::uint8_t*>(header.data()), 1 << 16);
  std::string payload(h.length, '\0');
  if (!read_exact(fd, payload.data(), payload.size())) std::abort();
  wire::Reader challenge(payload);
  challenge.u16();
  const std::string nonce(challenge.str());

  std::string out = hello(in, nonce);
  out.append(in.frames);
  for (std::string_view rest = out; !rest.empty();) {
    ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed: it refused
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  ::shutdown(fd, SHUT_WR);
  // Everything the server answers, up to its close; a server that does neither hangs.
  for (char buf[65536];;) {
    ssize_t n = recv_some(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) break;
    if (n < 0) std::abort();
  }
  ::close(fd);
  server.stop();

  const bs::StoreUsage usage = server.usage();
  if (!proves_key && (usage.keys != 0 || usage.stored_bytes != 0)) std::abort();
  if (usage.stored_bytes > limits().max_total + kServerMessageRoom) std::abort();
  return 0;
}
