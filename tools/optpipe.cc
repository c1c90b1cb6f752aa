// optpipe: the command-line front end. Each subcommand lives in its own
// tools/cmd_*.cc file and registers itself here.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>

#include "core/checker.h"
#include "core/text_format.h"
#include "core/version.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

CLI::Validator AtLeast(double low, bool strict, const std::string& name) {
  const std::string want =
      std::string(strict ? "> " : ">= ") + (low == 0 ? "0" : std::to_string(low));
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(in.c_str(), &end);
        const bool number = end != in.c_str() && *end == '\0' && v == v;
        if (number && (strict ? v > low : v >= low)) return "";
        return "must be a number " + want + ", not " + in;
      },
      name);
}

}  // namespace

const CLI::Validator kPositive = AtLeast(0, true, "POSITIVE");
const CLI::Validator kNonNegative = AtLeast(0, false, "NONNEGATIVE");

void WarnIfInvalid(const Problem& p, const TimedSchedule& t, const std::string& path) {
  const CheckReport rep = CheckSchedule(p, t);
  if (rep.valid()) return;
  std::cerr << "optpipe: warning: " << path << " has " << rep.errors.size()
            << " violation(s) (see `optpipe validate`), the first: " << rep.errors.front();
  if (!t.problem.empty() && t.problem != p.name)
    std::cerr << "; it was made for problem '" << t.problem << "', not '" << p.name << "'";
  std::cerr << "; drawing it as recorded\n";
}

void AddSearchFlags(CLI::App* sub, SolveOptions& opt) {
  sub->add_option("--threads", opt.threads,
                  "Threads for searching methods (0: all cores; 1 with --seed reproduces)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  sub->add_option("--seed", opt.seed, "Random seed of the local search")->capture_default_str();
  sub->add_option("--evaluations", opt.evaluations,
                  "Budget of simulations for searching heuristics instead of the clock: the "
                  "same result on every run and machine")
      ->check(kPositive);
}

namespace {
double max_memory_gib = 0;

bool quiet = false;

double AvailableBytes() {
  if (max_memory_gib > 0) return max_memory_gib * (1 << 30);
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * page : 1e18;
}

std::string MemoryText(double bytes) {
  return FormatNumber(bytes / (1 << 30), 3) + " GiB (" +
         (max_memory_gib > 0 ? std::string("--max-memory") : std::string("available here")) + ")";
}
}  // namespace

void SetMaxMemoryGiB(double gib) { max_memory_gib = gib; }

void SetQuiet(bool q) { quiet = q; }

std::ostream& Progress() {
  static std::ostream drop(nullptr);  // no buffer: every write is dropped
  return quiet ? drop : std::cerr;
}

std::function<void(const std::string&)> ProgressLog() {
  return [](const std::string& line) { Progress() << "optpipe: " << line << "\n"; };
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

SizeLimit ProblemSizeLimit() {
  const double bytes = AvailableBytes();
  SizeLimit limit;
  limit.max_ops = static_cast<std::int64_t>(std::min<double>(bytes / kBytesPerOp, kMaxOpSlots));
  limit.why = "optpipe needs about " + FormatNumber(kBytesPerOp / 1024, 3) + " KiB an op and has " +
              MemoryText(bytes) + "; see --max-memory";
  return limit;
}

StatusOr<Problem> LoadProblemFor(const std::string& path) {
  return LoadProblem(path, ProblemSizeLimit());
}

StatusOr<TimedSchedule> LoadScheduleFor(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  const double available = AvailableBytes();
  if (!ec && static_cast<double>(bytes) * kBytesPerScheduleByte > available) {
    return InvalidArgument(path + ": " + FormatNumber(bytes / double(1 << 20), 4) +
                           " MiB of JSON takes about " + FormatNumber(kBytesPerScheduleByte, 3) +
                           "x that to read, more than " + MemoryText(available));
  }
  return LoadTimedSchedule(path);
}

std::string Brief(const std::vector<double>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

int ExitFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return kOk;
    case StatusCode::kNotApplicable:
    case StatusCode::kInfeasible:
      return kNotApplicable;
    case StatusCode::kInternal:
      return kInvalid;
    case StatusCode::kCancelled:
      return kInterrupted;
    default:
      return kBadInput;
  }
}

int FailNoSchedule(const SolveResult& r) {
  return Fail(Status(r.termination == Termination::kInfeasible ? StatusCode::kInfeasible
                                                               : StatusCode::kNotApplicable,
                     r.message));
}

namespace {
std::string error_prefix = "optpipe: ";
}  // namespace

void SetRank(int rank) { error_prefix = "optpipe: rank " + std::to_string(rank) + ": "; }

int Fail(const Status& st) {
  std::cerr << error_prefix << st.message() << "\n";
  return Interrupted() ? kInterrupted : ExitFor(st);  // a search cut short found nothing
}

namespace {
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void OnInterrupt(int sig) {
  // Only async-signal-safe calls here: the next signal gets the default action.
  std::signal(sig, SIG_DFL);
  interrupted.store(true);
  constexpr char kInt[] =
      "\noptpipe: interrupted: stopping with what it has (Ctrl-C again quits at once)\n";
  constexpr char kTerm[] = "optpipe: terminated (SIGTERM): stopping with what it has\n";
  [[maybe_unused]] const ssize_t n = sig == SIGINT ? write(STDERR_FILENO, kInt, sizeof kInt - 1)
                                                   : write(STDERR_FILENO, kTerm, sizeof kTerm - 1);
}
}  // namespace

const std::atomic<bool>* InterruptFlag() { return &interrupted; }
bool Interrupted() { return interrupted.load(); }
// SIGTERM too: a launcher (mpirun) ending the job lets every rank say where it stood.
void InstallInterruptHandler() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
}

}  // namespace optpipe::cli

int main(int argc, char** argv) {
  using namespace optpipe::cli;
  CLI::App app{
      "optpipe: pipeline-parallel training schedules (F/B/W per stage and micro-batch, optional\n"
      "activation offload) that respect device memory. Exit codes: 0 ok, 1 invalid, 2 bad input,\n"
      "3 method not applicable or infeasible, 130 stopped by Ctrl-C (searches end early and\n"
      "their best so far is written; a second Ctrl-C quits at once). Reading, simulating,\n"
      "checking and writing a schedule are not interruptible: a few microseconds an op, so\n"
      "--time-limit bounds the searches, not these; a problem whose ops would not fit the\n"
      "memory is refused up front (--max-memory)."};
  app.set_version_flag("--version", optpipe::Generator());
  app.require_subcommand(1);
  app.fallthrough();  // --max-memory after the subcommand's name too
  double max_memory_gib = 0;
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "Print errors and warnings only, no progress or summaries");
  app.add_option("--max-memory", max_memory_gib,
                 "GiB a command may use (default: the machine's available memory); a problem "
                 "or schedule file that would need more is refused up front (exit 2)")
      ->check(kPositive);
  const std::vector<Command> commands = {AddSchedule(app), AddValidate(app),  AddBound(app),
                                         AddMethods(app),  AddBench(app),     AddDraw(app),
                                         AddShow(app),     AddImportCsv(app), AddRun(app),
                                         AddPlan(app),     AddCache(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kBadInput;
  }
  SetMaxMemoryGiB(max_memory_gib);
  SetQuiet(quiet);
  InstallInterruptHandler();
  for (const Command& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
  return kBadInput;
}
