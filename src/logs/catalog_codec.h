// The event catalog as compact bytes. The build parses data/events.toml once
// (pattern_database_tool) and compiles these bytes in, so no command spends
// its start-up parsing TOML; LogCatalog::Builtin() decodes them.
//
//   std::string bytes = CatalogCodec::Encode(catalog);
//   Result<LogCatalog> again = CatalogCodec::Decode(bytes);   // == catalog
//
// Bytes from another build of the format, truncated or damaged, are an error,
// never a crash.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "logs/catalog.h"

namespace gpudoctor {

class CatalogCodec {
 public:
  static std::string Encode(const LogCatalog& catalog);
  static Result<LogCatalog> Decode(std::string_view bytes);
};

}  // namespace gpudoctor
