#include "bootstrap/store_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace shmoe::bootstrap::auth {
namespace {

// Labels keep a mac made for one purpose from being accepted for another.
constexpr std::string_view kHelloLabel = "shmoe config store hello v2";
constexpr std::string_view kProofLabel = "shmoe config store proof v2";

std::string concat(std::string_view a, std::string_view b, std::string_view c = {}) {
  std::string out;
  out.reserve(a.size() + b.size() + c.size());
  out.append(a).append(b).append(c);
  return out;
}

}  // namespace

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw make_error("cannot read random bytes from the kernel (getrandom): {}",
                       std::strerror(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (::HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
             &length) == nullptr ||
      length != kMacBytes) {
    throw Error("HMAC-SHA256 failed in libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(mac), length);
}

std::string hello_mac(const JobKey& key, std::string_view server_nonce,
                      std::string_view signed_fields) {
  return hmac_sha256(key.text(), concat(kHelloLabel, server_nonce, signed_fields));
}

std::string store_proof(const JobKey& key, std::string_view client_mac) {
  return hmac_sha256(key.text(), concat(kProofLabel, client_mac));
}

bool macs_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace shmoe::bootstrap::auth
