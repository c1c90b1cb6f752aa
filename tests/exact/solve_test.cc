// The facade (exact/solve.h): how a solve ended, warm starts, improvements
// as they are found, and concurrent calls.
#include "exact/solve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "core/checker.h"
#include "core/format.h"
#include "core/text_format.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

Problem Case(const std::string& name) {
  const std::string dir = name.find('/') == std::string::npos ? "/tests/cases/" : "/tests/";
  StatusOr<Problem> p = LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + dir + name);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

SolveOptions With(const std::string& method) {
  SolveOptions o;
  o.method = method;
  o.evaluations = 500;  // deterministic: the same schedule on every run
  o.threads = 1;
  return o;
}

// On unit-4x8 the bound is 27 (three ops of each of 8 micro-batches on the
// busiest device, plus the pipeline fill): ZB-H1 meets it, 1F1B does not (30).
TEST(Solve, SaysHowTheSolveEnded) {
  const Problem unit = Case("unit-4x8.json");
  StatusOr<SolveResult> zb = Solve(unit, With("zb-h1"));
  ASSERT_TRUE(zb.ok());
  EXPECT_EQ(zb->termination, Termination::kOptimal);
  EXPECT_DOUBLE_EQ(zb->objective, 27);
  EXPECT_DOUBLE_EQ(zb->bound, 27);
  StatusOr<SolveResult> one = Solve(unit, With("1f1b"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->termination, Termination::kFeasible);
  EXPECT_DOUBLE_EQ(one->objective, 30);
  EXPECT_NEAR(one->gap, 0.1, 1e-12);
  EXPECT_TRUE(CheckSchedule(unit, ToTimed(unit, *one)).valid());

  // 1F1B needs more memory than llama-8dev-offload has; 1f1b-i needs chunks.
  StatusOr<SolveResult> tight = Solve(Case("llama-8dev-offload.json"), With("1f1b"));
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->termination, Termination::kInfeasible);
  EXPECT_FALSE(tight->has_schedule());
  EXPECT_NE(tight->message.find("memory"), std::string::npos) << tight->message;
  StatusOr<SolveResult> chunks = Solve(unit, With("1f1b-i"));
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->termination, Termination::kNotApplicable);

  StatusOr<SolveResult> unknown = Solve(unit, With("2f2b"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
}

// u48-r2-o2 (bench set): auto's tuning and local search improve on its seeds.
TEST(Solve, AnnouncesEveryImprovementAndStartsFromAWarmStart) {
  const Problem p = Case("bench/problems/u48-r2-o2.json");
  SolveOptions o = With("auto");
  o.evaluations = 2000;
  std::vector<double> announced;
  o.on_improvement = [&](const Schedule& s, const SimResult& r) {
    EXPECT_TRUE(CheckSchedule(p, ToTimed(p, s, r)).valid());
    announced.push_back(r.objective);
  };
  StatusOr<SolveResult> first = Solve(p, o);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_schedule());
  for (std::size_t i = 1; i < announced.size(); ++i) EXPECT_LT(announced[i], announced[i - 1]);
  for (double x : announced) EXPECT_GE(x, first->objective);

  // From its own result, with a budget too small to find anything, auto
  // keeps it: a warm start is never lost.
  SolveOptions again = With("auto");
  again.evaluations = 1;
  again.warm_start = &first->schedule;
  StatusOr<SolveResult> warm = Solve(p, again);
  ASSERT_TRUE(warm.ok());
  EXPECT_LE(warm->objective, first->objective);
  SolveOptions cold = With("auto");
  cold.evaluations = 1;
  StatusOr<SolveResult> none = Solve(p, cold);
  ASSERT_TRUE(none.ok());
  EXPECT_GT(none->objective, first->objective) << "the test needs a warm start that helps";

  // A schedule of another problem is no warm start.
  const Schedule other = Solve(Case("gpt-4dev-fused.json"), With("1f1b"))->schedule;
  again.warm_start = &other;
  StatusOr<SolveResult> wrong = Solve(p, again);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("warm_start"), std::string::npos);
}

// Eight calls at once on different problems and methods give what each
// gives alone.
TEST(Solve, ConcurrentCallsGiveTheSerialResults) {
  const std::vector<std::pair<std::string, std::string>> jobs = {
      {"unit-4x8.json", "auto"},       {"llama-8dev-offload.json", "auto"},
      {"gpt-4dev-fused.json", "auto"}, {"unit-4x8-vshape.json", "auto"},
      {"unit-4x8.json", "zb-h2"},      {"llama-8dev-offload.json", "list"},
      {"gpt-4dev-fused.json", "1f1b"}, {"unit-4x8-vshape.json", "zb-v"},
  };
  std::vector<Problem> problems;
  for (const auto& [file, method] : jobs) problems.push_back(Case(file));
  std::vector<SolveResult> serial(jobs.size()), parallel(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    StatusOr<SolveResult> r = Solve(problems[i], With(jobs[i].second));
    ASSERT_TRUE(r.ok()) << jobs[i].first << " " << jobs[i].second;
    serial[i] = *r;
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] { parallel[i] = *Solve(problems[i], With(jobs[i].second)); });
  }
  for (std::thread& t : threads) t.join();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE(jobs[i].first + " " + jobs[i].second);
    EXPECT_EQ(parallel[i].objective, serial[i].objective);
    EXPECT_EQ(ToText(problems[i], parallel[i].schedule), ToText(problems[i], serial[i].schedule));
  }
}

}  // namespace
}  // namespace optpipe

namespace optpipe {
namespace {

// SolveStats counts the work: auto's local search simulates within its budget
// (the seeds and tuning take their share of it first); a construction does none.
TEST(Solve, CountsTheSearchesWork) {
  const Problem p =
      *LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/bench/problems/r48-6s.json");
  for (std::int64_t budget : {50, 2000}) {
    SolveOptions opt;
    opt.evaluations = budget;
    opt.threads = 1;
    StatusOr<SolveResult> r = Solve(p, opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->termination, Termination::kWorkLimit);
    EXPECT_GT(r->stats.evaluations, 0);
    EXPECT_LE(r->stats.evaluations, budget);
    EXPECT_EQ(r->stats.nodes, 0);
  }
  SolveOptions one;
  one.method = "zb-h1";
  StatusOr<SolveResult> z = Solve(p, one);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->stats.evaluations, 0);
}

}  // namespace
}  // namespace optpipe

namespace optpipe {
namespace {

// The log reads like a MILP solver's: a header, rows (a * on every better
// schedule, one at least every second), the method's lines, a summary last.
TEST(Solve, LogsAHeaderRowsAndASummary) {
  const Problem p =
      *LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/bench/problems/r48-6s.json");
  std::vector<std::string> lines;
  SolveOptions opt;
  opt.time_limit_s = 1.5;
  opt.threads = 1;
  opt.log = [&](const std::string& line) { lines.push_back(line); };
  StatusOr<SolveResult> r = Solve(p, opt);
  ASSERT_TRUE(r.ok());
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("solve: r48-6s: 4 devices x 8 micro-batches", 0), 0u) << lines[0];
  EXPECT_NE(lines[1].find("time   incumbent       bound      gap  found by"), std::string::npos);
  int improved = 0, periodic = 0;
  for (const std::string& l : lines) {
    if (l.rfind("solve: *", 0) == 0) ++improved;
    if (l.rfind("solve:  ", 0) == 0 && l.find("incumbent") == std::string::npos) ++periodic;
  }
  EXPECT_GE(improved, 1);  // auto's local search improves on its seeds here
  EXPECT_GE(periodic, 1);  // a second passed without a better schedule
  EXPECT_EQ(lines.back().rfind("solve: auto: objective " + FormatNumber(r->objective), 0), 0u)
      << lines.back();
}

}  // namespace
}  // namespace optpipe

namespace optpipe {
namespace {

// A bound equal to the objective but for rounding (sums added in another
// order) proves the schedule optimal: the gap is 0, not 1e-15.
TEST(SettleBound, RoundingIsNoGap) {
  const Problem p = *LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/unit-4x8.json");
  const double objective = 23246.8;
  SolveInfo info;
  info.bound = std::nextafter(objective, 0.0);
  SettleBound(p, objective, info);
  EXPECT_EQ(*info.bound, objective);
  EXPECT_EQ(*info.gap, 0.0);
  info.bound = objective * (1 - 1e-6);  // a real gap stays
  SettleBound(p, objective, info);
  EXPECT_NEAR(*info.gap, 1e-6, 1e-12);
}

}  // namespace
}  // namespace optpipe
