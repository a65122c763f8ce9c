#include "daemon/journal/journal_sqlite.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {
namespace {

absl::StatusCode CodeFor(int sqlite_code) {
  switch (sqlite_code & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status(CodeFor(rc), absl::StrCat("cannot open ", path, ": ",
                                                  db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return status;
  }
  // Another process (an operator's sqlite3 shell) may hold a lock briefly.
  sqlite3_busy_timeout(db, 5000);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db, path));
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

absl::Status SqliteDb::Error(const std::string& what) const {
  return absl::Status(CodeFor(sqlite3_errcode(db_)),
                      absl::StrCat(path_, ": ", sqlite3_errmsg(db_), " (", what, ")"));
}

absl::Status SqliteDb::Exec(const std::string& sql) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error(sql.substr(0, 80));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SqliteStatement>> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
      SQLITE_OK) {
    return Error(absl::StrCat("preparing ", sql.substr(0, 80)));
  }
  return std::make_unique<SqliteStatement>(this, stmt, sql);
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

// Binding only fails for a bad index or out of memory; both surface at Step().
SqliteStatement& SqliteStatement::BindInt(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::BindDouble(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::BindText(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(sql_.substr(0, 80));
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row;
  do {
    row = Step();
  } while (row.ok() && *row);
  Reset();
  return row.status();
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double SqliteStatement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string SqliteStatement::Text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
              : std::string();
}

std::string SqliteStatement::Blob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  return blob ? std::string(static_cast<const char*>(blob),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
              : std::string();
}

}  // namespace horovodd::daemon
