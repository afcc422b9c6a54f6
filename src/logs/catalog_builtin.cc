// LogCatalog::Builtin(): data/events.toml as the build parsed and encoded it
// (pattern_database_tool, catalog_codec.h), so start-up parses no TOML.
#include <cstdio>
#include <cstdlib>

#include "common/embedded_bytes.h"
#include "logs/catalog.h"
#include "logs/catalog_codec.h"

namespace gpudoctor {

extern const char kBuiltinCatalogToml[];    // data/events.toml, embedded
std::string_view BuiltinCatalogBytes();     // the same, encoded by pattern_database_tool

const LogCatalog& LogCatalog::Builtin() {
  static const LogCatalog catalog = [] {
    Result<LogCatalog> loaded = CatalogCodec::Decode(BuiltinCatalogBytes());
    ReleaseEmbeddedPages(BuiltinCatalogBytes());  // decoded into `loaded`
    // Bytes this build did not make (a stale object file): parse the text.
    if (!loaded) loaded = FromToml(kBuiltinCatalogToml, "data/events.toml (built in)");
    if (!loaded) {
      // The built-in data is checked by the tests; reaching this is a build defect.
      std::fprintf(stderr, "gpudoctor: invalid built-in event catalog: %s\n", loaded.error().message.c_str());
      std::abort();
    }
    return std::move(loaded).value();
  }();
  return catalog;
}

}  // namespace gpudoctor
