// shmoe's own get from a symmetric address on PE `pe` (default context) that the caller may stop
// waiting for: transport.hpp's DetachedGet (shrink mode's reads of PEs on other hosts).
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.hpp"

namespace shmoe {

std::unique_ptr<transport::DetachedGet> getmem_detached(const void* source, std::size_t bytes,
                                                        int pe);

}  // namespace shmoe
