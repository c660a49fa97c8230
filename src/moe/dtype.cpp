#include "moe/dtype.hpp"

#include <string>

#include "shmoe/moe.h"

namespace shmoe::moe {

std::string_view dtype_name(DType t) {
  return shmoe_dtype_name(static_cast<shmoe_dtype_t>(t));
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  if (n == "int32" || n == "int32_t" || n == "int") return DType::kInt32;
  if (n == "float16" || n == "fp16" || n == "half" || n == "float16_t") return DType::kFloat16;
  if (n == "bfloat16" || n == "bf16" || n == "bfloat16_t") return DType::kBFloat16;
  if (n == "float32" || n == "fp32" || n == "float" || n == "float32_t") return DType::kFloat32;
  return std::nullopt;
}

}  // namespace shmoe::moe

extern "C" const char* shmoe_dtype_name(shmoe_dtype_t dtype) {
  switch (dtype) {
    case SHMOE_DTYPE_INT32:
      return "int32";
    case SHMOE_DTYPE_FLOAT16:
      return "float16";
    case SHMOE_DTYPE_BFLOAT16:
      return "bfloat16";
    case SHMOE_DTYPE_FLOAT32:
      return "float32";
    case SHMOE_DTYPE_INT64:
      return "int64";
    case SHMOE_DTYPE_UINT8:
      return "uint8";
    case SHMOE_DTYPE_FLOAT8_E4M3:
      return "float8_e4m3fn";
    case SHMOE_DTYPE_BOOL:
      return "bool";
  }
  return "?";
}
