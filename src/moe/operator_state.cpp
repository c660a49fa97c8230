#include "moe/operator_state.hpp"

#include <shmem.h>

namespace shmoe::moe {

OperatorState::OperatorState() : n_pes(shmem_n_pes()), me(shmem_my_pe()) {}

bool OperatorState::open_window(std::size_t bytes, const CommonParts& at, int experts_per_pe,
                                int header_caller_ints) {
  window = static_cast<std::byte*>(shmem_calloc(1, bytes));
  if (window == nullptr) return false;
  headers = HeaderExchange(window + at.headers, n_pes, experts_per_pe, header_caller_ints);
  combine_done = FlagArray(window + at.combine_done, n_pes);
  recv_rows = window + at.recv_rows;
  combine_rows = window + at.combine_rows;
  return true;
}

void OperatorState::close() {
  pool.reset();
  shmem_free(window);
  window = nullptr;
}

}  // namespace shmoe::moe
