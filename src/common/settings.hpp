// shmoe's settings: the environment variables listed in settings.def, read together at first use
// and parsed once. An accessor returns the value in force (the default when the variable is
// unset) or throws the parse error, which names the variable, the value and what is allowed;
// so a bad value stops only the code that uses it, as before the table existed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace shmoe::settings {

// The choice settings' values, parsed once here; their users switch on the enum.
enum class Transport { kAuto, kShm, kUcx };       // SHMOE_TRANSPORT
enum class Barrier { kDissemination, kCentral };  // SHMOE_BARRIER
enum class PeLoss { kAbort, kContinue };          // SHMOE_PE_LOSS

// Each choice's accepted spellings, in the order listings show them.
template <class E>
struct ChoiceNames;
template <>
struct ChoiceNames<Transport> {
  static constexpr std::pair<std::string_view, Transport> kAll[] = {
      {"auto", Transport::kAuto}, {"shm", Transport::kShm}, {"ucx", Transport::kUcx}};
};
template <>
struct ChoiceNames<Barrier> {
  static constexpr std::pair<std::string_view, Barrier> kAll[] = {
      {"dissemination", Barrier::kDissemination}, {"central", Barrier::kCentral}};
};
template <>
struct ChoiceNames<PeLoss> {
  static constexpr std::pair<std::string_view, PeLoss> kAll[] = {{"abort", PeLoss::kAbort},
                                                                 {"continue", PeLoss::kContinue}};
};

// The spelling of a choice, and the accepted spellings joined ("auto, shm, ucx").
template <class E>
std::string_view name_of(E value) {
  for (const auto& [name, v] : ChoiceNames<E>::kAll) {
    if (v == value) return name;
  }
  return "?";
}
template <class E>
std::string choice_list() {
  std::string out;
  for (const auto& [name, v] : ChoiceNames<E>::kAll) {
    out += out.empty() ? "" : ", ";
    out += name;
  }
  return out;
}
// The value spelled `text`, or nullopt.
template <class E>
std::optional<E> choice_named(std::string_view text) {
  for (const auto& [name, v] : ChoiceNames<E>::kAll) {
    if (name == text) return v;
  }
  return std::nullopt;
}

// How a variable's text becomes a value. Each parse throws shmoe::Error naming the variable.
namespace kind {
struct Size {
  using Value = std::size_t;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "size";
};
struct Seconds {
  using Value = std::chrono::milliseconds;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "seconds";
};
struct Flag {
  using Value = bool;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "flag";
};
struct Text {
  using Value = std::string;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "text";
};
struct Secret : Text {
  static constexpr const char* kName = "secret";
};
template <std::int64_t Min, std::int64_t Max>
struct Integer {
  using Value = std::int64_t;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "integer";
};
// One of a fixed set of spellings (ChoiceNames<E>); anything else is refused with the list.
template <class E>
struct Choice {
  using Value = E;
  static Value parse(std::string_view text, const char* variable);
  static constexpr const char* kName = "choice";
};
}  // namespace kind

// The accessor's type: the value, or an optional one where the entry has no default.
template <class Kind>
std::optional<typename Kind::Value> in_force(std::nullopt_t) {
  return std::nullopt;
}
template <class Kind, class Default>
typename Kind::Value in_force(Default fallback) {
  return typename Kind::Value(fallback);
}

#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) \
  using id##_kind = kind::kind_name;
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  using id##_kind = kind::Integer<min, max>;
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING

#define SHMOE_SETTING(id, variable, kind_name, fallback, shown, meaning) \
  decltype(in_force<id##_kind>(fallback)) id();
#define SHMOE_INT_SETTING(id, variable, min, max, fallback, shown, meaning) \
  SHMOE_SETTING(id, variable, _, fallback, shown, meaning)
#include "common/settings.def"
#undef SHMOE_SETTING
#undef SHMOE_INT_SETTING

// One row of the table, for listings (shmoe-config --env) and the docs/environment.md check.
struct Entry {
  const char* variable;
  const char* kind;           // "size", "seconds", "flag", "text", "secret", "integer"
  std::int64_t min, max;      // the allowed range of an integer; 0, 0 otherwise
  const char* shown_default;  // as docs/environment.md shows it
  const char* meaning;        // docs/environment.md's text
  std::string (*choices)();   // a choice's accepted values ("auto, shm, ucx"); nullptr otherwise
};
std::span<const Entry> table();

// The text of table variable `variable` as read (nullopt when unset), and its parse error (empty
// when it parsed or is unset). Throws std::out_of_range for a name the table lacks.
std::optional<std::string> text_of(std::string_view variable);
std::string error_of(std::string_view variable);

// The symmetric heap size asked for: SHMEM_SYMMETRIC_SIZE, else the SMA_ spelling, else the
// default. `text` is empty when the default applies.
struct SymmetricSize {
  std::string variable;
  std::string text;
  std::size_t bytes = 0;
};
SymmetricSize symmetric_size_in_force();

// Sets (or, with nullopt, unsets) a table variable in this process's environment, for the
// processes it starts, and in the settings read here. Throws std::out_of_range for a name the
// table lacks.
void set(std::string_view variable, const std::optional<std::string>& text);

// Reads every variable of the table again: for tests that change the environment.
void reread();

}  // namespace shmoe::settings
