// IntranodeBuffer::combine as a call object: check, then the operator's combine of x (and of the
// top-k weights) with weight 1 for every (token, rank), each call telling every rank each one's
// verdict before a row moves.
#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "deep_ep/checks.hpp"
#include "deep_ep/intranode_buffer.hpp"
#include "moe/moe.hpp"
#include "numeric/half.hpp"

namespace shmoe::deep_ep {
namespace {

constexpr const char* kCall = "deep_ep.Buffer.combine";

class IntranodeCombine {
 public:
  IntranodeCombine(IntranodeBuffer& b, const shmoe_intranode_combine_args_t& a)
      : b_(b), a_(a), checks_(kCall) {}

  shmoe_ep_result* operator()() {
    check();
    IntranodePlan* p = b_.plan();
    if (checks_.any()) refuse(p);
    // The operator tells every rank whether each passed weights (caller_mode), so no rank goes
    // on to the weights' combine alone.
    const int mode = checks_.given(a_.topk_weights) ? 1 : 0;
    MoeBuffer& op = p->combine_buffer(static_cast<int>(h_->hidden));
    const std::int64_t tokens = h_->tokens, hidden = h_->hidden;
    if (checks_.given(a_.bias0) || checks_.given(a_.bias1)) {
      std::vector<float> sums(static_cast<std::size_t>(tokens * hidden));
      reduce(*p, op, a_.x.data, sums.data(), true, mode);
      add_biases(sums);
    } else {
      auto block = b_.block(static_cast<std::size_t>(tokens * hidden) * 2);  // reused
      result_->add_over("combined_x", SHMOE_DTYPE_BFLOAT16, {tokens, hidden}, block, block.get());
      reduce(*p, op, a_.x.data, block.get(), false, mode);
    }
    if (mode) {
      const int K = h_->num_topk;
      void* out = result_->add("combined_topk_weights", SHMOE_DTYPE_FLOAT32, {tokens, K}).data;
      reduce(*p, p->weights_buffer(K), a_.topk_weights.data, out, false, mode);
    }
    return result_.release();
  }

 private:
  void check() {
    if (a_.refusal != nullptr) checks_.refuse(a_.refusal);
    std::string why;
    h_ = b_.current(a_.handle, &why);
    if (h_ == nullptr) checks_.refuse(why);
    if (checks_.any()) return;
    const std::int64_t rows = h_->rows;
    checks_.tensor(a_.x, "x", {SHMOE_DTYPE_BFLOAT16}, {{rows, true}, {h_->hidden}});
    if (checks_.given(a_.topk_weights)) {
      if (h_->num_topk == 0) {
        checks_.refuse("topk_weights given, but the dispatch of handle carried no top-k");
      }
      checks_.tensor(a_.topk_weights, "topk_weights", {SHMOE_DTYPE_FLOAT32},
                     {{rows, true}, {h_->num_topk}});
    }
    const shmoe_tensor_t* biases[] = {&a_.bias0, &a_.bias1};
    for (int i = 0; i < 2; ++i) {
      if (checks_.given(*biases[i])) {
        const std::string name = fmt::format("bias[{}]", i);
        checks_.tensor(*biases[i], name.c_str(), {SHMOE_DTYPE_BFLOAT16},
                       {{h_->tokens}, {h_->hidden}});
      }
    }
  }

  // This rank refuses: every rank's combine on the operators is refused, naming it (on the
  // operator the others combine on, where this rank's handle says which).
  [[noreturn]] void refuse(IntranodePlan* p) {
    if (p != nullptr) {
      CombineArgs args;
      args.verdict = SHMOE_CALL_REFUSE;
      try {
        (h_ != nullptr ? p->combine_buffer(static_cast<int>(h_->hidden)) : *p->x).combine(args);
      } catch (const Error&) {
      }
    }
    throw moe::Refused(checks_.why());
  }

  // op's combine of `rows` (the dispatch's layout) on the handle's routing with weight 1.
  void reduce(IntranodePlan& p, MoeBuffer& op, const void* rows, void* out, bool sums, int mode) {
    CombineArgs args;
    args.x = rows;
    args.src_info = h_->src_info.data();
    args.layout_prefix = h_->layout_prefix.data();
    args.topk_idx = h_->routes.data();
    args.topk_weights = p.ones.data();
    args.num_tokens = h_->tokens;
    args.combined_x = out;
    args.combined_x_float32 = sums ? 1 : 0;
    args.caller_mode = mode;
    try {
      op.combine(args);
    } catch (const Error& e) {
      if (std::string(e.what()).find("caller_mode") == std::string::npos) throw;
      throw moe::Refused(fmt::format(
          "{}: topk_weights given on some ranks and not on others (on this rank: {}): give it "
          "on every rank or on none",
          kCall, mode ? "given" : "None"));
    }
  }

  // DeepEP adds the biases to the float32 sums, in order, and rounds once.
  void add_biases(std::vector<float>& sums) {
    for (const shmoe_tensor_t* b : {&a_.bias0, &a_.bias1}) {
      if (b->data == nullptr) continue;
      const auto* bits = static_cast<const std::uint16_t*>(b->data);
      for (std::size_t i = 0; i < sums.size(); ++i) {
        sums[i] += numeric::bf16_to_float(numeric::bf16{bits[i]});
      }
    }
    auto* out = static_cast<std::uint16_t*>(
        result_->add("combined_x", SHMOE_DTYPE_BFLOAT16, {h_->tokens, h_->hidden}).data);
    numeric::floats_to_bf16(sums.data(), sums.size(), out);
  }

  IntranodeBuffer& b_;
  const shmoe_intranode_combine_args_t& a_;
  Checks checks_;
  const IntranodeRouting* h_ = nullptr;
  std::unique_ptr<shmoe_ep_result> result_ = std::make_unique<shmoe_ep_result>();
};

}  // namespace

shmoe_ep_result* IntranodeBuffer::combine(const shmoe_intranode_combine_args_t& args) {
  return IntranodeCombine(*this, args)();
}

}  // namespace shmoe::deep_ep
