#include "bootstrap/pmix_launch.hpp"

#include <pmix.h>

#include <climits>
#include <cstring>
#include <vector>

#include "common/env.hpp"
#include "common/error.hpp"

extern char** environ;

namespace shmoe::bootstrap {
namespace {

bool names_a_server_uri() {
  for (char** var = environ; *var != nullptr; ++var) {
    if (std::strncmp(*var, "PMIX_SERVER_URI", 15) == 0) return true;
  }
  return false;
}

Error pmix_failure(std::string_view call, std::string_view what, pmix_status_t status) {
  return make_error("{}({}) failed: {}", call, what, PMIx_Error_string(status));
}

// pmix_info_t entries that are destructed however the call that uses them ends.
class InfoList {
 public:
  ~InfoList() {
    for (auto& info : infos_) PMIX_INFO_DESTRUCT(&info);
  }
  void add(const char* key, const void* data, pmix_data_type_t type) {
    infos_.emplace_back();
    PMIX_INFO_CONSTRUCT(&infos_.back());
    PMIx_Info_load(&infos_.back(), key, data, type);
  }
  // PMIX_TIMEOUT is in whole seconds, 0 meaning none: round up, so a short wait still ends.
  void add_timeout(std::chrono::milliseconds timeout) {
    const int seconds = timeout.count() >= std::int64_t{INT_MAX} * 1000
                            ? 0
                            : static_cast<int>((timeout.count() + 999) / 1000);
    add(PMIX_TIMEOUT, &seconds, PMIX_INT);
  }
  pmix_info_t* data() { return infos_.data(); }
  std::size_t size() const { return infos_.size(); }

 private:
  std::vector<pmix_info_t> infos_;
};

// The value PMIx_Get returns, released however the caller ends.
struct ValueOwner {
  pmix_value_t* value = nullptr;
  ~ValueOwner() {
    if (value != nullptr) PMIX_VALUE_RELEASE(value);
  }
};

std::uint32_t job_attribute(const pmix_proc_t& job, const char* key) {
  ValueOwner got;
  pmix_status_t status = PMIx_Get(&job, key, nullptr, 0, &got.value);
  if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Get", key, status);
  if (got.value->type != PMIX_UINT32) {
    throw make_error("PMIx_Get({}) returned a {}, not a uint32", key,
                     PMIx_Data_type_string(got.value->type));
  }
  return got.value->data.uint32;
}

}  // namespace

struct PmixClient::Impl {
  pmix_proc_t self{};
};

bool PmixClient::started_by_server() {
  return env::get("PMIX_NAMESPACE") && env::get("PMIX_RANK") && names_a_server_uri();
}

namespace {
std::shared_ptr<PmixClient>& process_client() {
  static std::shared_ptr<PmixClient> client;
  return client;
}
}  // namespace

std::shared_ptr<PmixClient> PmixClient::for_this_process() {
  auto& client = process_client();
  if (!client) client = std::make_shared<PmixClient>();
  return client;
}

void PmixClient::release_for_this_process() {
  process_client().reset();
}

PmixClient::PmixClient() : impl_(std::make_unique<Impl>()) {
  pmix_status_t status = PMIx_Init(&impl_->self, nullptr, 0);
  if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Init", "", status);
  try {
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, impl_->self.nspace, PMIX_RANK_WILDCARD);
    const std::uint32_t size = job_attribute(job, PMIX_JOB_SIZE);
    if (size < 1 || size > INT_MAX || impl_->self.rank >= size) {
      throw make_error("PMIx says this is rank {} of a job of {}", impl_->self.rank, size);
    }
    size_ = static_cast<int>(size);
    rank_ = static_cast<int>(impl_->self.rank);
    // Unknown counts as "not all here": the store is then reachable from other hosts as well.
    try {
      local_size_ = static_cast<int>(job_attribute(job, PMIX_LOCAL_SIZE));
    } catch (const Error&) {
      local_size_ = 0;
    }
  } catch (...) {
    PMIx_Finalize(nullptr, 0);
    throw;
  }
}

PmixClient::~PmixClient() {
  PMIx_Finalize(nullptr, 0);
}

std::string PmixClient::broadcast_from_rank0(std::string_view key, const std::string& value,
                                             std::chrono::milliseconds timeout) {
  if (key.size() > PMIX_MAX_KEYLEN) throw make_error("PMIx key '{}' is too long", key);
  const std::string key_text(key);
  if (rank_ == 0) {
    pmix_value_t published;
    PMIX_VALUE_CONSTRUCT(&published);
    PMIx_Value_load(&published, value.c_str(), PMIX_STRING);
    pmix_status_t status = PMIx_Put(PMIX_GLOBAL, key_text.c_str(), &published);
    PMIx_Value_destruct(&published);
    if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Put", key, status);
    status = PMIx_Commit();
    if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Commit", key, status);
  }
  // A fence, not a lone PMIx_Get that waits for rank 0's commit: Open MPI 4.1's daemons never
  // answer such a Get for a rank on another host. The fence also brings rank 0's data to every
  // host at once.
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, impl_->self.nspace, PMIX_RANK_WILDCARD);
  InfoList fence_info;
  const bool collect = true;
  fence_info.add(PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  fence_info.add_timeout(timeout);
  pmix_status_t status = PMIx_Fence(&job, 1, fence_info.data(), fence_info.size());
  if (status == PMIX_ERR_TIMEOUT) {
    throw make_error(
        "PMIx_Fence({}) timed out after {} ms: not every PE of the job reached shmem_init "
        "(SHMOE_INIT_TIMEOUT sets the wait)",
        key, timeout.count());
  }
  if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Fence", key, status);
  if (rank_ == 0) return value;

  pmix_proc_t rank0;
  PMIX_LOAD_PROCID(&rank0, impl_->self.nspace, 0);
  InfoList get_info;
  get_info.add_timeout(timeout);
  ValueOwner got;
  status = PMIx_Get(&rank0, key_text.c_str(), get_info.data(), get_info.size(), &got.value);
  if (status != PMIX_SUCCESS) throw pmix_failure("PMIx_Get", key, status);
  if (got.value->type != PMIX_STRING || got.value->data.string == nullptr) {
    throw make_error("PMIx_Get({}) returned a {}, not a string", key,
                     PMIx_Data_type_string(got.value->type));
  }
  return got.value->data.string;
}

}  // namespace shmoe::bootstrap
