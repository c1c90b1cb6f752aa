// How a run stops: the watchdog (no op starting or finishing for watchdog_s),
// the first fault of any lane, and the per-lane trace that says where each stood.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/text_format.h"
#include "runtime/executor_internal.h"

namespace optpipe::runtime::internal {

// Waits until every lane has returned, stopping the run when no op started or
// finished for watchdog_s, or on the caller's stop.
void Iteration::Watch(double watchdog_s) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto poll = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::clamp(watchdog_s / 10, 0.001, 0.1)));
  while (running_ > 0) {
    main_cv_.wait_for(lock, poll);
    if (stopped_ || running_ == 0) continue;
    if (o_.stop && o_.stop->load()) {
      StopLocked(Cancelled("interrupted"));
      continue;
    }
    if (o_.peers) {
      if (std::optional<std::string> why = o_.peers->Aborted()) {
        StopLocked(Internal("stopped because " + *why));
        continue;
      }
    }
    const Clock::time_point now = Clock::now();
    if (now > last_progress_ && Seconds(now - last_progress_) > watchdog_s) {
      StopLocked(Internal(WatchdogMessage(now, watchdog_s)));
    }
  }
}

void Iteration::StopLocked(Status st) {
  if (stopped_) return;
  stopped_ = true;
  stop_time_ = Clock::now();
  first_error_ = std::move(st);
  control_.Stop();
  if (o_.peers && first_error_.message().rfind("stopped because rank ", 0) != 0) {
    o_.peers->Abort(first_error_.message());  // the others stop too, and say why
  }
  for (int r = 0; r < pl_.lanes; ++r) lane_cv_[r].notify_all();
  main_cv_.notify_all();
}

void Iteration::Fail(int r, int op, const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ && IsCancelled(st)) return;
  lanes_[r].kind = LaneKind::kFailed;
  lanes_[r].note = "failed in " + (op >= 0 ? ToString(pl_.space.At(op)) : std::string("?"));
  std::string where = LaneName(pl_, r);
  if (r >= pl_.D && op >= 0) where += " (device " + std::to_string(pl_.device_of[op]) + ")";
  StopLocked(Status(st.code(), where + ": op " + (op >= 0 ? ToString(pl_.space.At(op)) : "?") +
                                   " failed: " + st.message()));
}

std::string Iteration::Waiting(int r) const {
  const LaneState& ls = lanes_[r];
  const std::string op = ls.op >= 0 ? ToString(pl_.space.At(ls.op)) : "?";
  if (ls.edge >= 0) {
    const Edge& e = pl_.edges[ls.edge];
    const std::string from = ToString(pl_.space.At(e.from));
    const std::string dev = "device " + std::to_string(e.from_device);
    if (Remote(pl_, e)) {
      return "waits with " + op + " for the message of " + from + " from rank " +
             std::to_string(e.from_device);
    }
    if (ls.kind == LaneKind::kAwait || arrived_[ls.edge]) {
      return "waits with " + op + " for the transfer of " + from + " from " + dev +
             ", which ended at " + FormatNumber(times_[e.from].end, 3) + " s";
    }
    return "waits with " + op + " for " + from + " (" + LaneName(pl_, e.from_lane) + ")";
  }
  if (ls.kind == LaneKind::kWaitMemory) {
    return "waits with " + op + " for its turn to allocate memory on device " +
           std::to_string(pl_.device_of[ls.op]);
  }
  return "has not started";
}

std::string Iteration::WatchdogMessage(Clock::time_point now, double watchdog_s) const {
  std::ostringstream os;
  os << "watchdog: no op started or finished for " << FormatNumber(watchdog_s, 3) << " s";
  std::vector<std::string> parts;
  for (int r = 0; r < pl_.lanes; ++r) {  // running ops first: they hold the others
    const LaneState& ls = lanes_[r];
    if (ls.kind != LaneKind::kRunning) continue;
    parts.push_back(LaneName(pl_, r) + " is stuck in " + ToString(pl_.space.At(ls.op)) +
                    " (running for " + FormatNumber(Seconds(now - ls.since), 3) + " s, expected " +
                    FormatNumber(pl_.expected_s[ls.op], 3) + " s)");
  }
  for (int r = 0; r < pl_.lanes; ++r) {
    const LaneState& ls = lanes_[r];
    if (ls.kind == LaneKind::kWaitDep || ls.kind == LaneKind::kAwait ||
        ls.kind == LaneKind::kWaitMemory) {
      parts.push_back(LaneName(pl_, r) + " " + Waiting(r));
    }
  }
  const std::size_t shown = std::min<std::size_t>(parts.size(), 4);
  for (std::size_t k = 0; k < shown; ++k) os << (k ? "; " : ": ") << parts[k];
  if (parts.size() > shown) os << "; and " << parts.size() - shown << " more lanes wait";
  return os.str();
}

LaneReport Iteration::Report(int r) const {
  const LaneState& ls = lanes_[r];
  LaneReport rep;
  rep.lane = LaneName(pl_, r);
  rep.ops_done = ls.done;
  rep.ops_total = static_cast<int>(pl_.lane_ops[r].size());
  rep.last_start_s = ls.last_start;
  rep.exit_s = ls.exit;
  rep.state = ls.note.empty() ? "still running" : ls.note;
  return rep;
}

}  // namespace optpipe::runtime::internal
