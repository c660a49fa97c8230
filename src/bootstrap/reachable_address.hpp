// The address by which other hosts reach a service of this host that listens on every interface.
#pragma once

#include <string>

namespace shmoe::bootstrap {

// This host's name when it resolves to an address other than loopback (what a cluster's name
// service is for); otherwise the first IPv4 address of an interface that is up and not loopback
// (Debian maps the host name to 127.0.1.1 unless the network configuration says otherwise).
// Throws shmoe::Error when this host has no such address.
std::string address_for_other_hosts();

}  // namespace shmoe::bootstrap
