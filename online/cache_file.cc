// ScheduleCache's file (online/cache.h): opening and checking it, creating
// the table, transactions retried while another process writes, and what
// an error does (a busy file stays on, anything else turns the cache off).
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "online/cache_impl.h"

namespace optpipe {
namespace {

// PRAGMA application_id ("optp") marks the file as optpipe's; user_version
// is the table's format, raised when it changes incompatibly.
constexpr std::int64_t kApplicationId = 0x6f707470;
constexpr std::int64_t kSchemaVersion = 1;

// AUTOINCREMENT: the id of a removed row is never given to another.
constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS schedules (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  structure TEXT NOT NULL,
  buckets TEXT NOT NULL,
  name TEXT NOT NULL,
  problem TEXT NOT NULL,
  schedule TEXT NOT NULL,
  objective REAL NOT NULL,
  scale REAL NOT NULL,
  bound REAL,
  method TEXT NOT NULL,
  termination TEXT NOT NULL,
  solve_seconds REAL,
  version TEXT NOT NULL,
  created TEXT NOT NULL,
  UNIQUE (structure, buckets));
PRAGMA application_id = 1869640816;
PRAGMA user_version = 1;)";

// A pause of 5 to 50 ms before trying a busy file again, drawn so that two
// processes that collided do not collide again in step.
void BackOff() {
  thread_local std::minstd_rand rng(
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count() ^
                            std::hash<std::thread::id>()(std::this_thread::get_id())));
  std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 46));
}

}  // namespace

bool ReadEntry(const sql::Statement& st, bool with_json, CacheEntry& e) {
  e.id = st.Int(0);
  e.key.structure = st.Text(1);
  StatusOr<std::vector<int>> b = ParseBuckets(st.Text(2));
  if (!b.ok()) return false;
  e.key.buckets = std::move(*b);
  e.objective = st.Real(3);
  e.scale = st.Real(4);
  e.bound = st.OptionalReal(5);
  e.method = st.Text(6);
  e.termination = st.Text(7);
  e.solve_seconds = st.OptionalReal(8);
  e.version = st.Text(9);
  e.created = st.Text(10);
  e.name = st.Text(11);
  if (with_json) {
    e.problem_json = st.Text(12);
    e.schedule_json = st.Text(13);
  }
  return true;
}

Status ScheduleCache::Impl::TurnOff(const std::string& why) {
  if (enabled) {
    enabled = false;
    reason = why;
    warning = path.empty() ? why : path + ": " + why;
  }
  return Off();
}

// A busy file is left on (the next call may find it free); anything else
// says the file cannot serve as a cache.
Status ScheduleCache::Impl::Fail(const sql::Result& r) {
  if (r.busy()) {
    return InvalidArgument(path + ": busy for " + std::to_string(opt.busy_timeout_ms) +
                           " ms after " + std::to_string(opt.busy_retries) +
                           " tries: " + r.message);
  }
  return TurnOff(r.message.empty() ? "SQLite error " + std::to_string(r.code) : r.message);
}

sql::Result ScheduleCache::Impl::Retrying(const std::function<sql::Result()>& attempt) {
  for (int i = 0;; ++i) {
    sql::Result r = attempt();
    if (!r.busy() || i >= opt.busy_retries) return r;
    BackOff();
  }
}

// BEGIN IMMEDIATE takes the write lock up front, so that a transaction never
// fails half-way for want of it (WAL would return BUSY without waiting).
sql::Result ScheduleCache::Impl::Transaction(const std::function<sql::Result()>& body) {
  return Retrying([&] {
    sql::Result r = db.Exec("BEGIN IMMEDIATE");
    if (!r.ok()) return r;
    r = body();
    if (r.ok()) r = db.Exec("COMMIT");
    if (!r.ok()) db.Exec("ROLLBACK");
    return r;
  });
}

// The first row of a query, its first `columns` columns as integers.
std::optional<std::vector<std::int64_t>> ScheduleCache::Impl::QueryInts(const std::string& query,
                                                                        int columns,
                                                                        sql::Result& r) {
  std::optional<sql::Statement> st = db.Prepare(query, r);
  if (!st) return std::nullopt;
  const int rc = st->Step();
  if (rc != SQLITE_ROW) {
    r = rc == SQLITE_DONE ? sql::Result{SQLITE_CORRUPT, query + ": no row"} : db.Last();
    return std::nullopt;
  }
  std::vector<std::int64_t> row;
  for (int c = 0; c < columns; ++c) row.push_back(st->Int(c));
  return row;
}

Status ScheduleCache::Impl::Connect() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return InvalidArgument("no file given (and no default: no HOME)");
  if (fs::is_directory(path, ec)) return InvalidArgument("is a directory, not a file");
  const fs::path folder = fs::path(path).parent_path();
  if (!opt.read_only && !folder.empty() && !fs::exists(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return InvalidArgument("cannot create its folder: " + ec.message());
  }
  if (sql::Result r = db.Open(path, opt.read_only, opt.busy_timeout_ms); !r.ok())
    return InvalidArgument(r.message);
  return PrepareSchema();
}

// The first queries read the file's header: garbage, a truncated file or
// another program's database shows here.
Status ScheduleCache::Impl::PrepareSchema() {
  sql::Result r;
  // One statement, so one snapshot: read apart, another process's creating
  // transaction could fall between the header and the table count.
  std::optional<std::vector<std::int64_t>> head;
  r = Retrying([&] {
    sql::Result q;
    head = QueryInts(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)",
        3, q);
    return q;
  });
  if (!r.ok()) return InvalidArgument(r.message);
  const std::int64_t app = (*head)[0], version = (*head)[1], objects = (*head)[2];
  if (app == kApplicationId && version > kSchemaVersion) {
    return InvalidArgument("written by a newer optpipe (cache format " + std::to_string(version) +
                           "; this one reads " + std::to_string(kSchemaVersion) + ")");
  }
  if (app != kApplicationId && objects != 0)
    return InvalidArgument("not an optpipe schedule cache (another program's SQLite database)");
  if (opt.read_only) {
    return app == kApplicationId ? OkStatus()
                                 : InvalidArgument("not an optpipe schedule cache (empty)");
  }
  if (r = db.Exec("PRAGMA synchronous = NORMAL"); !r.ok()) return InvalidArgument(r.message);
  if (app == kApplicationId) return OkStatus();
  // A new file: WAL first (not possible inside a transaction), then the table.
  r = Retrying([&] { return db.Exec("PRAGMA journal_mode = WAL"); });
  if (r.ok()) r = Transaction([&] { return db.Exec(kSchema); });
  return r.ok() ? OkStatus() : InvalidArgument(r.message);
}

}  // namespace optpipe
