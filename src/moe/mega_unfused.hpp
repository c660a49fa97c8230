// The unfused MegaMoE chain, the fused operator's reference: its own dispatch and combine
// operators and the intermediate tensors between its steps. It borrows the operator's weights,
// GEMM engine, workers and quantized-token buffer, and owns nothing the fused call uses.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "moe/mega_state.hpp"

namespace shmoe::moe {

class UnfusedChain {
 public:
  explicit UnfusedChain(const MegaMoE::State& s);  // collective: makes its two MoeBuffers
  ~UnfusedChain();                                 // collective
  void run(MegaMoE::State& s, const MegaMoEArgs& in);

 private:
  class Call;  // one run, a method per step (mega_unfused.cpp)
  std::unique_ptr<MoeBuffer> dispatch_, combine_;
  // Kept from call to call: only their first call allocates.
  std::vector<std::byte> rows_, act_;
  std::vector<std::int32_t> assist_, recv_count_, expert_nums_;
  std::vector<float> h_;
  std::vector<std::uint16_t> out_;
};

}  // namespace shmoe::moe
