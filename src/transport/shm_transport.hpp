// The shared-memory transport: every PE maps the segments of its peers on the same host, so a put
// is a store into the peer's window and an atomic is a CPU atomic on it (the NVLink / HCCS model
// on one host). Peers it does not map are reached by another transport (see RoutedTransport).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "heap/segment.hpp"
#include "transport/transport.hpp"

namespace shmoe::transport {

struct PeerInfo {
  std::string host;
  std::string segment;
  std::size_t segment_size = 0;
};

class ShmTransport final : public Transport {
 public:
  // Collective: creates this PE's segment of `segment_size` bytes, exchanges names through the
  // store, maps the segment of every peer pe with mapped[pe] (each must run on `host`) and
  // removes the names once all are mapped.
  ShmTransport(bootstrap::StoreCollectives& collectives, int rank, int size,
               std::size_t segment_size, const std::string& host, const std::vector<bool>& mapped,
               std::chrono::milliseconds timeout);

  std::string_view name() const override { return "shm"; }
  std::byte* local_base() const { return segments_[rank_].base(); }
  std::byte* direct_base(int pe) const override { return segments_[pe].base(); }  // or nullptr
  void put(int pe, std::size_t offset, const void* src, std::size_t bytes) override;
  void get(int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  std::uint64_t atomic(int pe, std::size_t offset, const AmoRequest& request) override;
  void fence() override;
  void quiet() override;

 private:
  int rank_;
  std::vector<heap::Segment> segments_;
};

// A store into a peer's mapped window: memcpy, or non-temporal stores past the cache size. Not
// ordered until the next fence() or quiet().
void copy_to_peer(std::byte* dst, const void* src, std::size_t bytes);

// Orders every earlier store of this thread (non-temporal ones too) before every later one.
void store_fence();

// Applies an AMO to a word in mapped memory; shared by every load/store-reachable path.
std::uint64_t atomic_on_word(void* word, const AmoRequest& request);

}  // namespace shmoe::transport
