// shmoe-config --diagnose: checks the installation and the host limits a job runs into, as JSON
// with one `next_steps` line per problem, so a user (or a bug report) has every fact in one place.
#pragma once

#include <nlohmann/json.hpp>

#include "layout.hpp"

namespace shmoe::tools::config {

struct DiagnoseOptions {
  int pes = 1;  // the job size to plan for
};

struct Diagnosis {
  nlohmann::ordered_json report;
  bool healthy = true;
};

Diagnosis diagnose(const Layout& layout, const DiagnoseOptions& options);

// How many descriptors the busiest process of an N-PE job holds; see the comment in the source.
std::size_t open_files_needed(int pes);

}  // namespace shmoe::tools::config
