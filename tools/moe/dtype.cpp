#include "dtype.hpp"

#include <string>

namespace shmoe::tools {

std::string_view dtype_name(DType t) {
  return shmoe_dtype_name(t);
}

std::optional<DType> parse_dtype(std::string_view name) {
  const std::string n(name);
  if (n == "int32" || n == "int32_t" || n == "int") return SHMOE_DTYPE_INT32;
  if (n == "float16" || n == "fp16" || n == "half" || n == "float16_t") return SHMOE_DTYPE_FLOAT16;
  if (n == "bfloat16" || n == "bf16" || n == "bfloat16_t") return SHMOE_DTYPE_BFLOAT16;
  if (n == "float32" || n == "fp32" || n == "float" || n == "float32_t") return SHMOE_DTYPE_FLOAT32;
  return std::nullopt;
}

}  // namespace shmoe::tools
