#include "online/cache.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include "core/checker.h"
#include "core/format.h"
#include "core/version.h"
#include "online/cache_impl.h"

namespace optpipe {
namespace {

std::string NowUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Objectives of problems in other units compare as multiples of their largest stage time.
double Relative(double objective, double scale) {
  return scale > 0 ? objective / scale : objective;
}

// Whether the row was stored for `p` itself (its name aside).
bool SameProblem(const Problem& p, const std::string& problem_json) {
  StatusOr<Problem> q = ParseProblem(problem_json);
  if (!q.ok()) return false;
  q->name = p.name;
  return *q == p;
}

}  // namespace

const char* ToString(CacheOutcome o) {
  switch (o) {
    case CacheOutcome::kHit:
      return "hit";
    case CacheOutcome::kNear:
      return "near";
    case CacheOutcome::kMiss:
      return "miss";
  }
  return "miss";
}

// The row `where` selects (one or none), its parameters bound by `bind`.
StatusOr<std::optional<CacheEntry>> ScheduleCache::Impl::Row(
    const std::string& where, const std::function<void(sql::Statement&)>& bind, bool with_json) {
  sql::Result r;
  const std::string cols = std::string(kColumns) + (with_json ? ", problem, schedule" : "");
  std::optional<sql::Statement> st = db.Prepare("SELECT " + cols + " FROM schedules " + where, r);
  if (!st) return Fail(r);
  bind(*st);
  const int rc = st->Step();
  if (rc == SQLITE_DONE) return std::optional<CacheEntry>();
  if (rc != SQLITE_ROW) return Fail(db.Last());
  CacheEntry e;
  if (!ReadEntry(*st, with_json, e)) {
    return TurnOff("row " + std::to_string(e.id) + ": its buckets are not integers");
  }
  return std::optional<CacheEntry>(std::move(e));
}

StatusOr<std::optional<CacheEntry>> ScheduleCache::Impl::KeyRow(const CacheKey& k, bool with_json) {
  const std::string buckets = BucketsText(k.buckets);
  return Row(
      "WHERE structure = ?1 AND buckets = ?2",
      [&](sql::Statement& st) { st.Bind(k.structure).Bind(buckets); }, with_json);
}

StatusOr<std::optional<CacheEntry>> ScheduleCache::Impl::IdRow(std::int64_t id, bool with_json) {
  return Row(
      "WHERE id = ?1", [&](sql::Statement& st) { st.Bind(id); }, with_json);
}

// (distance, id) of the rows of k's structure within the radius, nearest
// first (ties: the older row), k's own row excluded.
StatusOr<std::vector<std::pair<int, std::int64_t>>> ScheduleCache::Impl::NearRows(
    const CacheKey& k) {
  sql::Result r;
  std::optional<sql::Statement> st =
      db.Prepare("SELECT id, buckets FROM schedules WHERE structure = ?1", r);
  if (!st) return Fail(r);
  st->Bind(k.structure);
  std::vector<std::pair<int, std::int64_t>> near;
  int rc;
  while ((rc = st->Step()) == SQLITE_ROW) {
    StatusOr<std::vector<int>> b = ParseBuckets(st->Text(1));
    const int d = b.ok() ? KeyDistance(k.buckets, *b) : -1;
    if (d > 0 && d <= opt.near_radius) near.emplace_back(d, st->Int(0));
  }
  if (rc != SQLITE_DONE) return Fail(db.Last());
  std::sort(near.begin(), near.end());
  return near;
}

// Re-times row `id` on p; true (and `out` filled) when it is valid there.
bool ScheduleCache::Impl::TryRow(const Problem& p, std::int64_t id, int distance,
                                 CacheLookup& out) {
  StatusOr<std::optional<CacheEntry>> row = IdRow(id, true);
  if (!row.ok() || !*row) return false;
  CacheEntry& e = **row;
  StatusOr<TimedSchedule> t = ParseTimedSchedule(e.schedule_json);
  StatusOr<Retimed> re = t.ok() ? Retime(p, *t, e.scale) : StatusOr<Retimed>(t.status());
  if (!re.ok()) {
    ++out.passed_over;
    return false;
  }
  out.outcome = distance == 0 ? CacheOutcome::kHit : CacheOutcome::kNear;
  out.distance = distance;
  out.same_problem = distance == 0 && SameProblem(p, e.problem_json);
  out.schedule = std::move(re->schedule);
  out.sim = std::move(re->sim);
  e.problem_json.clear();
  e.schedule_json.clear();
  out.entry = std::move(e);
  return true;
}

StatusOr<CacheStored> ScheduleCache::Impl::Upsert(const Problem& p, const CacheKey& k,
                                                  const TimedSchedule& t, double objective) {
  const double scale = LargestStageTime(p);
  const std::string buckets = BucketsText(k.buckets);
  const std::string problem_json = ToJson(p), schedule_json = ToJson(t);
  CacheStored out;
  const sql::Result r = Transaction([&]() -> sql::Result {
    sql::Result e;
    std::optional<sql::Statement> find = db.Prepare(
        "SELECT id, objective, scale FROM schedules WHERE structure = ?1 AND buckets = ?2", e);
    if (!find) return e;
    find->Bind(k.structure).Bind(buckets);
    const int rc = find->Step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.Last();
    const bool exists = rc == SQLITE_ROW;
    // Better by more than rounding error, so that storing a row again keeps it.
    if (exists &&
        !(Relative(objective, scale) < Relative(find->Real(1), find->Real(2)) * (1 - 1e-9))) {
      out = {find->Int(0), StoreOutcome::kKept};
      return {};
    }
    // A better schedule takes the row's place under the same id.
    const std::int64_t id = exists ? find->Int(0) : 0;
    std::optional<sql::Statement> put = db.Prepare(
        exists ? "UPDATE schedules SET structure = ?1, buckets = ?2, problem = ?3, schedule = ?4, "
                 "objective = ?5, scale = ?6, bound = ?7, method = ?8, termination = ?9, "
                 "solve_seconds = ?10, version = ?11, created = ?12, name = ?13 WHERE id = ?14"
               : "INSERT INTO schedules (structure, buckets, problem, schedule, objective, scale, "
                 "bound, method, termination, solve_seconds, version, created, name) VALUES "
                 "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        e);
    if (!put) return e;
    put->Bind(k.structure).Bind(buckets).Bind(problem_json).Bind(schedule_json).Bind(objective);
    put->Bind(scale).Bind(t.info.bound).Bind(t.method).Bind(t.info.termination.value_or(""));
    put->Bind(t.info.solve_seconds).Bind(std::string(Version())).Bind(NowUtc()).Bind(p.name);
    if (exists) put->Bind(id);
    if (put->Step() != SQLITE_DONE) return db.Last();
    out = exists ? CacheStored{id, StoreOutcome::kReplaced}
                 : CacheStored{db.LastInsertId(), StoreOutcome::kAdded};
    return {};
  });
  if (!r.ok()) return Fail(r);
  return out;
}

ScheduleCache::ScheduleCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScheduleCache::ScheduleCache(ScheduleCache&&) noexcept = default;
ScheduleCache& ScheduleCache::operator=(ScheduleCache&&) noexcept = default;
ScheduleCache::~ScheduleCache() = default;

ScheduleCache ScheduleCache::Open(const std::string& path, const CacheOptions& opt) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->opt = opt;
  if (Status st = impl->Connect(); !st.ok()) impl->TurnOff(st.message());
  return ScheduleCache(std::move(impl));
}

const std::string& ScheduleCache::path() const { return impl_->path; }

bool ScheduleCache::enabled() const {
  std::lock_guard lock(impl_->mu);
  return impl_->enabled;
}

std::optional<std::string> ScheduleCache::TakeWarning() {
  std::lock_guard lock(impl_->mu);
  return std::exchange(impl_->warning, std::nullopt);
}

// The key's own row first, then the nearest within the radius: the first
// whose orders re-time validly on p. A file error ends the lookup (a miss).
CacheLookup ScheduleCache::Lookup(const Problem& p) {
  std::lock_guard lock(impl_->mu);
  CacheLookup out;
  if (!impl_->enabled) return out;
  const CacheKey k = MakeCacheKey(p);
  StatusOr<std::optional<CacheEntry>> exact = impl_->KeyRow(k, false);
  if (!exact.ok()) return out;
  if (*exact && impl_->TryRow(p, (*exact)->id, 0, out)) return out;
  if (!impl_->enabled) return out;
  StatusOr<std::vector<std::pair<int, std::int64_t>>> near = impl_->NearRows(k);
  if (!near.ok()) return out;
  const int tries = std::min<int>(impl_->opt.max_candidates, static_cast<int>(near->size()));
  for (int i = 0; i < tries && impl_->enabled; ++i) {
    if (impl_->TryRow(p, (*near)[i].second, (*near)[i].first, out)) return out;
  }
  return out;
}

StatusOr<CacheStored> ScheduleCache::Store(const Problem& p, const TimedSchedule& t) {
  const CheckReport rep = CheckSchedule(p, t);
  if (!rep.valid()) {
    return InvalidArgument("schedule: not valid for problem '" + p.name +
                           "': " + rep.errors.front());
  }
  std::lock_guard lock(impl_->mu);
  if (!impl_->enabled) return impl_->Off();
  return impl_->Upsert(p, MakeCacheKey(p), t, rep.objective);
}

}  // namespace optpipe
