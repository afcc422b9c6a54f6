#include "net/http_message.h"

#include <functional>

#include "common/text.h"

namespace gpudoctor {

namespace {

template <typename Equal>
std::optional<std::string_view> FindField(const HttpFields& fields, std::string_view name, Equal equal) {
  for (const auto& [field_name, value] : fields) {
    if (equal(field_name, name)) return value;
  }
  return std::nullopt;
}

// The q-value of one Accept-Encoding element's parameters ("q=0.5"): 1 when
// absent, 0 when malformed, so a garbled preference never turns gzip on.
double QualityOf(std::string_view parameters) {
  for (std::string_view parameter : Split(parameters, ';')) {
    parameter = Trim(parameter);
    if (parameter.size() < 2 || !EqualsIgnoreCase(parameter.substr(0, 2), "q=")) continue;
    std::optional<double> q = ParseDouble(parameter.substr(2));
    return q && *q >= 0 && *q <= 1 ? *q : 0;
  }
  return 1;
}

}  // namespace

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  return FindField(headers, name, EqualsIgnoreCase);
}

std::optional<std::string_view> HttpRequest::Query(std::string_view name) const {
  return FindField(query, name, std::equal_to<std::string_view>());
}

void HttpResponse::SetHeader(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::SetBody(std::string text, std::string content_type) {
  SetSharedBody(std::make_shared<const std::string>(std::move(text)), std::move(content_type));
}

void HttpResponse::SetSharedBody(std::shared_ptr<const std::string> text, std::string content_type) {
  body = *text;
  body_owner = std::move(text);
  SetHeader("Content-Type", std::move(content_type));
}

void HttpResponse::SetStaticBody(std::string_view bytes, std::string content_type) {
  body = bytes;
  body_owner = nullptr;
  SetHeader("Content-Type", std::move(content_type));
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      if (i + 2 >= text.size() || text[i + 1] == '+' || text[i + 1] == '-') return std::nullopt;
      std::optional<int> byte = ParseInt<int>(text.substr(i + 1, 2), 16);
      if (!byte) return std::nullopt;
      out += static_cast<char>(*byte);
      i += 2;
    }
  }
  return out;
}

bool DecodeTarget(std::string_view target, HttpRequest& request) {
  const size_t question = target.find('?');
  std::optional<std::string> path = PercentDecode(target.substr(0, question));
  if (!path) return false;
  request.path = std::move(*path);
  request.query.clear();
  if (question == std::string_view::npos) return true;
  for (std::string_view pair : Split(target.substr(question + 1), '&')) {
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    std::optional<std::string> name = PercentDecode(pair.substr(0, equals), true);
    std::optional<std::string> value =
        equals == std::string_view::npos ? std::string() : PercentDecode(pair.substr(equals + 1), true);
    if (!name || !value) return false;
    request.query.emplace_back(std::move(*name), std::move(*value));
  }
  return true;
}

bool AcceptsGzip(std::string_view accept_encoding) {
  std::optional<double> gzip;
  std::optional<double> any;
  for (std::string_view element : Split(accept_encoding, ',')) {
    const size_t semicolon = element.find(';');
    const std::string_view coding = Trim(element.substr(0, semicolon));
    const double q = semicolon == std::string_view::npos ? 1 : QualityOf(element.substr(semicolon + 1));
    if (EqualsIgnoreCase(coding, "gzip") || EqualsIgnoreCase(coding, "x-gzip")) {
      gzip = q;
    } else if (coding == "*") {
      any = q;
    }
  }
  return gzip ? *gzip > 0 : any && *any > 0;
}

}  // namespace gpudoctor
