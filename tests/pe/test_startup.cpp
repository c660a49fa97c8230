// What shmem_init leaves running in a PE, read from /proc as an outsider would: one connection to
// the config store (requests and the events it pushes share it) and one service thread, named,
// plus the store's own thread in the PE that hosts the store (started by mpirun or srun).
// Only UCX may add threads of its own.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pe_test.hpp"

namespace shmoe::test {
namespace {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  ::closedir(d);
  return names;
}

// How many threads of this process have each name.
std::map<std::string, int> thread_names() {
  std::map<std::string, int> names;
  for (const std::string& task : entries("/proc/self/task")) {
    std::ifstream comm("/proc/self/task/" + task + "/comm");
    std::string name;
    std::getline(comm, name);
    ++names[name];
  }
  return names;
}

struct TcpSocket {
  int local_port = 0;
  int remote_port = 0;
  bool listening = false;
};

// This process's TCP sockets, from its descriptors and the kernel's socket tables.
std::vector<TcpSocket> own_tcp_sockets() {
  std::map<std::string, TcpSocket> by_inode;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      auto port = [](const std::string& address) {
        return std::stoi(address.substr(address.rfind(':') + 1), nullptr, 16);
      };
      by_inode[inode] = {port(local), port(remote), state == "0A"};
    }
  }
  std::vector<TcpSocket> sockets;
  for (const std::string& fd : entries("/proc/self/fd")) {
    char target[256] = {};
    const std::string link = "/proc/self/fd/" + fd;
    if (::readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    const std::string text = target;
    if (text.rfind("socket:[", 0) != 0) continue;
    auto it = by_inode.find(text.substr(8, text.size() - 9));
    if (it != by_inode.end()) sockets.push_back(it->second);
  }
  return sockets;
}

int store_port() {
  const char* store = std::getenv("SHMOE_STORE");
  if (store == nullptr) return 0;
  const std::string text = store;
  return std::stoi(text.substr(text.rfind(':') + 1));
}

TEST(Startup, OneStoreConnectionPerPe) {
  const int port = store_port();
  ASSERT_GT(port, 0) << "SHMOE_STORE is not set";
  int connections = 0;
  for (const TcpSocket& s : own_tcp_sockets()) {
    if (!s.listening && s.remote_port == port) ++connections;
  }
  EXPECT_EQ(connections, 1) << "PE " << shmem_my_pe() << " holds " << connections
                            << " connections to the config store at port " << port;
  shmem_barrier_all();
}

TEST(Startup, OneServiceThreadPerPe) {
  const int port = store_port();
  bool hosts_store = false;
  for (const TcpSocket& s : own_tcp_sockets()) hosts_store |= s.listening && s.local_port == port;
  std::map<std::string, int> names = thread_names();
  EXPECT_EQ(names["shmoe-service"], 1);
  EXPECT_EQ(names["shmoe-store"], hosts_store ? 1 : 0);
  int shmoe_threads = 0;
  int total = 0;
  for (const auto& [name, count] : names) {
    total += count;
    if (name.rfind("shmoe-", 0) == 0) shmoe_threads += count;
  }
  EXPECT_EQ(shmoe_threads, hosts_store ? 2 : 1);
  // Over shared memory alone nothing else runs beside the program's own thread; UCX (forced,
  // or between hosts) starts threads of its own.
  const char* transport = std::getenv("SHMOE_TRANSPORT");
  const bool ucx = (transport != nullptr && std::string(transport) == "ucx") ||
                   std::getenv("SHMOE_HOST_ID") != nullptr;
  if (!ucx) {
    std::string listing;
    for (const auto& [name, count] : names) listing += " " + name + " x" + std::to_string(count);
    EXPECT_EQ(total, 1 + shmoe_threads) << "threads:" << listing;
  }
  shmem_barrier_all();
}

}  // namespace
}  // namespace shmoe::test
