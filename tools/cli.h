// Shared pieces of the optpipe CLI: exit codes, error reporting, and the
// registration hook every subcommand file provides.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/format.h"
#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"
#include "exact/solve.h"
#include "heuristics/method.h"
#include "online/cache.h"

namespace optpipe::cli {

// The same for every subcommand; 130 (128 + SIGINT) after a Ctrl-C that the
// command answered by stopping early with what it had.
enum Exit { kOk = 0, kInvalid = 1, kBadInput = 2, kNotApplicable = 3, kInterrupted = 130 };

// Ctrl-C: main() installs a SIGINT handler. The first Ctrl-C sets this flag,
// which searches and runs poll (SolveOptions::stop, ExecutorOptions::stop):
// they end as their clock would, and the command writes what it has and
// exits kInterrupted. A second Ctrl-C quits at once.
const std::atomic<bool>* InterruptFlag();
bool Interrupted();
void InstallInterruptHandler();

// Number checks for options whose messages say what is wanted (CLI11's own
// print the whole range of a double): "--time-limit: must be a number > 0, not 0".
extern const CLI::Validator kPositive;     // > 0
extern const CLI::Validator kNonNegative;  // >= 0

// Memory: the CLI refuses, before reading further, a problem whose ops
// would need more than --max-memory (GiB; default: what the machine has
// available), at kBytesPerOp each: the most any command was measured to
// use per op (reading a schedule file's JSON: ~1 KB an op) with room to
// spare. A schedule file likewise, at kBytesPerScheduleByte.
inline constexpr double kBytesPerOp = 2048;
inline constexpr double kBytesPerScheduleByte = 16;
void SetMaxMemoryGiB(double gib);  // 0: the machine's available memory
SizeLimit ProblemSizeLimit();
StatusOr<Problem> LoadProblemFor(const std::string& path);
StatusOr<TimedSchedule> LoadScheduleFor(const std::string& path);

// Progress and summaries on stderr, silenced by --quiet (errors and
// warnings are not): Progress() is std::cerr or a stream that drops all,
// ProgressLog() a log sink for SolveOptions::log and BoundOptions::log.
void SetQuiet(bool quiet);
// Errors name this process's rank (one process per device under mpirun).
void SetRank(int rank);
std::ostream& Progress();
std::function<void(const std::string&)> ProgressLog();

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated option.
std::vector<std::string> SplitList(const std::string& s);

// For commands that picture a timed schedule as recorded (draw, show): a
// warning on stderr when it breaks a rule of `p` (see `optpipe validate`),
// naming the problem the file was made for when that is another.
void WarnIfInvalid(const Problem& p, const TimedSchedule& t, const std::string& path);

// Amounts for people: "[41.5, 41, 38.4]" (6 significant digits, no float noise).
std::string Brief(const std::vector<double>& v);

int ExitFor(const Status& st);
// For a solve that found no schedule (kInfeasible, kNotApplicable): prints
// why, as Fail does, and returns kNotApplicable (kInterrupted after a Ctrl-C).
int FailNoSchedule(const SolveResult& r);
// Prints "optpipe: <message>" on stderr and returns the exit code for it
// (kInterrupted after a Ctrl-C).
int Fail(const Status& st);

// A subcommand adds itself to `app` and returns what runs it once parsed.
struct Command {
  CLI::App* sub;
  std::function<int()> run;
};
Command AddSchedule(CLI::App& app);   // tools/cmd_schedule.cc
Command AddValidate(CLI::App& app);   // tools/cmd_validate.cc
Command AddBound(CLI::App& app);      // tools/cmd_bound.cc
Command AddMethods(CLI::App& app);    // tools/cmd_methods.cc
Command AddDraw(CLI::App& app);       // tools/cmd_draw.cc
Command AddShow(CLI::App& app);       // tools/cmd_show.cc
Command AddImportCsv(CLI::App& app);  // tools/cmd_import_csv.cc
Command AddBench(CLI::App& app);      // tools/cmd_bench.cc
Command AddRun(CLI::App& app);        // tools/cmd_run.cc
Command AddPlan(CLI::App& app);       // tools/cmd_plan.cc
Command AddCache(CLI::App& app);      // tools/cmd_cache.cc

// The schedule cache's file (--cache FILE): `given`, else $OPTPIPE_CACHE, else
// $XDG_CACHE_HOME/optpipe/schedules.db, else ~/.cache/optpipe/schedules.db.
std::string CacheFile(const std::string& given);
// Says on stderr, once, why the cache went off; true when it did just now.
bool WarnIfCacheOff(ScheduleCache& cache);

// --threads, --seed and --evaluations, for subcommands that run methods.
void AddSearchFlags(CLI::App* sub, SolveOptions& opt);

}  // namespace optpipe::cli
