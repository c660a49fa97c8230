// The argument checks of the ElasticBuffer's calls: the first thing wrong with a call, as the
// message every PE raises (the call's agreement carries it), naming the argument, what was
// passed and what is allowed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "shmoe/elastic.h"

namespace shmoe::deep_ep {

// A dimension a tensor must have: exactly `size`, at least `size` (at_least), or any (kAny).
struct Dim {
  static constexpr std::int64_t kAny = -1;
  std::int64_t size = kAny;
  bool at_least = false;
};

std::string dtype_name(shmoe_dtype_t t);
std::string shape_text(const shmoe_tensor_t& t);

// Ranks per host: the PEs this PE shares memory with, when every host holds that many,
// host-major (PE p on host p / ranks_per_host); otherwise every rank counts as its own host.
// Both runtimes' layouts (DeepEP's RDMA ranks are the hosts) use it.
int host_layout(int n, int me);

class Checks {
 public:
  explicit Checks(std::string call) : call_(std::move(call)) {}
  bool any() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  void refuse(const std::string& why) {
    if (why_.empty()) why_ = call_ + ": " + why;
  }
  bool given(const shmoe_tensor_t& t) const { return t.data != nullptr; }
  // Refuses `t` (named `name`) unless it is given, of one of `dtypes`, with `dims`.
  bool tensor(const shmoe_tensor_t& t, const char* name,
              std::initializer_list<shmoe_dtype_t> dtypes, std::initializer_list<Dim> dims);
  // Refuses name=v unless low <= v (<= high when high >= low).
  bool range(const char* name, std::int64_t v, std::int64_t low, std::int64_t high = -1);

 private:
  std::string call_;
  std::string why_;
};

}  // namespace shmoe::deep_ep
