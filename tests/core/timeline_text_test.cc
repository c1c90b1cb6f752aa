#include "core/timeline_text.h"

#include <gtest/gtest.h>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TimedOp At(const char* name, int device, double start, double end) {
  return TimedOp{*ParseOp(name), device, start, end};
}

// 2 devices, 2 micro-batches, fused backward, every op 1 long: a hand-made 1F1B.
TEST(TextTimeline, ExactTextOfATinySchedule) {
  const Problem p = testing::MakeProblem(
      R"("name": "tiny", "devices": 2, "microbatches": 2, "split_backward": false,
         "stage_time": {"f": 1, "b": 1}, "memory": {"activation": 1})");
  TimedSchedule t;
  t.problem = "tiny";
  t.method = "hand";
  t.ops = {At("0F0", 0, 0, 1), At("0F1", 0, 1, 2), At("1F0", 1, 1, 2), At("1B0", 1, 2, 3),
           At("1F1", 1, 3, 4), At("0B0", 0, 3, 4), At("1B1", 1, 4, 5), At("0B1", 0, 5, 6)};
  // 17 characters a line: "d0 |" + 12 columns + "|", so one column is 0.5.
  EXPECT_EQ(TextTimeline(p, t, 17),
            "tiny / hand: makespan 6, one column = 0.5\n"
            "d0 |FFff..BB..bb|\n"
            "d1 |..FFBBffbb..|\n"
            "    +---------+-\n"
            "    0         5\n"
            "F forward, B backward; lower case: odd micro-batch; . idle\n");
}

// Copy lines appear with offload; an op shorter than a column still shows.
TEST(TextTimeline, CopyLinesAndShortOps) {
  const Problem p = testing::MakeProblem(
      R"("name": "tiny", "devices": 1, "microbatches": 2, "stage_time": {"f": 1, "b": 1, "w": 0.1},
         "offload_time": 1, "memory": {"activation": 1})");
  TimedSchedule t;
  t.problem = "tiny";
  t.method = "hand";
  t.ops = {At("0F0", 0, 0, 1),     At("0F1", 0, 1, 2),  At("0O0", 0, 1, 2),
           At("0R0", 0, 2, 3),     At("0B0", 0, 3, 4),  At("0W0", 0, 4.2, 4.3),
           At("0B1", 0, 4.6, 5.6), At("0W1", 0, 5.6, 6)};
  // Columns of 0.6 with middles at 0.3, 0.9, ...: 0W0 covers none of them but shows
  // in the idle column holding its middle.
  EXPECT_EQ(TextTimeline(p, t, 15),
            "tiny / hand: makespan 6, one column = 0.6\n"
            "d0 |FFf..BBWbw|\n"
            "c0 |..ORR.....|\n"
            "    +---------\n"
            "    0\n"
            "F forward, B backward (input), W backward (weights), O offload, R reload; lower case: "
            "odd micro-batch; . idle\n");
}

TEST(TextTimeline, EveryDeviceOneLineAtTheRequestedWidth) {
  const Problem p = testing::UnitProblem(4, 8, true);
  StatusOr<Solution> s = RunMethod(p, "zb-h1");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const std::string text = TextTimeline(p, ToTimed(p, s->schedule, s->sim), 80);
  int device_lines = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    if (line.rfind("d", 0) == 0) {
      ++device_lines;
      EXPECT_EQ(line.size(), 80u) << line;
    }
    pos = nl + 1;
  }
  EXPECT_EQ(device_lines, 4);
}

}  // namespace
}  // namespace optpipe
