#include "core/chrome_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

using nlohmann::json;

struct Traced {
  Problem p;
  Solution s;
  TimedSchedule t;
  json trace;
};

Traced Trace(const Problem& p, const std::string& method) {
  Traced r{p, {}, {}, {}};
  StatusOr<Solution> s = RunMethod(p, method);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  if (!s.ok()) return r;
  r.s = *s;
  r.t = ToTimed(p, s->schedule, s->sim);
  const std::string text = ChromeTrace(p, r.t);
  r.trace = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(r.trace.is_discarded()) << "not JSON";
  return r;
}

void ExpectTraceMatches(const Traced& r) {
  const Problem& p = r.p;
  ASSERT_TRUE(r.trace.contains("traceEvents"));
  const json& ev = r.trace["traceEvents"];
  // Names of processes and threads.
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  for (const json& e : ev) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") thread[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  ASSERT_EQ(process.size(), std::size_t(p.devices));
  for (const auto& [pid, name] : process) {
    EXPECT_EQ(name.rfind("device " + std::to_string(pid - 1) + " (stage", 0), 0u) << name;
  }
  EXPECT_EQ(thread.size(), std::size_t(2 * p.devices));

  // One complete event per op, at its time (1 unit = 1000 us), on its device's lane.
  std::map<std::string, const TimedOp*> ops;
  for (const TimedOp& o : r.t.ops) ops[ToString(o.op)] = &o;
  std::size_t complete = 0;
  for (const json& e : ev) {
    if (e["ph"] != "X") continue;
    ++complete;
    const std::string name = e["name"];
    ASSERT_TRUE(ops.count(name)) << name;
    const TimedOp& o = *ops[name];
    EXPECT_NEAR(e["ts"].get<double>(), 1000 * o.start, 1e-3) << name;
    EXPECT_NEAR(e["dur"].get<double>(), 1000 * (o.end - o.start), 2e-3) << name;
    EXPECT_EQ(e["pid"].get<int>(), o.device + 1) << name;
    const std::pair<int, int> lane{e["pid"].get<int>(), e["tid"].get<int>()};
    EXPECT_EQ(thread[lane], IsCompute(o.op.type) ? "compute" : "copy") << name;
    EXPECT_EQ(e["args"]["stage"], o.op.stage);
    EXPECT_EQ(e["args"]["microbatch"], o.op.microbatch);
    EXPECT_EQ(e["args"]["type"], std::string(1, TypeLetter(o.op.type)));
  }
  EXPECT_EQ(complete, r.t.ops.size());

  // Memory counters: the largest value is the simulator's peak; all is freed at the end.
  std::map<int, double> peak, last, last_ts;
  for (const json& e : ev) {
    if (e["ph"] != "C") continue;
    EXPECT_EQ(e["name"], "memory");
    const int d = e["pid"].get<int>() - 1;
    const double v = e["args"]["in use"];
    if (!peak.count(d) || v > peak[d]) peak[d] = v;
    EXPECT_TRUE(!last_ts.count(d) || e["ts"].get<double>() > last_ts[d])
        << "counter times increase";
    last[d] = v;
    last_ts[d] = e["ts"];
    if (p.memory_limit) {
      EXPECT_EQ(e["args"]["limit"].get<double>(), (*p.memory_limit)[d]);
    }
  }
  ASSERT_EQ(peak.size(), std::size_t(p.devices));
  for (int d = 0; d < p.devices; ++d) {
    EXPECT_NEAR(peak[d], r.s.sim.peak_memory[d], 1e-9) << "device " << d;
    EXPECT_NEAR(last[d], p.static_memory[d], 1e-9) << "device " << d;
  }
}

TEST(ChromeTrace, OneEventPerOpNamedLanesAndMemoryCounters) {
  StatusOr<Problem> unit = LoadProblem(testing::CasePath("unit-4x8"));
  ASSERT_TRUE(unit.ok());
  ExpectTraceMatches(Trace(*unit, "zb-h1"));
}

TEST(ChromeTrace, OffloadGoesToTheCopyThreadAndTheLimitIsACounter) {
  StatusOr<Problem> llama = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(llama.ok());
  const Traced r = Trace(*llama, "po-h");
  bool copy = false;
  for (const TimedOp& o : r.t.ops) copy = copy || IsCopy(o.op.type);
  EXPECT_TRUE(copy) << "po-h offloads";
  ExpectTraceMatches(r);
  EXPECT_EQ(r.trace["otherData"]["method"], "po-h");
}

TEST(ChromeTrace, Deterministic) {
  StatusOr<Problem> unit = LoadProblem(testing::CasePath("unit-4x8"));
  ASSERT_TRUE(unit.ok());
  StatusOr<Solution> s = RunMethod(*unit, "1f1b");
  ASSERT_TRUE(s.ok());
  const TimedSchedule t = ToTimed(*unit, s->schedule, s->sim);
  EXPECT_EQ(ChromeTrace(*unit, t), ChromeTrace(*unit, t));
}

}  // namespace
}  // namespace optpipe
