#include "bootstrap/job_key.hpp"

#include "bootstrap/store_auth.hpp"
#include "common/error.hpp"
#include "common/settings.hpp"

namespace shmoe::bootstrap {
namespace {

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

}  // namespace

JobKey JobKey::generate() {
  return JobKey(hex(auth::random_bytes(16)));
}

JobKey JobKey::parse(std::string_view text, std::string_view what) {
  if (text.size() < kMinLength || text.size() > kMaxLength) {
    throw make_error(
        "{} has {} characters; a job key needs {} to {} (e.g. the 32 hex digits `{}` prints)", what,
        text.size(), kMinLength, kMaxLength, kMakeKeyCommand);
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c <= ' ' || c >= 0x7f) {
      // The value is a secret: name the position, not the text.
      throw make_error("{} has a blank or non-printable character at position {} (byte {:#04x})",
                       what, i, c);
    }
  }
  return JobKey(std::string(text));
}

std::optional<JobKey> JobKey::from_environment() {
  auto text = settings::job_key();
  if (!text) return std::nullopt;
  return parse(*text, kJobKeyVariable);
}

std::string JobKey::job_id() const {
  if (text_.empty()) return "(none)";
  return hex(auth::hmac_sha256(text_, "shmoe job id").substr(0, 6));
}

}  // namespace shmoe::bootstrap
