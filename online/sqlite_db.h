// Internal to online/: a thin owner of SQLite handles, so that the cache's
// code reads as queries and every failure carries SQLite's code and message.
// No header outside online/*.cc includes it.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

namespace optpipe::sql {

// An SQLite result code with its message; ok() for SQLITE_OK, _ROW and _DONE.
struct Result {
  int code = SQLITE_OK;
  std::string message;
  bool ok() const { return code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE; }
  // Another connection holds the lock: worth trying again, not a broken file.
  bool busy() const {
    const int primary = code & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  }
};

class Statement {
 public:
  Statement() = default;
  Statement(Statement&& o) noexcept : st_(o.st_) { o.st_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameters ?1, ?2, ... in order.
  Statement& Bind(const std::string& text);
  Statement& Bind(double v);
  Statement& Bind(std::int64_t v);
  Statement& Bind(const std::optional<double>& v);

  // SQLITE_ROW while there are rows, SQLITE_DONE at the end, else an error.
  int Step();
  std::string Text(int col) const;
  double Real(int col) const;
  std::int64_t Int(int col) const;
  std::optional<double> OptionalReal(int col) const;

 private:
  friend class Db;
  explicit Statement(sqlite3_stmt* st) : st_(st) {}
  sqlite3_stmt* st_ = nullptr;
  int next_ = 1;
};

class Db {
 public:
  Db() = default;
  Db(Db&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  Result Open(const std::string& path, bool read_only, int busy_timeout_ms);
  bool open() const { return db_ != nullptr; }
  // Runs statements that return nothing the caller needs.
  Result Exec(const std::string& sql);
  // A prepared statement, or nullopt with `error` set.
  std::optional<Statement> Prepare(const std::string& sql, Result& error);
  // The code and message of the last call that failed (after a Step).
  Result Last() const;
  std::int64_t LastInsertId() const;
  int Changes() const;

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace optpipe::sql
