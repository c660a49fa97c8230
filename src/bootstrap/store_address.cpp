#include <charconv>

#include "bootstrap/config_store.hpp"
#include "common/error.hpp"

namespace shmoe::bootstrap {
namespace {

constexpr std::string_view kForm = "HOST:PORT, e.g. 127.0.0.1:7000, node12:7000 or [::1]:7000";

}  // namespace

StoreAddress StoreAddress::parse(std::string_view text, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return make_error("{} '{}' is invalid: {} (expected {}, PORT in 1..65535)", what, text, why,
                      kForm);
  };
  std::string_view host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) throw bad("'[' without a closing ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') throw bad("missing ':PORT' after ']'");
    port_text = rest.substr(1);
  } else {
    std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) throw bad("missing ':PORT'");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    // An unbracketed IPv6 address cannot be told apart from its port.
    if (host.find(':') != std::string_view::npos) {
      throw bad("an IPv6 address must be written in brackets");
    }
  }
  if (host.empty()) throw bad("empty host");
  for (char c : host) {
    if (c == ' ' || c == '\t' || c == '[' || c == ']' || c == '/') {
      throw bad("the host contains an unexpected character");
    }
  }
  if (port_text.empty()) throw bad("empty port");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    throw bad("the port is not a number in 1..65535");
  }
  return StoreAddress{std::string(host), static_cast<std::uint16_t>(port)};
}

std::string StoreAddress::str() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace shmoe::bootstrap
