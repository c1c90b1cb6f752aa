// optpipe cache list|show|remove|import: the schedule cache's rows
// (online/cache.h, docs/cache.md), and the --cache file of every command.
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/text_format.h"
#include "core/version.h"
#include "online/cache.h"
#include "tools/cli.h"

namespace optpipe::cli {

std::string CacheFile(const std::string& given) {
  if (!given.empty()) return given;
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  return DefaultCachePath(env("OPTPIPE_CACHE"), env("XDG_CACHE_HOME"), env("HOME"));
}

bool WarnIfCacheOff(ScheduleCache& cache) {
  std::optional<std::string> why = cache.TakeWarning();
  if (why) std::cerr << "optpipe: warning: cache: " << *why << "; going on without it\n";
  return why.has_value();
}

namespace {

struct Args {
  std::string cache;  // --cache FILE; empty: the default
  bool json = false;
  std::string show, out, problem_out;
  std::vector<std::int64_t> remove;
  std::vector<std::string> import;
};

// The structure without its format tag, for a table.
std::string Structure(const CacheKey& k) {
  const std::size_t space = k.structure.find(' ');
  return space == std::string::npos ? k.structure : k.structure.substr(space + 1);
}

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json ToJsonValue(const CacheEntry& e) {
  nlohmann::json j = {{"id", e.id},
                      {"name", e.name},
                      {"key", ToString(e.key)},
                      {"structure", e.key.structure},
                      {"buckets", e.key.buckets},
                      {"objective", e.objective},
                      {"scale", e.scale},
                      {"bound", Optional(e.bound)},
                      {"method", e.method},
                      {"termination", e.termination},
                      {"solve_seconds", Optional(e.solve_seconds)},
                      {"version", e.version},
                      {"created", e.created}};
  if (!e.problem_json.empty()) j["problem"] = nlohmann::json::parse(e.problem_json, nullptr, false);
  if (!e.schedule_json.empty())
    j["schedule"] = nlohmann::json::parse(e.schedule_json, nullptr, false);
  return j;
}

// The file, open; nullopt (after saying why, exit code in `rc`) when it cannot serve.
std::optional<ScheduleCache> OpenOrFail(const Args& a, int& rc) {
  ScheduleCache cache = ScheduleCache::Open(CacheFile(a.cache));
  if (cache.enabled()) return cache;
  rc = Fail(InvalidArgument("cache: " + cache.TakeWarning().value_or(cache.path())));
  return std::nullopt;
}

int List(ScheduleCache& cache, const Args& a) {
  StatusOr<std::vector<CacheEntry>> rows = cache.List();
  if (!rows.ok()) return Fail(rows.status());
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const CacheEntry& e : *rows) out.push_back(ToJsonValue(e));
    std::cout << nlohmann::json{{"format", "optpipe-cache-list/1"},
                                {"generator", Generator()},
                                {"cache", cache.path()},
                                {"rows", out}}
                     .dump(1)
              << "\n";
    return kOk;
  }
  Progress() << "optpipe: " << cache.path() << ": " << rows->size() << " schedule(s)\n";
  std::cout << std::left << std::setw(5) << "ID" << std::setw(20) << "PROBLEM" << std::setw(11)
            << "OBJECTIVE" << std::setw(12) << "METHOD" << std::setw(22) << "STORED"
            << "STRUCTURE\n";
  for (const CacheEntry& e : *rows) {
    std::cout << std::setw(5) << e.id << std::setw(20) << e.name << std::setw(11)
              << FormatNumber(e.objective) << std::setw(12) << e.method << std::setw(22)
              << e.created << Structure(e.key) << "\n";
  }
  return kOk;
}

// ID, a key as `list --json` prints it, or a problem file (its key's row).
StatusOr<CacheEntry> Select(ScheduleCache& cache, const std::string& what) {
  char* end = nullptr;
  const long long id = std::strtoll(what.c_str(), &end, 10);
  if (!what.empty() && *end == '\0') return cache.Get(id);
  StatusOr<CacheKey> key = ParseCacheKey(what);
  if (!key.ok()) {
    StatusOr<Problem> p = LoadProblemFor(what);
    if (!p.ok()) {
      return InvalidArgument("cache show: '" + what +
                             "' is no row id, key or problem file: " + p.status().message());
    }
    key = MakeCacheKey(*p);
  }
  StatusOr<std::optional<CacheEntry>> row = cache.Find(*key);
  if (!row.ok()) return row.status();
  if (!*row) return NotFound("cache show: no row with the key of " + what);
  return std::move(**row);
}

int Show(ScheduleCache& cache, const Args& a) {
  StatusOr<CacheEntry> e = Select(cache, a.show);
  if (!e.ok()) return Fail(e.status());
  for (const auto& [path, text] :
       {std::pair{a.out, &e->schedule_json}, {a.problem_out, &e->problem_json}}) {
    if (path.empty()) continue;
    if (Status st = WriteFile(path, *text); !st.ok()) return Fail(st);
  }
  if (a.json) {
    nlohmann::json row = ToJsonValue(*e);
    row["format"] = "optpipe-cache-row/1";
    row["generator"] = Generator();
    std::cout << row.dump(1) << "\n";
    return kOk;
  }
  std::cout << "id: " << e->id << "\nproblem: " << e->name << "\nkey: " << ToString(e->key)
            << "\nobjective: " << FormatNumber(e->objective) << " (largest stage time "
            << FormatNumber(e->scale) << ")"
            << "\nbound: " << (e->bound ? FormatNumber(*e->bound) : "-")
            << "\nmethod: " << e->method << " (" << (e->termination.empty() ? "-" : e->termination)
            << (e->solve_seconds ? ", " + FormatNumber(*e->solve_seconds, 3) + " s" : "")
            << ")\nstored: " << e->created << " by optpipe " << e->version << "\n";
  return kOk;
}

int Remove(ScheduleCache& cache, const Args& a) {
  for (std::int64_t id : a.remove) {
    if (Status st = cache.Remove(id); !st.ok()) return Fail(st);
    Progress() << "optpipe: removed " << id << " from " << cache.path() << "\n";
  }
  return kOk;
}

bool IsSqlite(const std::string& path) {
  char head[16] = {};
  std::ifstream(path, std::ios::binary).read(head, sizeof head);
  return std::string(head, sizeof head) == std::string("SQLite format 3\0", 16);
}

// One problem file and its schedule file, checked and stored.
int ImportPair(ScheduleCache& cache, const std::string& problem, const std::string& schedule,
               ImportSummary& sum) {
  StatusOr<Problem> p = LoadProblemFor(problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> t = LoadScheduleFor(schedule);
  if (!t.ok()) return Fail(t.status());
  StatusOr<CacheStored> put = cache.Store(*p, *t);
  if (!put.ok() && !cache.enabled()) return Fail(put.status());
  if (!put.ok()) {  // the schedule breaks a rule of the problem: exit 1, as validate
    Fail(Status(put.status().code(), schedule + ": " + put.status().message()));
    return kInvalid;
  }
  int& count = put->outcome == StoreOutcome::kAdded      ? sum.added
               : put->outcome == StoreOutcome::kReplaced ? sum.replaced
                                                         : sum.kept;
  ++count;
  return kOk;
}

// Each FILE is a cache database (merged row by row) or a problem file
// followed by a schedule file of it.
int Import(ScheduleCache& cache, const Args& a) {
  ImportSummary sum;
  for (std::size_t i = 0; i < a.import.size(); ++i) {
    const std::string& file = a.import[i];
    if (IsSqlite(file)) {
      StatusOr<ImportSummary> got = cache.Import(file);
      if (!got.ok()) return Fail(Status(got.status().code(), file + ": " + got.status().message()));
      sum.added += got->added, sum.replaced += got->replaced, sum.kept += got->kept;
      sum.rejected += got->rejected;
      for (const std::string& why : got->problems)
        std::cerr << "optpipe: " << file << ": " << why << "\n";
      continue;
    }
    if (i + 1 == a.import.size()) {
      return Fail(InvalidArgument("cache import: " + file +
                                  " is no cache file, and no schedule file follows it"));
    }
    if (int rc = ImportPair(cache, file, a.import[i + 1], sum); rc != kOk) return rc;
    ++i;
  }
  if (a.json) {
    std::cout << nlohmann::json{{"format", "optpipe-cache-import/1"},
                                {"generator", Generator()},
                                {"added", sum.added},
                                {"replaced", sum.replaced},
                                {"kept", sum.kept},
                                {"rejected", sum.rejected}}
                     .dump()
              << "\n";
  }
  Progress() << "optpipe: " << cache.path() << ": " << sum.added << " added, " << sum.replaced
             << " replaced, " << sum.kept << " kept (as good or better there), " << sum.rejected
             << " rejected\n";
  return sum.rejected > 0 ? kInvalid : kOk;
}

}  // namespace

Command AddCache(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "cache", "List, show, remove and import the schedules `schedule --cache` keeps");
  sub->require_subcommand(1);
  sub->fallthrough();  // --cache and --json after the action's name too
  sub->add_option("--cache", args->cache,
                  "The cache file (default: $OPTPIPE_CACHE, else "
                  "$XDG_CACHE_HOME/optpipe/schedules.db, else ~/.cache/optpipe/schedules.db)")
      ->type_name("FILE");
  sub->add_flag("--json", args->json, "Write rows as JSON on stdout");
  CLI::App* list = sub->add_subcommand("list",
                                       "One line per schedule: id, problem, objective, "
                                       "method, when it was stored, structure");
  CLI::App* show = sub->add_subcommand("show", "One schedule's row: key, objective, bound, method");
  show->add_option("row", args->show,
                   "A row id, a key (as list --json prints it) or a problem file")
      ->required();
  show->add_option("-o,--output", args->out, "Also write its optpipe-schedule/1 file here");
  show->add_option("--problem-out", args->problem_out,
                   "Also write the optpipe-problem/1 file it was solved for here");
  CLI::App* remove = sub->add_subcommand("remove", "Remove rows by id");
  remove->add_option("id", args->remove, "Row ids (see list)")->required();
  CLI::App* import = sub->add_subcommand(
      "import", "Add schedules: from other cache files, or problem and schedule file pairs");
  import->add_option("files", args->import, "OTHER.db ... or PROBLEM.json SCHEDULE.json ...")
      ->required()
      ->check(CLI::ExistingFile);
  sub->footer(
      "The cache keeps one schedule per key, the best found: a key is the problem's structure\n"
      "(devices, stages, micro-batches, placement, split backward, offload, memory limit, host\n"
      "links, objective) and its times and memory as proportions in 4% buckets (docs/cache.md).\n"
      "`optpipe schedule P --cache` looks a problem up before solving and stores what it solves.\n"
      "Every schedule taken from the cache is re-timed on the problem and checked; imports\n"
      "are checked before they are stored (exit 1 if any was rejected). A file that is not a\n"
      "cache, or damaged, is reported (exit 2) and left as it is.\n"
      "Examples:\n"
      "  optpipe cache list\n"
      "  optpipe cache show 3 -o s.json --problem-out p.json\n"
      "  optpipe cache show tests/cases/unit-4x8.json --json\n"
      "  optpipe cache import other-machine.db p.json s.json --cache team.db\n"
      "  optpipe cache remove 3 4");
  return {sub, [args, list, show, remove, import] {
            int rc = kOk;
            std::optional<ScheduleCache> cache = OpenOrFail(*args, rc);
            if (!cache) return rc;
            if (list->parsed()) rc = List(*cache, *args);
            if (show->parsed()) rc = Show(*cache, *args);
            if (remove->parsed()) rc = Remove(*cache, *args);
            if (import->parsed()) rc = Import(*cache, *args);
            return rc;  // a file error was the action's message
          }};
}

}  // namespace optpipe::cli
