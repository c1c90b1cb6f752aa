#include "core/op.h"

#include <gtest/gtest.h>

#include "core/problem.h"
#include "core/schedule.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TEST(Op, TextRoundTrips) {
  for (OpType t : {OpType::kF, OpType::kB, OpType::kW, OpType::kO, OpType::kR}) {
    const Op op{t, 12, 305};
    StatusOr<Op> back = ParseOp(ToString(op));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, op);
  }
  EXPECT_EQ(ToString(Op{OpType::kF, 2, 0}), "2F0");
  EXPECT_EQ(*ParseOp("  3W7\t"), (Op{OpType::kW, 3, 7}));
}

TEST(Op, RejectsMalformedText) {
  for (const char* bad : {"", "F0", "2F", "2X0", "-1F0", "2F-1", "2F0x", "2 F0"}) {
    EXPECT_FALSE(ParseOp(bad).ok()) << bad;
  }
}

TEST(OpSpace, IndexIsABijection) {
  const OpSpace space(3, 4);
  for (int i = 0; i < space.size(); ++i) EXPECT_EQ(space.Index(space.At(i)), i);
  EXPECT_EQ(space.size(), 5 * 3 * 4);
}

TEST(ScheduleText, RoundTrips) {
  Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 2, "stage_time": {"f": 1, "b": 1}, "offload_time": 1,
         "host_links": [[0, 1]])");
  Schedule s = Schedule::Empty(p, "text");
  s.compute[0] = {{OpType::kF, 0, 0}, {OpType::kF, 0, 1}, {OpType::kB, 0, 0}};
  s.compute[1] = {{OpType::kF, 1, 0}, {OpType::kB, 1, 0}};
  s.copy[0] = {{OpType::kO, 0, 1}, {OpType::kR, 0, 1}};
  s.release.assign(p.op_space().size(), 0.0);
  s.release[p.op_space().Index(OpType::kR, 0, 1)] = 6.5;
  const std::string text = ToText(p, s);
  EXPECT_EQ(text, "d0: 0F0 0F1 0B0\nd1: 1F0 1B0\nl0: 0O1 0R1@6.5\n");
  StatusOr<Schedule> back = ParseScheduleText(p, text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute, s.compute);
  EXPECT_EQ(back->copy, s.copy);
  EXPECT_EQ(back->release, s.release);
  EXPECT_FALSE(ParseScheduleText(p, "l0: 0R1@-1\n").ok());
  EXPECT_FALSE(ParseScheduleText(p, "l0: 0R1@x\n").ok());
  EXPECT_FALSE(ParseScheduleText(p, "d0: 9F0@1\n").ok());
  EXPECT_FALSE(ParseScheduleText(p, "d0: 1011111011F11\n").ok()) << "a stage beyond the problem";
  EXPECT_FALSE(ParseScheduleText(p, "d5: 0F0\n").ok());
  EXPECT_FALSE(ParseScheduleText(p, "d0: 0O0\n").ok());
  EXPECT_FALSE(ParseScheduleText(p, "x0: 0F0\n").ok());
}

}  // namespace
}  // namespace optpipe
