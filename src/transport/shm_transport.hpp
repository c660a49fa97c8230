// The shared-memory transport: every PE maps the segments of its peers on the same host, so a put
// is a store into the peer's window and an atomic is a CPU atomic on it (the NVLink / HCCS model
// on one host). Peers it does not map are reached by another transport (see RoutedTransport).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/config_store.hpp"
#include "heap/segment.hpp"
#include "heap/symmetric_heap.hpp"
#include "transport/transport.hpp"

namespace shmoe::transport {

struct PeerInfo {
  std::string host;
  std::string segment;
  std::size_t segment_size = 0;
  std::string data_segment;  // empty when the PE has no symmetric program data
  std::size_t data_size = 0;
};

// A peer's symmetric memory as this PE maps it: laid out as its SymmetricHeap, the heap segment
// followed by the program-data segment, so one offset names a byte of either on every PE.
struct Window {
  heap::Segment heap;
  heap::Segment data;
};

class ShmTransport final : public Transport {
 public:
  // Collective: exchanges the names of every PE's SymmetricHeap segments through the store, maps
  // the window of every peer pe with mapped[pe] (each must run on `host`) and removes the names
  // once all are mapped. If the PEs' program data differ in size (not one executable), no PE's
  // program data is symmetric. `own` (the runtime's) outlives the transport.
  ShmTransport(bootstrap::StoreCollectives& collectives, int rank, int size,
               heap::SymmetricHeap& own, const std::string& host, const std::vector<bool>& mapped,
               std::chrono::milliseconds timeout);

  std::string_view name() const override { return "shm"; }
  // The size of every PE's window: the heap, then the program data that is symmetric (0 bytes
  // when it is not).
  std::size_t window_size() const { return heap_size_ + data_size_; }
  std::size_t symmetric_data_size() const { return data_size_; }
  std::byte* direct_base(int pe) const override { return bases_[pe]; }  // or nullptr
  // Every operation completes on return: no channel state, and the _nbi and posted forms are
  // the blocking ones.
  void put(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes) override;
  void get(Channel* ch, int pe, std::size_t offset, void* dst, std::size_t bytes) override;
  // One copy per block, and one for the whole transfer when the blocks are contiguous.
  void put_blocks(Channel* ch, int pe, std::size_t offset, const void* src,
                  const Blocks& blocks) override;
  void get_blocks(Channel* ch, int pe, std::size_t offset, void* dst,
                  const Blocks& blocks) override;
  void put_value(Channel* ch, int pe, std::size_t offset, std::uint64_t bits,
                 std::size_t bytes) override;
  std::uint64_t fetch_atomic(Channel* ch, int pe, std::size_t offset,
                             const AmoRequest& request) override;
  void put_signal(Channel* ch, int pe, std::size_t offset, const void* src, std::size_t bytes,
                  const SignalUpdate& signal, bool nbi) override;
  void fence(Channel* ch) override;
  void quiet(Channel* ch) override;

 private:
  std::size_t heap_size_;
  std::size_t data_size_ = 0;
  std::vector<Window> peers_;      // the windows of the peers this PE maps
  std::vector<std::byte*> bases_;  // every PE's window as mapped here (own included), or nullptr
};

// A store into a peer's mapped window: memcpy, or non-temporal stores past the cache size. Not
// ordered until the next fence() or quiet().
void copy_to_peer(std::byte* dst, const void* src, std::size_t bytes);

// Orders every earlier store of this thread (non-temporal ones too) before every later one.
void store_fence();

// Applies an AMO to a word in mapped memory; shared by every load/store-reachable path.
std::uint64_t atomic_on_word(void* word, const AmoRequest& request);

}  // namespace shmoe::transport
