// One transport per peer in the same job: PEs on this host through shared memory, the others
// through UCX. The SHMEM layer sees one Transport; each (pe, offset) goes to the transport that
// reaches that PE, and fence/quiet apply to every transport in use.
#pragma once

#include <vector>

#include "transport/transport.hpp"

namespace shmoe::transport {

class RoutedTransport final : public Transport {
 public:
  // `route[pe]`: the transport that reaches PE pe; `in_use`: each distinct transport once.
  RoutedTransport(std::vector<Transport*> route, std::vector<Transport*> in_use)
      : route_(std::move(route)), in_use_(std::move(in_use)) {}

  std::string_view name() const override { return "routed"; }
  std::byte* direct_base(int pe) const override { return route_[pe]->direct_base(pe); }
  void put(int pe, std::size_t offset, const void* src, std::size_t bytes) override {
    route_[pe]->put(pe, offset, src, bytes);
  }
  void get(int pe, std::size_t offset, void* dst, std::size_t bytes) override {
    route_[pe]->get(pe, offset, dst, bytes);
  }
  void put_nbi(int pe, std::size_t offset, const void* src, std::size_t bytes) override {
    route_[pe]->put_nbi(pe, offset, src, bytes);
  }
  void get_nbi(int pe, std::size_t offset, void* dst, std::size_t bytes) override {
    route_[pe]->get_nbi(pe, offset, dst, bytes);
  }
  std::uint64_t atomic(int pe, std::size_t offset, const AmoRequest& request) override {
    return route_[pe]->atomic(pe, offset, request);
  }
  void fence() override {
    for (Transport* t : in_use_) t->fence();
  }
  void quiet() override {
    for (Transport* t : in_use_) t->quiet();
  }

 private:
  std::vector<Transport*> route_;
  std::vector<Transport*> in_use_;
};

}  // namespace shmoe::transport
