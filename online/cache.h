// ScheduleCache: solved schedules kept in an SQLite file, so that the next
// job with a similar problem starts from one instead of from nothing.
//
// Rows are filed under a CacheKey (online/cache_key.h: the problem's
// structure plus its proportions in 4% buckets; docs/cache.md). A lookup
// finds, among the rows of the problem's structure, the one of its key (a
// hit) or else the nearest within `near_radius` buckets (a near hit, for a
// warm start), and re-times that row's orders on the problem itself:
// Simulate, then CheckSchedule. A row whose orders do not fit this problem is
// passed over, so every schedule a lookup returns is valid here, and never
// trusted from the file.
//
// Several processes may share one file (the ranks and jobs of one machine):
// WAL journal, a busy timeout, every store one transaction, retried when the
// file is busy. WAL needs shared memory, so not a network file system.
//
// A file that cannot be used (garbage, truncated, a directory, not writable,
// another program's database, a newer format) turns the cache off: the call
// that meets it fails softly (a miss, a store refused), TakeWarning() returns
// the reason once for the caller to print, and every later call is a miss.
// The library prints nothing and reads no environment variable.
//
// Thread safety: the calls on one ScheduleCache take turns (a mutex around its
// connection); threads and processes may also each open their own.
//
//   ScheduleCache cache = ScheduleCache::Open(path);
//   CacheLookup found = cache.Lookup(problem);
//   if (std::optional<std::string> w = cache.TakeWarning()) std::cerr << *w << "\n";
//   if (found.outcome == CacheOutcome::kHit) Use(found.schedule, found.sim);
//   else { /* solve, warm-started from found.schedule when kNear */ cache.Store(problem, t); }
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "online/cache_key.h"

namespace optpipe {

struct CacheOptions {
  // A near hit differs by at most this many buckets in every proportion
  // (8: every one within a factor 1.04^8 = 1.37).
  int near_radius = 8;
  // Rows tried, nearest first, before a lookup gives up (each is parsed,
  // simulated and checked).
  int max_candidates = 8;
  // How long one SQLite call waits for another process's lock, and how many
  // times a store that still found the file busy is tried again.
  int busy_timeout_ms = 5000;
  int busy_retries = 4;
  // Open for lookups only: nothing is created or written (import's source).
  bool read_only = false;
};

// One row. `problem_json` and `schedule_json` only from Get.
struct CacheEntry {
  std::int64_t id = 0;
  CacheKey key;
  double objective = 0;  // the schedule's, in its problem's units
  double scale = 0;      // that problem's LargestStageTime: rows compare objective / scale
  std::optional<double> bound;
  std::string method;       // what found it ("auto", "milp", ...)
  std::string termination;  // how its solve ended ("optimal", "time_limit", ...), may be empty
  std::optional<double> solve_seconds;
  std::string version;  // the optpipe that stored it
  std::string created;  // UTC, ISO 8601: "2024-12-03T13:54:38Z"
  std::string name;     // the problem's name, for people
  std::string problem_json, schedule_json;
};

enum class CacheOutcome { kMiss, kNear, kHit };
const char* ToString(CacheOutcome o);

struct CacheLookup {
  CacheOutcome outcome = CacheOutcome::kMiss;
  int distance = 0;  // buckets between the problem's key and the row's (0 for a hit)
  CacheEntry entry;  // the row used, without its JSON
  // The row was stored for this very problem (the same optpipe-problem/1
  // text): its bound and termination hold here as well.
  bool same_problem = false;
  Schedule schedule;    // the row's orders re-timed on the problem (simulated and checked)
  SimResult sim;        // its times
  int passed_over = 0;  // rows tried first whose orders do not fit this problem
};

enum class StoreOutcome { kAdded, kReplaced, kKept };
struct CacheStored {
  std::int64_t id = 0;
  StoreOutcome outcome = StoreOutcome::kAdded;  // kKept: the row's schedule was as good or better
};

struct ImportSummary {
  int added = 0, replaced = 0, kept = 0, rejected = 0;
  std::vector<std::string> problems;  // why each rejected row was
};

class ScheduleCache {
 public:
  // Opens the file, creating it and its folder when missing. Never fails: a
  // file that cannot be used leaves the cache off (enabled() false) with the
  // reason in TakeWarning().
  static ScheduleCache Open(const std::string& path, const CacheOptions& opt = {});

  ScheduleCache(ScheduleCache&&) noexcept;
  ScheduleCache& operator=(ScheduleCache&&) noexcept;
  ~ScheduleCache();

  const std::string& path() const;
  bool enabled() const;
  // The reason the cache went off, the first time it is asked; then nullopt.
  std::optional<std::string> TakeWarning();

  // A hit, a near hit or a miss for a problem that passes Validate.
  CacheLookup Lookup(const Problem& p);

  // Files a schedule of `p` under p's key, after checking it
  // (kInvalidArgument when it is not valid for p). An existing row of the key
  // is replaced only by a better schedule: a lower objective / scale.
  StatusOr<CacheStored> Store(const Problem& p, const TimedSchedule& t);

  StatusOr<std::vector<CacheEntry>> List();                     // by id, without JSON
  StatusOr<CacheEntry> Get(std::int64_t id);                    // kNotFound if none
  StatusOr<std::optional<CacheEntry>> Find(const CacheKey& k);  // the key's row, with JSON
  Status Remove(std::int64_t id);                               // kNotFound if none

  // Every row of another cache file, each parsed, checked and stored as by
  // Store (rows that fail are counted, not fatal).
  StatusOr<ImportSummary> Import(const std::string& other_path);

 private:
  struct Impl;
  explicit ScheduleCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The schedule file's orders re-timed on `p`: every op held at its start
// scaled by LargestStageTime(p) / `scale` (so that a file of p itself comes
// back unchanged), and as soon as possible without holds; the valid one with
// the lower objective, held on a tie. kInfeasible when neither simulates or
// passes the checker.
struct Retimed {
  Schedule schedule;
  SimResult sim;
};
StatusOr<Retimed> Retime(const Problem& p, const TimedSchedule& t, double scale);

// The default file: $OPTPIPE_CACHE, else $XDG_CACHE_HOME/optpipe/schedules.db,
// else $HOME/.cache/optpipe/schedules.db; the caller passes the variables
// ("" for unset). Empty when all three are.
std::string DefaultCachePath(const std::string& optpipe_cache, const std::string& xdg_cache_home,
                             const std::string& home);

}  // namespace optpipe
