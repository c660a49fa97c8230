#include "bootstrap/reachable_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <climits>

#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  }
  return false;
}

bool resolves_beyond_loopback(const std::string& name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return false;
  bool beyond = false;
  for (addrinfo* a = found; a != nullptr && !beyond; a = a->ai_next) {
    beyond = (a->ai_family == AF_INET || a->ai_family == AF_INET6) && !is_loopback(a->ai_addr);
  }
  ::freeaddrinfo(found);
  return beyond;
}

std::string first_interface_address() {
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return {};
  std::string chosen;
  for (ifaddrs* i = interfaces; i != nullptr && chosen.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (is_loopback(i->ifa_addr)) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) != nullptr) chosen = text;
  }
  ::freeifaddrs(interfaces);
  return chosen;
}

}  // namespace

std::string address_for_other_hosts() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0' &&
      resolves_beyond_loopback(name)) {
    return name;
  }
  std::string address = first_interface_address();
  if (address.empty()) {
    throw make_error(
        "host '{}' has no address that other hosts can reach: its name resolves only to "
        "loopback and no interface other than loopback is up",
        name);
  }
  return address;
}

}  // namespace shmoe::bootstrap
