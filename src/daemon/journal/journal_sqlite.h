// A thin RAII layer over the SQLite C API for the journal: one connection,
// prepared statements, errors as absl::Status naming the database file.
// Not thread-safe: the journal serialises every use behind its own mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace horovodd::daemon {

class SqliteStatement;

class SqliteDb {
 public:
  // Opens (creating) the database file at `path` for reading and writing.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Exec(const std::string& sql);
  absl::StatusOr<std::unique_ptr<SqliteStatement>> Prepare(const std::string& sql);

  // A status for the last failure on this connection: DATA_LOSS for a file
  // that is not a database or is corrupt, PERMISSION_DENIED for a read-only
  // one, INTERNAL otherwise; the message names the file and `what` failed.
  absl::Status Error(const std::string& what) const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* const db_;
  const std::string path_;
};

// One prepared statement. Bind parameters are 1-based, columns 0-based, as in
// SQLite. Reset() after each use makes it ready for the next.
class SqliteStatement {
 public:
  SqliteStatement(const SqliteDb* db, sqlite3_stmt* stmt, std::string sql)
      : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  SqliteStatement& BindInt(int index, int64_t value);
  SqliteStatement& BindDouble(int index, double value);
  SqliteStatement& BindText(int index, std::string_view text);
  SqliteStatement& BindBlob(int index, std::string_view bytes);

  // true: a row is ready to read; false: done.
  absl::StatusOr<bool> Step();
  // Steps to completion, ignoring any rows; then resets.
  absl::Status Run();
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  std::string Blob(int column) const;

 private:
  const SqliteDb* const db_;
  sqlite3_stmt* const stmt_;
  const std::string sql_;
};

}  // namespace horovodd::daemon
