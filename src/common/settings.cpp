#include "common/settings.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "common/env.hpp"
#include "common/error.hpp"

namespace shmoe::settings {

namespace kind {
Size::Value Size::parse(std::string_view text, const char* variable) {
  return env::parse_size(text, variable);
}
Seconds::Value Seconds::parse(std::string_view text, const char* variable) {
  return env::parse_seconds(text, variable);
}
Flag::Value Flag::parse(std::string_view text, const char*) {
  return env::parse_flag(text);
}
Text::Value Text::parse(std::string_view text, const char*) {
  return std::string(text);
}
template <class E>
E Choice<E>::parse(std::string_view text, const char* variable) {
  if (auto v = choice_named<E>(text)) return *v;
  throw make_error("{}={} is not one of the accepted values: {}", variable, text, choice_list<E>());
}
template struct Choice<Transport>;
template struct Choice<Barrier>;
template struct Choice<PeLoss>;

template <std::int64_t Min, std::int64_t Max>
std::int64_t Integer<Min, Max>::parse(std::string_view text, const char* variable) {
  return env::parse_int(text, variable, Min, Max);
}
}  // namespace kind

namespace {

// What was read for one variable: its text, and the value or the error it parsed to.
struct Raw {
  std::optional<std::string> text;
  std::string error;
};
template <class Kind>
struct Reading : Raw {
  std::optional<typename Kind::Value> value;
};

struct Snapshot {
#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) Reading<id##_kind> id;
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  SHMOE_SETTING(id, variable, _, fallback, shown, meaning)
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING
};

template <class Kind>
void read(Reading<Kind>& r, const char* variable) {
  r.text = env::get(variable);
  if (!r.text) return;
  try {
    r.value = Kind::parse(*r.text, variable);
  } catch (const Error& e) {
    r.error = e.what();
  }
}

Snapshot read_environment() {
  Snapshot s;
#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) read(s.id, variable);
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  SHMOE_SETTING(id, variable, _, fallback, shown, meaning)
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING
  return s;
}

// Accessors run on several threads (start-up, hang watch, the store's); reread() and set() only
// where the program changes its environment, which is itself not thread-safe.
std::mutex& snapshot_mutex() {
  static std::mutex m;
  return m;
}
std::optional<Snapshot>& snapshot_slot() {
  static std::optional<Snapshot> s;
  return s;
}
const Snapshot& snapshot(const std::lock_guard<std::mutex>&) {
  auto& s = snapshot_slot();
  if (!s) s = read_environment();
  return *s;
}

const Raw& raw_of(const Snapshot& s, std::string_view name) {
#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) \
  if (name == variable) return s.id;
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  SHMOE_SETTING(id, variable, _, fallback, shown, meaning)
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING
  throw std::out_of_range(std::string(name) + " is not in shmoe's table of settings");
}

}  // namespace

#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) \
  decltype(in_force<id##_kind>(fallback)) id() {                         \
    std::lock_guard lock(snapshot_mutex());                              \
    const auto& r = snapshot(lock).id;                                   \
    if (!r.error.empty()) throw Error(r.error);                          \
    if (r.value) return *r.value;                                        \
    return in_force<id##_kind>(fallback);                                \
  }
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  SHMOE_SETTING(id, variable, _, fallback, shown, meaning)
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING

// The listing's accepted values of a kind: a choice's list, nothing for the others.
template <class K>
constexpr std::string (*choices_of())() {
  return nullptr;
}
template <class K>
requires std::is_enum_v<typename K::Value>
constexpr std::string (*choices_of())() {
  return &choice_list<typename K::Value>;
}

std::span<const Entry> table() {
  static const Entry entries[] = {
#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) \
  {variable, kind::kind_name::kName, 0, 0, shown, meaning, choices_of<kind::kind_name>()},
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  {variable, kind::Integer<min, max>::kName, min, max, shown, meaning, nullptr},
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING
  };
  return entries;
}

std::optional<std::string> text_of(std::string_view variable) {
  std::lock_guard lock(snapshot_mutex());
  return raw_of(snapshot(lock), variable).text;
}

std::string error_of(std::string_view variable) {
  std::lock_guard lock(snapshot_mutex());
  return raw_of(snapshot(lock), variable).error;
}

SymmetricSize symmetric_size_in_force() {
  if (auto text = text_of("SHMEM_SYMMETRIC_SIZE")) {
    return {"SHMEM_SYMMETRIC_SIZE", *text, symmetric_size()};
  }
  if (auto text = text_of("SMA_SYMMETRIC_SIZE")) {
    return {"SMA_SYMMETRIC_SIZE", *text, *sma_symmetric_size()};
  }
  return {"SHMEM_SYMMETRIC_SIZE", "", symmetric_size()};
}

void set(std::string_view variable, const std::optional<std::string>& text) {
  std::lock_guard lock(snapshot_mutex());
  raw_of(snapshot(lock), variable);  // refuses a name the table lacks
  const std::string name(variable);
  if ((text ? ::setenv(name.c_str(), text->c_str(), 1) : ::unsetenv(name.c_str())) != 0) {
    throw make_error("setting {} in the environment failed: {}", name, std::strerror(errno));
  }
  snapshot_slot() = read_environment();
}

void reread() {
  std::lock_guard lock(snapshot_mutex());
  snapshot_slot() = read_environment();
}

}  // namespace shmoe::settings
