// shmoe-config --env: every setting of the table in settings.def, with the value in force here.
#pragma once

#include <string>

namespace shmoe::tools::config {

// The listing, and whether every variable that is set parsed.
struct SettingsListing {
  std::string text;
  bool valid = true;
};
SettingsListing list_settings();

}  // namespace shmoe::tools::config
