// The config store's watch over the job, apart from its key-value service: which ranks said hello
// and goodbye, which connection speaks for each rank, and what a PE's arrival, goodbye or silent
// disappearance means for the job. It knows no sockets and no keys: the server
// (config_store_server.cpp) tells it what happened on its connections and publishes what it
// answers (kAbortKey, kFinalizedKey).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "bootstrap/config_store.hpp"

namespace shmoe::bootstrap {

// "PE 3 (pid 1234 on node7)".
std::string describe_pe(const Hello& h);

class JobLiveness {
 public:
  // job_size 0: learnt from the first PE's hello (launchers that know it pass it).
  explicit JobLiveness(std::int32_t job_size);

  // The proven hello of PE `h` on connection `conn`. Empty: admitted. Otherwise why the job
  // cannot run (a bad size or rank, a size that contradicts an earlier one, a rank claimed
  // twice): the server refuses the PE and ends the job with this message.
  std::string admit(const Hello& h, std::uint64_t conn);
  // PE `rank` said goodbye. True when it is the last of the job's ranks to do so.
  bool depart(std::int32_t rank);
  // The connection `conn` of the admitted PE `h` closed; `said_bye` whether it had said goodbye.
  // Unless it had, the job's abort message: `why` when the server cut it off, else that it
  // exited or was killed.
  std::optional<std::string> closed(const Hello& h, std::uint64_t conn, bool said_bye,
                                    const std::string& why);

  // Until every rank of the job said hello.
  bool still_starting() const;
  std::int32_t size() const { return size_; }
  std::size_t arrived_count() const { return arrived_.size(); }
  JobStatus status(std::string store_trouble) const;

 private:
  std::int32_t size_;
  std::string size_source_;  // who said how large the job is, for a contradiction's message
  std::set<std::int32_t> arrived_;
  std::set<std::int32_t> departed_;
  struct LivePe {
    std::uint64_t conn;
    Hello hello;
  };
  std::unordered_map<std::int32_t, LivePe> live_;
};

}  // namespace shmoe::bootstrap
