// The history database's schema and its migrations. Internal to src/store.
//
// A gpudoctor history file carries PRAGMA application_id kApplicationId and a
// `schema_migrations` table listing every migration applied. Migrations are
// append-only: a released one is never edited, a change is a new version.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "store/sqlite_connection.h"

namespace gpudoctor {

inline constexpr int64_t kApplicationId = 0x47504448;  // "GPDH"
inline constexpr int kSchemaVersion = 7;

// Whether this connection is a gpudoctor history, an empty file that may
// become one, or something else (an Error naming what).
enum class DatabaseState { kEmpty, kHistory };
Result<DatabaseState> InspectDatabase(SqliteConnection& db);

// The newest migration applied; 0 for an empty database.
Result<int> SchemaVersion(SqliteConnection& db);

// Brings an empty or older history up to kSchemaVersion, each migration in
// its own transaction. Refuses a history written by a newer gpudoctor.
Status MigrateSchema(SqliteConnection& db, int64_t now_ms);

}  // namespace gpudoctor
