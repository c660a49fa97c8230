// The config store's handshake, a challenge-response over the job key:
//   server -> client  CHALLENGE  version, server nonce (fresh random bytes per connection)
//   client -> server  HELLO      version, role, rank, size, pid, host, job id, client nonce,
//                                mac = HMAC-SHA256(key, label | server nonce | the fields before)
//   server -> client  OK         proof = HMAC-SHA256(key, label' | mac)   (or REFUSED, reason)
// The key itself never travels. A recorded hello does not open another connection, whose server
// nonce differs; a hello whose fields were changed fails its mac. The server's proof lets the
// client tell its own job's store from another job's (or from any other listener), so that no
// process of another job can feed a PE segment names, addresses or UCX keys.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "bootstrap/job_key.hpp"

namespace shmoe::bootstrap::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;  // SHA-256

// `n` bytes from the kernel's random source; throws shmoe::Error when it has none.
std::string random_bytes(std::size_t n);

// The client's mac over the server's nonce and the hello fields it signs (the hello payload up
// to, not including, the mac).
std::string hello_mac(const JobKey& key, std::string_view server_nonce,
                      std::string_view signed_fields);

// The server's answer to an accepted hello: proves that the store knows the key too.
std::string store_proof(const JobKey& key, std::string_view client_mac);

// Compares two macs in time that does not depend on where they differ.
bool macs_equal(std::string_view a, std::string_view b);

// HMAC-SHA256(key, message): the primitive the three above and JobKey::job_id are built on.
std::string hmac_sha256(std::string_view key, std::string_view message);

}  // namespace shmoe::bootstrap::auth
