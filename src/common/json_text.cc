#include "common/json_text.h"

#include <array>
#include <cmath>

namespace gpudoctor {

std::string ToJsonText(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string ToJsonText(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

void AppendJsonNumber(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  // The routine nlohmann's serializer writes a double with, without building a json and a serializer.
  std::array<char, 64> buffer;
  const char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  out.append(buffer.data(), static_cast<size_t>(end - buffer.data()));
}

}  // namespace gpudoctor
