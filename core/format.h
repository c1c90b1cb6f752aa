// Reading and writing the two public file formats (FORMAT.md):
// optpipe-problem/1 and optpipe-schedule/1, as JSON.
//
// Parsing checks types and values and names the offending field in its error
// ("stage_time.f: expected a number or an array of 4 numbers"); an unknown
// field in a problem is an error, while a schedule may carry extra fields.
//
//   StatusOr<Problem> p = LoadProblem("case.json");
//   std::string text = ToJson(ToTimed(*p, sched, sim));
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"

namespace optpipe {

StatusOr<Problem> ParseProblem(const std::string& json_text);
StatusOr<TimedSchedule> ParseTimedSchedule(const std::string& json_text);

// Loading adds the path to every message; a problem without "name" is named
// after its file.
StatusOr<Problem> LoadProblem(const std::string& path);
StatusOr<TimedSchedule> LoadTimedSchedule(const std::string& path);

// Arrays whose entries are all equal are written as one number.
std::string ToJson(const Problem& p);
std::string ToJson(const TimedSchedule& t);

StatusOr<std::string> ReadFile(const std::string& path);
Status WriteFile(const std::string& path, const std::string& content);

}  // namespace optpipe
