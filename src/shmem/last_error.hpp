// The text of this thread's last refused or failed shmoe_ call, which shmoe_last_error() (and
// shmoe_moe_last_error()) return: the C API's only channel for a reason.
#pragma once

#include <string>

namespace shmoe {

void set_last_error(std::string text);
const std::string& last_error();

}  // namespace shmoe
