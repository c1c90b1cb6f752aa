// Reading and writing the two public file formats (docs/FORMAT.md):
// optpipe-problem/1 and optpipe-schedule/1, as JSON.
//
// Parsing checks types and values and names the offending field in its error
// ("stage_time.f: expected a number or an array of 4 numbers"); an unknown
// field in a problem is an error, while a schedule may carry extra fields.
//
//   StatusOr<Problem> p = LoadProblem("case.json");
//   std::string text = ToJson(ToTimed(*p, sched, sim));
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"

namespace optpipe {

// What reading a problem may size: one with more ops (OpCount, offload
// counted) is refused before any array is made from its counts. `why` says
// where the limit comes from, for the message ("12 GiB of memory at ...").
struct SizeLimit {
  std::int64_t max_ops = kMaxOpSlots;
  std::string why;
};

StatusOr<Problem> ParseProblem(const std::string& json_text, const SizeLimit& limit = {});
// The same check for a problem made another way (the planner's): the
// message names the counts, the ops and where the limit comes from.
Status CheckSize(const Problem& p, const SizeLimit& limit);
StatusOr<TimedSchedule> ParseTimedSchedule(const std::string& json_text);

// Loading adds the path to every message; a problem without "name" is named
// after its file.
StatusOr<Problem> LoadProblem(const std::string& path, const SizeLimit& limit = {});
StatusOr<TimedSchedule> LoadTimedSchedule(const std::string& path);

// Arrays whose entries are all equal are written as one number.
std::string ToJson(const Problem& p);
std::string ToJson(const TimedSchedule& t);

StatusOr<std::string> ReadFile(const std::string& path);
// A file is written to a temporary beside it and renamed over it once
// whole: a write that fails or is killed leaves the previous file intact.
// A device or pipe (/dev/stdout) is written in place.
Status WriteFile(const std::string& path, const std::string& content);
// The same for a writer that takes a path (a library that writes by name):
// `write(to)` writes the whole file at `to` and says whether it worked.
Status WriteFileWith(const std::string& path,
                     const std::function<bool(const std::string& to)>& write);

}  // namespace optpipe
