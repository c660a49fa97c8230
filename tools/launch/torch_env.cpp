#include "torch_env.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "common/env.hpp"

namespace shmoe::tools {
namespace {

// A loopback port no one listens on now (torchrun's --standalone picks its port the same way).
std::string free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed while picking MASTER_PORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("no free loopback port for MASTER_PORT");
  return std::to_string(ntohs(a.sin_port));
}

}  // namespace

TorchRendezvous torch_rendezvous(bool whole_job) {
  const auto addr = env::get("MASTER_ADDR"), port = env::get("MASTER_PORT");
  if (addr && !addr->empty() && port && !port->empty()) return {*addr, *port};
  if (!whole_job) return {};
  return {"127.0.0.1", free_loopback_port()};
}

void set_torch_env(int rank, int job_size, int local_rank, int local_size,
                   const TorchRendezvous& rendezvous) {
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(job_size).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(local_size).c_str(), 1);
  if (!rendezvous.addr.empty()) {
    ::setenv("MASTER_ADDR", rendezvous.addr.c_str(), 1);
    ::setenv("MASTER_PORT", rendezvous.port.c_str(), 1);
  }
}

}  // namespace shmoe::tools
