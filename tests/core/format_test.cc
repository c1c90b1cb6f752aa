#include "core/format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TEST(ProblemFormat, EveryBundledAndBenchCaseLoads) {
  std::vector<std::string> dirs = {std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases",
                                   std::string(OPTPIPE_SOURCE_DIR) + "/tests/bench/problems"};
  int loaded = 0;
  for (const auto& dir : dirs) {
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".json") continue;  // models/, hardware/
      StatusOr<Problem> p = LoadProblem(e.path().string());
      EXPECT_TRUE(p.ok()) << e.path() << ": " << p.status().message();
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 40);  // 4 bundled cases, 36 bench problems
}

TEST(ProblemFormat, ExpandsScalarsDefaultsAndPlacements) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8-vshape"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stages(), 8);
  // vshape: chunk 0 goes down the devices, chunk 1 comes back up.
  EXPECT_EQ(p->stage_device, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(p->f, std::vector<double>(8, 0.5));
  EXPECT_EQ(p->offloadable, p->activation);  // defaults to activation
  EXPECT_FALSE(p->offload_allowed());
  EXPECT_FALSE(p->memory_limited());
  EXPECT_EQ(p->host_links.size(), 4u);  // one link per device by default

  StatusOr<Problem> llama = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(LinkOfDevice(*llama), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_DOUBLE_EQ((*llama->offload)[7], 16.5);
  EXPECT_EQ(llama->stage_device, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(ProblemFormat, RoundTrips) {
  for (const char* name : {"unit-4x8", "unit-4x8-vshape", "gpt-4dev-fused", "llama-8dev-offload"}) {
    StatusOr<Problem> p = LoadProblem(testing::CasePath(name));
    ASSERT_TRUE(p.ok());
    StatusOr<Problem> back = ParseProblem(ToJson(*p));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, *p) << name;
  }
  Problem explicit_placement = testing::MakeProblem(
      R"("devices": 2, "microbatches": 3, "stages_per_device": 2, "placement": [1, 0, 0, 1],
         "objective": "device_span", "stage_time": {"f": [1, 2, 3, 4], "b": 2},
         "memory": {"static": [1, 2], "limit": [5, 6]})");
  StatusOr<Problem> back = ParseProblem(ToJson(explicit_placement));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, explicit_placement);
  EXPECT_EQ(back->objective, Objective::kDeviceSpan);
}

// Each malformed problem is rejected and the message names the field.
TEST(ProblemFormat, RejectsMalformedNamingTheField) {
  const std::string base = R"("devices": 4, "microbatches": 8, "stage_time": )";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + R"({"f": -1, "b": 1})", "stage_time.f[0]"},
      {base + R"({"f": [1, 1, 1], "b": 1})", "stage_time.f"},
      {base + R"({"f": 1, "b": 1}, "memory": {"static": [1, 1, 1, 12], "limit": 10})",
       "memory.limit[3]: must be >= memory.static[3]"},
      {base + R"({"f": 1, "b": 1}, "comm_time": [0.1, 0.1])", "comm_time"},
      {base + R"({"f": 1, "b": 1}, "colour": "red")", "colour: unknown field"},
      {base + R"({"f": 1, "b": 1, "x": 2})", "stage_time.x: unknown field"},
      {base + R"({"f": 1, "b": 1}, "memory": {"activation": 1, "freed_by_b": 2})",
       "memory.freed_by_b[0]"},
      {base + R"({"f": 1, "b": 1}, "placement": "zigzag")", "placement"},
      {base + R"({"f": 1, "b": 1}, "placement": [0, 1, 2])", "placement"},
      {base + R"({"f": 1, "b": 1}, "placement": [0, 1, 2, 4])", "placement[3]"},
      {base + R"({"f": 1, "b": 1}, "host_links": [[0, 1], [1, 2]])", "host_links[1]"},
      {base + R"({"f": 1, "b": 1}, "objective": "speed")", "objective"},
      {base + R"({"f": "fast", "b": 1})", "stage_time.f"},
      {R"("devices": 0, "microbatches": 8, "stage_time": {"f": 1, "b": 1})", "devices"},
      {R"("devices": 2.5, "microbatches": 8, "stage_time": {"f": 1, "b": 1})", "devices"},
      {R"("devices": 2, "stage_time": {"f": 1, "b": 1})", "microbatches"},
      {R"("devices": 2, "microbatches": 2, "stage_time": {"b": 1})", "stage_time.f"},
  };
  for (const auto& [body, field] : cases) {
    StatusOr<Problem> p = ParseProblem("{\"format\": \"optpipe-problem/1\", " + body + "}");
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_NE(p.status().message().find(field), std::string::npos)
        << "message '" << p.status().message() << "' should name " << field;
  }
  EXPECT_FALSE(ParseProblem("{\"devices\": 1}").ok());  // no format
  EXPECT_FALSE(ParseProblem("not json").ok());
  EXPECT_FALSE(ParseProblem(R"({"format": "optpipe-problem/2"})").ok());
  StatusOr<Problem> missing = LoadProblem("/nonexistent/problem.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// Times are checked to a millionth of a unit, which sums of doubles hold up to
// about 1e10: a problem whose ops, one after another, take longer is refused
// (4 devices x 8 micro-batches: 32 forwards and 32 backwards), and so is one
// whose sum overflows.
TEST(ProblemFormat, RefusesTimesTooLargeToCheck) {
  const auto parse = [](const std::string& f, const std::string& b) {
    return ParseProblem(R"({"format": "optpipe-problem/1", "devices": 4, "microbatches": 8,
                            "stage_time": {"f": )" +
                        f + R"(, "b": )" + b + "}}");
  };
  EXPECT_TRUE(parse("1.5e8", "1.5e8").ok());  // 9.6e9
  for (const auto& [f, b] : {std::pair{"1.6e8", "1.6e8"}, {"1e308", "1e308"}}) {
    StatusOr<Problem> p = parse(f, b);
    ASSERT_FALSE(p.ok()) << f;
    EXPECT_EQ(p.status().message().rfind("stage_time: the iteration's serial time", 0), 0u)
        << p.status().message();
  }
  EXPECT_NE(parse("1.6e8", "1.6e8").status().message().find("1.024e+10"), std::string::npos);
  // Memory: device 1 could hold 2 + 8 x 1.25e9 = 1.0000000002e10.
  StatusOr<Problem> bytes = ParseProblem(
      R"({"format": "optpipe-problem/1", "devices": 2, "microbatches": 8,
          "stage_time": {"f": 1, "b": 1},
          "memory": {"activation": [1e9, 1.25e9], "static": 2, "limit": 1e12}})");
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().message().rfind("memory: what device 1 could hold", 0), 0u)
      << bytes.status().message();
}

TEST(ScheduleFormat, RoundTripsAndKeepsExtras) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "1f1b");
  ASSERT_TRUE(sol.ok());
  TimedSchedule t = ToTimed(*p, sol->schedule, sol->sim);
  t.info.bound = 27;
  t.info.gap = 0.1;
  t.info.termination = "time_limit";
  StatusOr<TimedSchedule> back = ParseTimedSchedule(ToJson(t));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->ops.size(), t.ops.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    EXPECT_EQ(back->ops[i].op, t.ops[i].op);
    EXPECT_EQ(back->ops[i].device, t.ops[i].device);
    EXPECT_EQ(back->ops[i].start, t.ops[i].start);
    EXPECT_EQ(back->ops[i].end, t.ops[i].end);
  }
  EXPECT_EQ(back->makespan, t.makespan);
  EXPECT_EQ(back->peak_memory, t.peak_memory);
  EXPECT_EQ(back->info.bound, 27);
  EXPECT_EQ(back->info.termination, "time_limit");
  // Orders recovered from the times are the method's orders.
  StatusOr<Schedule> orders = OrdersOf(*p, *back);
  ASSERT_TRUE(orders.ok());
  EXPECT_EQ(orders->compute, sol->schedule.compute);
  // A file that starts an op later than it could is replayed as written.
  auto late = std::find_if(back->ops.begin(), back->ops.end(), [](const TimedOp& o) {
    return o.op == Op{OpType::kW, 3, 7};
  });
  ASSERT_NE(late, back->ops.end());
  const double last_end = *back->makespan;
  late->start = last_end, late->end = last_end + 1;
  orders = OrdersOf(*p, *back);
  ASSERT_TRUE(orders.ok());
  StatusOr<SimResult> replay = Simulate(*p, *orders);
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  EXPECT_DOUBLE_EQ(replay->start[p->op_space().Index(OpType::kW, 3, 7)], last_end);
  EXPECT_DOUBLE_EQ(replay->makespan, last_end + 1);
}

// The ops are written by hand: each line must read back as the same doubles
// at every magnitude, and be what nlohmann's dump() of the op object writes
// wherever a number has one shortest form (its Grisu2 gives 17 digits for
// some doubles that 16 already name, where ours gives the 16).
TEST(ScheduleFormat, WritesOpsAsTheJsonLibraryDoes) {
  TimedSchedule t;
  t.problem = "p";
  t.method = "m";
  std::mt19937_64 rng(7);
  // Pairs (start, end): first values of few digits, then any double.
  std::vector<double> values = {0.0,     -0.0,  1.0,        0.1,       0.3,    1e-4,
                                1.5e-4,  1e-5,  123456.789, 1e15,      1e16,   123456789012345.0,
                                2.5e300, -3.75, 36.11,      42.09,     5e-324, 1e-300,
                                7e20,    0.001, 1234.5e-10, 99999999.0};
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<double>(rng() % 10000000) / 100);
  const std::size_t exact_ops = values.size() / 2;
  for (int i = 0; i < 2000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(1, 10)(rng);
    values.push_back(mantissa * std::pow(10.0, std::uniform_int_distribution<int>(-12, 20)(rng)));
  }
  for (std::size_t i = 0; i + 1 < values.size(); i += 2) {
    const OpType type = i % 4 ? OpType::kF : OpType::kO;
    t.ops.push_back({Op{type, static_cast<int>(i % 7), static_cast<int>(i)},
                     static_cast<int>(i % 5), values[i], values[i + 1]});
  }
  const std::string text = ToJson(t);
  ASSERT_EQ(nlohmann::json::parse(text)["ops"].size(), t.ops.size());
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line) && line != " \"ops\": [") {
  }
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimedOp& o = t.ops[i];
    ASSERT_TRUE(std::getline(lines, line));
    if (line.back() == ',') line.pop_back();
    const nlohmann::json back = nlohmann::json::parse(line);
    EXPECT_EQ(back["start"].get<double>(), o.start);
    EXPECT_EQ(back["end"].get<double>(), o.end);
    if (i >= exact_ops) continue;
    const nlohmann::json op = {{"device", o.device},
                               {"stream", IsCompute(o.op.type) ? "compute" : "copy"},
                               {"type", std::string(1, TypeLetter(o.op.type))},
                               {"stage", o.op.stage},
                               {"microbatch", o.op.microbatch},
                               {"start", o.start},
                               {"end", o.end}};
    EXPECT_EQ(line, "  " + op.dump());
  }
}

TEST(ScheduleFormat, RejectsMalformedOps) {
  const std::string head = R"({"format": "optpipe-schedule/1", "ops": [)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"device": 0, "stream": "compute", "type": "X", "stage": 0, "microbatch": 0, "start": 0, "end": 1})",
       "ops[0].type"},
      {R"({"device": 0, "stream": "copy", "type": "F", "stage": 0, "microbatch": 0, "start": 0, "end": 1})",
       "ops[0].stream"},
      {R"({"device": 0, "stream": "compute", "type": "F", "stage": 0, "start": 0, "end": 1})",
       "ops[0].microbatch"},
      {R"({"device": 0, "stream": "compute", "type": "F", "stage": 0, "microbatch": 0, "start": "a", "end": 1})",
       "ops[0].start"},
  };
  for (const auto& [op, field] : cases) {
    StatusOr<TimedSchedule> t = ParseTimedSchedule(head + op + "]}");
    ASSERT_FALSE(t.ok()) << op;
    EXPECT_NE(t.status().message().find(field), std::string::npos) << t.status().message();
  }
  EXPECT_FALSE(ParseTimedSchedule(R"({"format": "optpipe-schedule/1"})").ok());
}

}  // namespace
}  // namespace optpipe
