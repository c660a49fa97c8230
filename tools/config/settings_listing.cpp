#include "settings_listing.hpp"

#include <fmt/format.h>

#include <regex>
#include <string_view>

#include "common/settings.hpp"
#include "common/unknown_settings.hpp"

namespace shmoe::tools::config {
namespace {

// The table's texts are docs/environment.md's Markdown; a terminal wants them plain.
std::string plain(const std::string& markdown) {
  static const std::regex link(R"(\[([^\]]*)\]\([^)]*\))");
  std::string out = std::regex_replace(markdown, link, "$1");
  std::erase(out, '`');
  return out;
}

std::string kind_of(const settings::Entry& e) {
  if (e.choices != nullptr) return fmt::format("{} of {}", e.kind, e.choices());
  return e.min == e.max ? e.kind : fmt::format("{} {}..{}", e.kind, e.min, e.max);
}

// Variables with shmoe's prefixes that nothing reads, after the table: each makes the listing
// invalid (exit 1), as a bad value does, unless SHMOE_WARN_UNKNOWN_ENV=0.
void list_unknown_variables(SettingsListing& out) {
  if (!settings::warn_unknown_env()) return;
  for (const settings::UnknownVariable& v : settings::unknown_variables()) {
    out.text += fmt::format("unknown: {} (SHMOE_WARN_UNKNOWN_ENV=0 silences this)\n",
                            settings::describe(v));
    out.valid = false;
  }
}

}  // namespace

SettingsListing list_settings() {
  SettingsListing out;
  for (const settings::Entry& e : settings::table()) {
    const auto text = settings::text_of(e.variable);
    const std::string error = settings::error_of(e.variable);
    const bool secret = std::string_view(e.kind) == "secret";
    std::string in_force =
        text ? fmt::format("{} (from the environment)", secret ? "set, not shown" : *text)
        : std::string_view(e.shown_default) == "-"
            ? std::string("unset")
            : fmt::format("{} (the default)", plain(e.shown_default));
    if (!error.empty()) {
      in_force = fmt::format("none: {}", error);
      out.valid = false;
    }
    out.text +=
        fmt::format("{}\n  in force: {}\n  default:  {}\n  kind:     {}\n  meaning:  {}\n",
                    e.variable, in_force, plain(e.shown_default), kind_of(e), plain(e.meaning));
  }
  list_unknown_variables(out);
  return out;
}

}  // namespace shmoe::tools::config
