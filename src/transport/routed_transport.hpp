// One transport per peer in the same job: PEs on this host through shared memory, the others
// through UCX. The SHMEM layer sees one Transport; each (pe, offset) goes to the transport that
// reaches that PE, with that transport's part of the caller's channel.
#pragma once

#include <vector>

#include "transport/transport.hpp"

namespace shmoe::transport {

class RoutedTransport final : public Transport {
 public:
  // `in_use`: each distinct transport once; `route[pe]`: the index in `in_use` of the transport
  // that reaches PE pe.
  RoutedTransport(std::vector<int> route, std::vector<Transport*> in_use)
      : route_(std::move(route)), in_use_(std::move(in_use)) {}

  std::string_view name() const override { return "routed"; }
  std::byte* direct_base(int pe) const override { return to(pe).direct_base(pe); }
  std::unique_ptr<Channel> open_channel() override {
    auto ch = std::make_unique<RoutedChannel>();
    for (Transport* t : in_use_) ch->parts.push_back(t->open_channel());
    return ch;
  }
  void put(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes) override {
    to(pe).put(part(ch, pe), pe, offset, src, bytes);
  }
  void get(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) override {
    to(pe).get(part(ch, pe), pe, offset, dst, bytes);
  }
  void put_nbi(Channel* ch, int pe, std::size_t offset, const void* src,
               std::size_t bytes) override {
    to(pe).put_nbi(part(ch, pe), pe, offset, src, bytes);
  }
  void get_nbi(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) override {
    to(pe).get_nbi(part(ch, pe), pe, offset, dst, bytes);
  }
  std::unique_ptr<DetachedGet> get_detached(Channel* ch, int pe, std::size_t offset,
                                            std::size_t bytes) override {
    return to(pe).get_detached(part(ch, pe), pe, offset, bytes);
  }
  void put_blocks(Channel* ch, int pe, std::size_t offset, const void* src,
                  const Blocks& blocks) override {
    to(pe).put_blocks(part(ch, pe), pe, offset, src, blocks);
  }
  void get_blocks(Channel* ch, int pe, std::size_t offset, void* dst,
                  const Blocks& blocks) override {
    to(pe).get_blocks(part(ch, pe), pe, offset, dst, blocks);
  }
  void put_value(Channel* ch, int pe, std::size_t offset, std::uint64_t bits,
                 std::size_t bytes) override {
    to(pe).put_value(part(ch, pe), pe, offset, bits, bytes);
  }
  std::uint64_t fetch_atomic(Channel* ch, int pe, std::size_t offset,
                             const AmoRequest& request) override {
    return to(pe).fetch_atomic(part(ch, pe), pe, offset, request);
  }
  void post_atomic(Channel* ch, int pe, std::size_t offset, const AmoRequest& request) override {
    to(pe).post_atomic(part(ch, pe), pe, offset, request);
  }
  void put_signal(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes,
                  const SignalUpdate& signal, bool nbi) override {
    to(pe).put_signal(part(ch, pe), pe, offset, src, bytes, signal, nbi);
  }
  // A fence or quiet is the channel's, in each transport: a shared-memory fence is one store
  // fence, and a UCX one touches only the endpoints this channel wrote to.
  void fence(Channel* ch) override {
    for (std::size_t i = 0; i < in_use_.size(); ++i) in_use_[i]->fence(part_at(ch, i));
  }
  void quiet(Channel* ch) override {
    for (std::size_t i = 0; i < in_use_.size(); ++i) in_use_[i]->quiet(part_at(ch, i));
  }
  // Each transport gets the named PEs it carries; one that carries none is left alone.
  void quiet_pes(Channel* ch, const int* pes, std::size_t n) override {
    std::vector<std::vector<int>> by_transport(in_use_.size());
    for (std::size_t i = 0; i < n; ++i) by_transport[route_[pes[i]]].push_back(pes[i]);
    for (std::size_t i = 0; i < in_use_.size(); ++i) {
      if (!by_transport[i].empty()) {
        in_use_[i]->quiet_pes(part_at(ch, i), by_transport[i].data(), by_transport[i].size());
      }
    }
  }
  void start_batch(Channel* ch) override {
    for (std::size_t i = 0; i < in_use_.size(); ++i) in_use_[i]->start_batch(part_at(ch, i));
  }
  void stop_batch(Channel* ch) override {
    for (std::size_t i = 0; i < in_use_.size(); ++i) in_use_[i]->stop_batch(part_at(ch, i));
  }
  void complete_batches() override {
    for (Transport* t : in_use_) t->complete_batches();
  }
  bool progress() override {
    bool any = false;
    for (Transport* t : in_use_) any = t->progress() || any;
    return any;
  }

 private:
  struct RoutedChannel final : Channel {
    std::vector<std::unique_ptr<Channel>> parts;  // one per transport in use
  };

  Transport& to(int pe) const { return *in_use_[route_[pe]]; }
  static Channel* part_at(Channel* ch, std::size_t i) {
    return ch == nullptr ? nullptr : static_cast<RoutedChannel*>(ch)->parts[i].get();
  }
  Channel* part(Channel* ch, int pe) const {
    return part_at(ch, static_cast<std::size_t>(route_[pe]));
  }

  std::vector<int> route_;
  std::vector<Transport*> in_use_;
};

}  // namespace shmoe::transport
