// The config store's watch over the job, apart from its key-value service: which ranks said hello
// and goodbye, which connection speaks for each rank, and what a PE's arrival, goodbye or silent
// disappearance means for the job. It knows no sockets and no keys: the server
// (config_store_server.cpp) tells it what happened on its connections and publishes what it
// answers (kAbortKey, kFinalizedKey, and under SHMOE_PE_LOSS=continue kLostKey).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bootstrap/config_store.hpp"

namespace shmoe::bootstrap {

// "PE 3 (pid 1234 on node7)".
std::string describe_pe(const Hello& h);

class JobLiveness {
 public:
  // What a PE's connection closing means for the job.
  struct Closing {
    std::optional<std::string> abort;  // the job's abort message
    // SHMOE_PE_LOSS=continue: the PE is lost, and this says which one and how it ended.
    std::optional<std::string> lost;
    bool finalized = false;  // with this loss every rank of the job has departed or been lost
  };

  // job_size 0: learnt from the first PE's hello (launchers that know it pass it).
  // `continue_on_loss`: SHMOE_PE_LOSS=continue (a PE that closes without goodbye is lost, and the
  // job goes on) rather than abort.
  explicit JobLiveness(std::int32_t job_size, bool continue_on_loss = false);

  // The proven hello of PE `h` on connection `conn`. Empty: admitted. Otherwise why the job
  // cannot run (a bad size or rank, a size that contradicts an earlier one, a rank claimed
  // twice): the server refuses the PE and ends the job with this message.
  std::string admit(const Hello& h, std::uint64_t conn);
  // PE `rank` said goodbye. True when it is the last of the job's ranks to go (lost ranks
  // count as gone: the survivors' goodbyes must not wait for them).
  bool depart(std::int32_t rank);
  // The connection `conn` of the admitted PE `h` closed; `said_bye` whether it had said goodbye.
  // Unless it had, the message (`why` when the server cut it off, else that it exited or was
  // killed) is the job's abort, or with continue_on_loss the line that says the PE is lost.
  Closing closed(const Hello& h, std::uint64_t conn, bool said_bye, const std::string& why);
  // The lost ranks in the order they were lost, as a comma list ("2,5"); empty when none.
  std::string lost_list() const;
  std::size_t lost_count() const { return lost_order_.size(); }

  // Until every rank of the job said hello.
  bool still_starting() const;
  bool continues_on_loss() const { return continue_on_loss_; }
  std::int32_t size() const { return size_; }
  std::size_t arrived_count() const { return arrived_.size(); }
  JobStatus status(std::string store_trouble) const;

 private:
  std::int32_t size_;
  std::string size_source_;  // who said how large the job is, for a contradiction's message
  std::set<std::int32_t> arrived_;
  std::set<std::int32_t> departed_;
  bool continue_on_loss_;
  std::set<std::int32_t> lost_;
  std::vector<std::int32_t> lost_order_;
  struct LivePe {
    std::uint64_t conn;
    Hello hello;
  };
  std::unordered_map<std::int32_t, LivePe> live_;

  bool all_gone() const;
};

}  // namespace shmoe::bootstrap
