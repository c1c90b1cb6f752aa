// ScheduleCache's rows for people and other files (online/cache.h): list,
// get, find, remove, import.
#include "core/format.h"
#include "online/cache_impl.h"

namespace optpipe {

StatusOr<std::vector<CacheEntry>> ScheduleCache::List() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->enabled) return impl_->Off();
  sql::Result r;
  std::optional<sql::Statement> st =
      impl_->db.Prepare("SELECT " + std::string(kColumns) + " FROM schedules ORDER BY id", r);
  if (!st) return impl_->Fail(r);
  std::vector<CacheEntry> rows;
  int rc;
  while ((rc = st->Step()) == SQLITE_ROW) {
    CacheEntry e;
    if (!ReadEntry(*st, false, e)) {
      return impl_->TurnOff("row " + std::to_string(e.id) + ": its buckets are not integers");
    }
    rows.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return impl_->Fail(impl_->db.Last());
  return rows;
}

StatusOr<CacheEntry> ScheduleCache::Get(std::int64_t id) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->enabled) return impl_->Off();
  StatusOr<std::optional<CacheEntry>> row = impl_->IdRow(id, true);
  if (!row.ok()) return row.status();
  if (!*row) return NotFound(impl_->path + ": no row " + std::to_string(id));
  return std::move(**row);
}

StatusOr<std::optional<CacheEntry>> ScheduleCache::Find(const CacheKey& k) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->enabled) return impl_->Off();
  return impl_->KeyRow(k, true);
}

Status ScheduleCache::Remove(std::int64_t id) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->enabled) return impl_->Off();
  int removed = 0;
  const sql::Result r = impl_->Transaction([&]() -> sql::Result {
    sql::Result e;
    std::optional<sql::Statement> st = impl_->db.Prepare("DELETE FROM schedules WHERE id = ?1", e);
    if (!st) return e;
    st->Bind(id);
    if (st->Step() != SQLITE_DONE) return impl_->db.Last();
    removed = impl_->db.Changes();
    return {};
  });
  if (!r.ok()) return impl_->Fail(r);
  if (removed == 0) return NotFound(impl_->path + ": no row " + std::to_string(id));
  return OkStatus();
}

StatusOr<ImportSummary> ScheduleCache::Import(const std::string& other_path) {
  CacheOptions ro = impl_->opt;
  ro.read_only = true;
  ScheduleCache other = Open(other_path, ro);
  StatusOr<std::vector<CacheEntry>> rows = other.List();
  if (!rows.ok()) return InvalidArgument(other.TakeWarning().value_or(rows.status().message()));
  ImportSummary sum;
  for (const CacheEntry& head : *rows) {
    StatusOr<CacheEntry> e = other.Get(head.id);
    if (!e.ok()) return e.status();
    StatusOr<Problem> p = ParseProblem(e->problem_json);
    StatusOr<TimedSchedule> t =
        p.ok() ? ParseTimedSchedule(e->schedule_json) : StatusOr<TimedSchedule>(p.status());
    Status valid = p.ok() ? Validate(*p) : p.status();
    StatusOr<CacheStored> put =
        t.ok() && valid.ok() ? Store(*p, *t) : StatusOr<CacheStored>(t.ok() ? valid : t.status());
    if (put.ok()) {
      int& count = put->outcome == StoreOutcome::kAdded      ? sum.added
                   : put->outcome == StoreOutcome::kReplaced ? sum.replaced
                                                             : sum.kept;
      ++count;
    } else if (!enabled()) {
      return put.status();  // this cache failed, not the row
    } else {
      ++sum.rejected;
      sum.problems.push_back("row " + std::to_string(head.id) + ": " + put.status().message());
    }
  }
  return sum;
}

}  // namespace optpipe
