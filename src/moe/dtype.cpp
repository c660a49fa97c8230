#include "moe/dtype.hpp"

#include <string>

namespace shmoe::moe {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kInt32:
      return "int32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
  }
  return "?";
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
