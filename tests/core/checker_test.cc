#include "core/checker.h"

#include <gtest/gtest.h>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TimedSchedule OneFOneB(const Problem& p) {
  StatusOr<Solution> sol = RunMethod(p, "1f1b");
  EXPECT_TRUE(sol.ok()) << sol.status().message();
  return ToTimed(p, sol->schedule, sol->sim);
}

bool Mentions(const CheckReport& rep, const std::string& what) {
  for (const std::string& e : rep.errors) {
    if (e.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(Checker, AcceptsSimulatedScheduleAndRecomputesMetrics) {
  Problem p = testing::UnitProblem(4, 8, false);
  const CheckReport rep = CheckSchedule(p, OneFOneB(p));
  EXPECT_TRUE(rep.valid());
  EXPECT_DOUBLE_EQ(rep.makespan, 33.0);
  EXPECT_EQ(rep.peak_memory, (std::vector<double>{4, 3, 2, 1}));
}

// Delaying any single op by half a unit breaks a duration, a dependency, a lane
// or a reported metric; the checker must name that op (the CLI's "corrupt one
// op" promise).
TEST(Checker, NamesEveryCorruptedOp) {
  Problem p = testing::UnitProblem(4, 8, true);
  const TimedSchedule good = OneFOneB(p);
  for (std::size_t i = 0; i < good.ops.size(); ++i) {
    TimedSchedule bad = good;
    bad.ops[i].start -= 0.5;  // an earlier start, same end: a wrong duration at least
    const CheckReport rep = CheckSchedule(p, bad);
    EXPECT_FALSE(rep.valid());
    EXPECT_TRUE(Mentions(rep, "op " + ToString(good.ops[i].op))) << ToString(good.ops[i].op);
  }
}

TEST(Checker, ReportsEachKindOfViolation) {
  Problem p = testing::UnitProblem(2, 2, true);
  const TimedSchedule good = OneFOneB(p);
  const auto find = [&](TimedSchedule& t, Op op) -> TimedOp& {
    for (TimedOp& o : t.ops) {
      if (o.op == op) return o;
    }
    ADD_FAILURE() << "no op " << ToString(op);
    return t.ops[0];
  };
  {  // dependency: shift B(0,1) and its W to start before B(1,1) ends
    TimedSchedule t = good;
    TimedOp& b = find(t, {OpType::kB, 1, 1});
    TimedOp& b0 = find(t, {OpType::kB, 0, 1});
    b0.start = b.end - 0.5;
    b0.end = b0.start + 1;
    EXPECT_TRUE(Mentions(CheckSchedule(p, t), "op 0B1 on device 0 starts at"));
  }
  {  // exclusivity: two ops at once on device 1
    TimedSchedule t = good;
    TimedOp& w = find(t, {OpType::kW, 1, 0});
    w.start -= 1;
    w.end -= 1;
    EXPECT_TRUE(Mentions(CheckSchedule(p, t), "while"));
  }
  {  // missing and duplicated ops
    TimedSchedule t = good;
    t.ops.push_back(t.ops.front());
    EXPECT_TRUE(Mentions(CheckSchedule(p, t), "appears more than once"));
    t = good;
    t.ops.pop_back();
    EXPECT_TRUE(Mentions(CheckSchedule(p, t), "is missing"));
  }
  {  // wrong device and reported metrics
    TimedSchedule t = good;
    t.ops[0].device = 1;
    t.makespan = *t.makespan + 1;
    t.peak_memory->at(0) = 9;
    const CheckReport rep = CheckSchedule(p, t);
    EXPECT_TRUE(Mentions(rep, "but stage 0 is on device 0"));
    EXPECT_TRUE(Mentions(rep, "makespan: file says"));
    EXPECT_TRUE(Mentions(rep, "peak_memory[0]"));
  }
  {  // memory over the limit
    Problem limited = p;
    limited.memory_limit = std::vector<double>{1.5, 1.5};
    EXPECT_TRUE(Mentions(CheckSchedule(limited, good), "memory on device 0 reaches 2"));
  }
  {  // an unmatched offload
    Problem off = p;
    off.offload = std::vector<double>{1, 1};
    TimedSchedule t = good;
    t.ops.push_back({{OpType::kO, 0, 0}, 0, 1, 2});
    EXPECT_TRUE(Mentions(CheckSchedule(off, t), "has no matching reload"));
  }
}

}  // namespace
}  // namespace optpipe
