// Internal to online/: ScheduleCache's state and the helpers its files
// share (cache.cc: lookups and stores; cache_file.cc: opening the file,
// transactions, errors; cache_rows.cc: list, get, remove, import).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "online/cache.h"
#include "online/sqlite_db.h"

namespace optpipe {

inline constexpr const char* kColumns =
    "id, structure, buckets, objective, scale, bound, method, termination, solve_seconds, "
    "version, created, name";

// One row from a statement that selected kColumns (and then, with
// `with_json`, problem and schedule); false when its buckets do not parse.
bool ReadEntry(const sql::Statement& st, bool with_json, CacheEntry& e);

struct ScheduleCache::Impl {
  std::string path;
  CacheOptions opt;
  sql::Db db;
  bool enabled = true;
  std::string reason;                  // why the cache is off
  std::optional<std::string> warning;  // the same, until taken
  std::mutex mu;                       // one call at a time on the connection

  Status Connect();
  Status PrepareSchema();
  std::optional<std::vector<std::int64_t>> QueryInts(const std::string& query, int columns,
                                                     sql::Result& r);
  sql::Result Retrying(const std::function<sql::Result()>& attempt);
  sql::Result Transaction(const std::function<sql::Result()>& body);
  Status Fail(const sql::Result& r);
  Status TurnOff(const std::string& why);
  Status Off() const { return InvalidArgument(path + ": the cache is off: " + reason); }
  StatusOr<std::optional<CacheEntry>> Row(const std::string& where,
                                          const std::function<void(sql::Statement&)>& bind,
                                          bool with_json);
  StatusOr<std::optional<CacheEntry>> KeyRow(const CacheKey& k, bool with_json);
  StatusOr<std::optional<CacheEntry>> IdRow(std::int64_t id, bool with_json);
  StatusOr<std::vector<std::pair<int, std::int64_t>>> NearRows(const CacheKey& k);
  bool TryRow(const Problem& p, std::int64_t id, int distance, CacheLookup& out);
  StatusOr<CacheStored> Upsert(const Problem& p, const CacheKey& k, const TimedSchedule& t,
                               double objective);
};

}  // namespace optpipe
