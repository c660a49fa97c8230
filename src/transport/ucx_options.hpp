// The UCX transport's options, apart from the transport itself, so that the runtime's settings
// do not pull UCX's headers into every file that includes them.
#pragma once

namespace shmoe::transport {

struct UcxOptions {
  bool progress_thread = true;  // SHMOE_UCX_PROGRESS_THREAD
};

UcxOptions read_ucx_options();

}  // namespace shmoe::transport
