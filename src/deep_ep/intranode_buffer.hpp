// The IntranodeBuffer (shmoe/deep_ep.h): DeepEP V1's normal mode over shmoe's MoE operators, one
// "expert" per rank. Its calls are call objects (intranode_dispatch.cpp, intranode_combine.cpp)
// of the ElasticBuffer's shape: check the arguments locally, let the operator's verdict (or an
// agreement, before the first operators exist) refuse or retry the call on every rank, move the
// rows, build DeepEP's outputs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deep_ep/result.hpp"
#include "shmoe/deep_ep.h"
#include "shmoe/moe.hpp"

namespace shmoe::deep_ep {

// What a dispatch's operators must hold: x's rows in 2-byte units, the experts, the top-k width
// and the tokens.
struct IntranodeShape {
  std::int64_t units = 0, experts = 0, topk = 0, tokens = 0;
};

// Header ints of a dispatch, before its tokens per expert: top-k width and num_worst_tokens.
constexpr std::size_t kIntranodeHeader = 2;

// The operators of one (row units, experts) at a token capacity and top-k: the bfloat16
// dispatch/combine operator (one expert per rank; each token's top-k indices and weights' bits
// as its side data, every rank's header ints), and the combine operators of other widths
// (bfloat16 rows of another hidden, float32 top-k weights), made at first use. Every rank holds
// the same plan: plans change only in IntranodeBuffer::replan, which is collective.
class IntranodePlan {
 public:
  IntranodePlan(int n, int capacity, const IntranodeShape& s, std::uint64_t epoch);
  IntranodePlan(const IntranodePlan&) = delete;
  IntranodePlan& operator=(const IntranodePlan&) = delete;
  ~IntranodePlan() { lender->retire(); }  // before x goes, retired or not
  bool fits(const IntranodeShape& s) const {
    return s.units == units && s.experts == experts && s.topk <= topk && s.tokens <= capacity;
  }
  // Collective at first use of a width: every rank combines alike.
  MoeBuffer& combine_buffer(int hidden);
  MoeBuffer& weights_buffer(int width);
  void abandon();
  // Collective, before the plan goes: if any rank's caller still holds a receive block, every
  // rank abandons the dispatch operator (its window stays allocated and mapped) instead of
  // freeing it.
  void retire();

  const int n, capacity;
  const std::int64_t units, experts, topk;
  const int side_width;  // int32 per token: its top-k indices, then its weights' bits
  const std::uint64_t epoch;
  std::unique_ptr<MoeBuffer> x;
  std::shared_ptr<BlockLender> lender;   // lends x's receive blocks (results with no copy)
  std::vector<float> ones;               // [capacity, n]: combine's weights
  std::vector<std::int32_t> no_side;     // [capacity, side_width]: a cached dispatch's
  std::vector<std::int32_t> no_ints;     // [header]: a cached dispatch's
  std::vector<std::int32_t> side, ints;  // this call's side data and header ints
  std::vector<std::int32_t> recv_side;   // [n * capacity, side_width]
  bool abandoned = false;

 private:
  MoeConfig config(int hidden, shmoe_dtype_t dtype, int side_bytes, int header_ints) const;
  std::map<int, std::unique_ptr<MoeBuffer>> wide_, weights_;
};

// What a dispatch keeps for combine and for a cached dispatch (its result's state).
struct IntranodeRouting {
  const void* buffer = nullptr;
  std::uint64_t epoch = 0;
  int tokens = 0, rows = 0, num_topk = 0;
  std::int64_t hidden = 0;                  // x's, in its dtype's elements
  std::vector<std::int32_t> routes;         // [tokens, n]: j where the token goes to rank j, or -1
  std::vector<std::int32_t> src_info;       // [capacity rows, 3]
  std::vector<std::int32_t> layout_prefix;  // [n]
};

class IntranodeBuffer {
 public:
  explicit IntranodeBuffer(const shmoe_intranode_buffer_config_t& config);
  IntranodeBuffer(const IntranodeBuffer&) = delete;
  IntranodeBuffer& operator=(const IntranodeBuffer&) = delete;
  ~IntranodeBuffer();  // collective unless abandoned

  void abandon();
  shmoe_ep_result* get_dispatch_layout(const shmoe_intranode_layout_args_t& args) const;
  shmoe_ep_result* dispatch(const shmoe_intranode_dispatch_args_t& args);
  shmoe_ep_result* combine(const shmoe_intranode_combine_args_t& args);

  int num_ranks() const { return n_; }
  int rank() const { return me_; }
  // DeepEP's RDMA ranks: the hosts, ranks host-major (host_layout).
  int num_hosts() const { return n_ / ranks_per_host_; }
  IntranodePlan* plan() const { return plan_.get(); }
  // Collective, every rank alike: agrees on the call's shape (or refuses it on every rank, with
  // this rank's `refusal`), and makes operators that hold every rank's tokens unless the current
  // ones do.
  IntranodePlan& replan(const char* call, const std::string& refusal, const IntranodeShape& s);
  // handle's routing when it is a dispatch's of this buffer's current operators, else nullptr
  // with the reason in *why.
  const IntranodeRouting* current(const shmoe_ep_result* handle, std::string* why) const;
  std::shared_ptr<std::byte[]> block(std::size_t bytes) { return memory_.take(bytes); }
  // Its dispatches' recv_x: in a receive block (no copy) or copied out.
  ResultCounts& counts() { return counts_; }

 private:
  int n_ = 0, me_ = 0, ranks_per_host_ = 1, first_capacity_ = 64;
  std::uint64_t epochs_ = 0;
  std::unique_ptr<IntranodePlan> plan_;
  ArrayMemory memory_;
  ResultCounts counts_;
};

}  // namespace shmoe::deep_ep
