#include "heap/symmetric_heap.hpp"

#include <unistd.h>

#include <utility>

namespace shmoe::heap {

SymmetricHeap::SymmetricHeap(int rank, std::size_t heap_size, Segment program_data) {
  std::byte* window = Segment::reserve_window(heap_size + program_data.size());
  heap_ = Segment::create(Segment::name_for(::getpid(), rank), heap_size, window);
  if (program_data.size() > 0) program_data.move_to(window + heap_size);
  data_ = std::move(program_data);
  Segment::remove_names_at_fatal_exit({heap_.name(), data_.name()});
}

void SymmetricHeap::unlink_names() {
  heap_.unlink();
  data_.unlink();
}

}  // namespace shmoe::heap
