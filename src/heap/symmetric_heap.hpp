// This PE's symmetric memory: one window made of the heap segment followed by the program's
// moved data (program_data.hpp), so one offset names a byte of either. The runtime owns it; the
// transports are given it and map it for the PEs of this host (shared memory) or register it
// (UCX). Its segments' names exist only until every peer has mapped them.
#pragma once

#include <cstddef>

#include "heap/segment.hpp"

namespace shmoe::heap {

class SymmetricHeap {
 public:
  // Creates this PE's heap segment of `heap_size` bytes in a window reserved for it and the
  // program data, and moves `program_data` (or an empty segment) right after the heap.
  SymmetricHeap(int rank, std::size_t heap_size, Segment program_data);
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  std::byte* base() const { return heap_.base(); }
  std::size_t heap_size() const { return heap_.size(); }
  const Segment& heap_segment() const { return heap_; }
  const Segment& data_segment() const { return data_; }

  // Once every peer has mapped the window: the names go, the mappings stay.
  void unlink_names();
  // The heap segment stays mapped after this object goes (Segment::keep_mapped).
  void keep_mapped() { heap_.keep_mapped(); }

 private:
  Segment heap_;
  Segment data_;
};

}  // namespace shmoe::heap
