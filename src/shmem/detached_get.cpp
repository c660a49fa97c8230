#include "shmem/detached_get.hpp"

#include "shmem/api_stamp.hpp"

namespace shmoe {

std::unique_ptr<transport::DetachedGet> getmem_detached(const void* source, std::size_t bytes,
                                                        int pe) {
  constexpr const char* fn = "getmem_detached";
  auto& rt = runtime(fn);
  const std::size_t offset =
      api::check_remote(SHMEM_CTX_DEFAULT, rt, source, bytes, pe, fn, "source");
  return rt.transport().get_detached(api::channel_of(SHMEM_CTX_DEFAULT), pe, offset, bytes);
}

}  // namespace shmoe
