// The secret every process of one job shares, and the public name derived from it. The config
// store admits only connections that prove the key (see store_auth.hpp), and tells PEs of
// another job apart by their job id. shmoerun makes a key per job and hands it to its PEs in
// SHMOE_JOB_KEY; under PMIx, PE 0 makes one and hands it out through PMIx; under other launchers
// the user exports one for the whole job.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shmoe::bootstrap {

inline constexpr const char* kJobKeyVariable = "SHMOE_JOB_KEY";

class JobKey {
 public:
  // Below 32 characters a key is more guessable than the 128 random bits generate() makes.
  static constexpr std::size_t kMinLength = 32;
  static constexpr std::size_t kMaxLength = 1024;

  JobKey() = default;  // empty: no key

  // 128 bits from the kernel's random source, as 32 hex digits. Throws shmoe::Error when the
  // kernel has none to give.
  static JobKey generate();
  // A key given by the user; throws shmoe::Error naming `what` unless it has kMinLength to
  // kMaxLength printable characters.
  static JobKey parse(std::string_view text, std::string_view what);
  // SHMOE_JOB_KEY, validated; nullopt when unset.
  static std::optional<JobKey> from_environment();

  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }
  // The job's public name (12 hex digits): a one-way function of the key, so that refusals can
  // name both jobs without revealing either key.
  std::string job_id() const;

  friend bool operator==(const JobKey&, const JobKey&) = default;

 private:
  explicit JobKey(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// How to make a key for a job, for error messages: a command that prints 128 random bits.
inline constexpr std::string_view kMakeKeyCommand = "openssl rand -hex 16";

}  // namespace shmoe::bootstrap
