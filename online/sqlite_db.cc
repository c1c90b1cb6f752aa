#include "online/sqlite_db.h"

#include <utility>

namespace optpipe::sql {

Statement& Statement::operator=(Statement&& o) noexcept {
  std::swap(st_, o.st_);
  std::swap(next_, o.next_);
  return *this;
}

Statement::~Statement() { sqlite3_finalize(st_); }

Statement& Statement::Bind(const std::string& text) {
  sqlite3_bind_text(st_, next_++, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::Bind(double v) {
  sqlite3_bind_double(st_, next_++, v);
  return *this;
}

Statement& Statement::Bind(std::int64_t v) {
  sqlite3_bind_int64(st_, next_++, v);
  return *this;
}

Statement& Statement::Bind(const std::optional<double>& v) {
  if (v) return Bind(*v);
  sqlite3_bind_null(st_, next_++);
  return *this;
}

int Statement::Step() { return sqlite3_step(st_); }

std::string Statement::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<std::size_t>(sqlite3_column_bytes(st_, col)))
           : std::string();
}

double Statement::Real(int col) const { return sqlite3_column_double(st_, col); }

std::int64_t Statement::Int(int col) const { return sqlite3_column_int64(st_, col); }

std::optional<double> Statement::OptionalReal(int col) const {
  if (sqlite3_column_type(st_, col) == SQLITE_NULL) return std::nullopt;
  return Real(col);
}

Db& Db::operator=(Db&& o) noexcept {
  std::swap(db_, o.db_);
  return *this;
}

Db::~Db() { sqlite3_close_v2(db_); }

Result Db::Open(const std::string& path, bool read_only, int busy_timeout_ms) {
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    Result r{rc, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)};
    sqlite3_close_v2(db_);
    db_ = nullptr;
    return r;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  return {};
}

Result Db::Exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  Result r{rc, message ? message : ""};
  sqlite3_free(message);
  return r;
}

std::optional<Statement> Db::Prepare(const std::string& sql, Result& error) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) {
    error = {rc, sqlite3_errmsg(db_)};
    sqlite3_finalize(st);
    return std::nullopt;
  }
  return Statement(st);
}

Result Db::Last() const { return {sqlite3_extended_errcode(db_), sqlite3_errmsg(db_)}; }

std::int64_t Db::LastInsertId() const { return sqlite3_last_insert_rowid(db_); }

int Db::Changes() const { return sqlite3_changes(db_); }

}  // namespace optpipe::sql
