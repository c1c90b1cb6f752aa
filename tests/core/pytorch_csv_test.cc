#include "core/pytorch_csv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

Problem Load(const std::string& name) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath(name));
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

Schedule Build(const Problem& p, const std::string& method) {
  StatusOr<Solution> s = RunMethod(p, method);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  return s.ok() ? s->schedule : Schedule{};
}

std::vector<std::vector<std::string>> Cells(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

// Export then import gives back every device's compute order.
void ExpectRoundTrip(const Problem& p, const Schedule& s, const std::string& letters) {
  const std::string csv = *ToPytorchCsv(p, s);
  std::set<char> used;
  for (const auto& row : Cells(csv)) {
    for (const std::string& c : row) used.insert(*std::find_if(c.begin(), c.end(), ::isalpha));
  }
  EXPECT_EQ(std::string(used.begin(), used.end()), letters);
  StatusOr<Schedule> back = FromPytorchCsv(p, csv);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute, s.compute);
  StatusOr<SimResult> r = Simulate(p, *back);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

TEST(PytorchCsv, RoundTrips1F1BZeroBubbleGPipeFusedAndInterleaved) {
  const Problem unit = Load("unit-4x8");
  ExpectRoundTrip(unit, Build(unit, "1f1b"), "FIW");
  ExpectRoundTrip(unit, Build(unit, "zb-h1"), "FIW");
  const Problem fused = testing::UnitProblem(4, 8, false);
  ExpectRoundTrip(fused, Build(fused, "gpipe"), "BF");
  const Problem inter = testing::MakeProblem(
      R"("name": "inter", "devices": 4, "microbatches": 8, "stages_per_device": 2,
         "stage_time": {"f": 1, "b": 1, "w": 1}, "memory": {"activation": 1, "freed_by_b": 0.5})");
  const Schedule s = Build(inter, "1f1b-i");
  ExpectRoundTrip(inter, s, "FIW");
  // Stage numbers are global: device 0 holds stages 0 and 4.
  const std::string csv = *ToPytorchCsv(inter, s);
  EXPECT_NE(csv.substr(0, csv.find('\n')).find("4F0"), std::string::npos);
}

// A schedule that offloads has no CSV: PyTorch has no O/R action, and the
// orders without them would not fit the memory (llama-8dev-offload: 1F1B
// needs more than its limit, so every fitting schedule offloads).
TEST(PytorchCsv, RefusesASchedulesOffloadsRatherThanDropThem) {
  const Problem p = Load("llama-8dev-offload");
  const Schedule s = Build(p, "list");
  int copies = 0;
  for (const auto& lane : s.copy) copies += static_cast<int>(lane.size());
  ASSERT_GT(copies, 0);
  StatusOr<std::string> csv = ToPytorchCsv(p, s);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(csv.status().message().find("offloads " + std::to_string(copies / 2) + " activations"),
            std::string::npos)
      << csv.status().message();
  EXPECT_NE(csv.status().message().find(std::to_string(copies) + " O/R ops would be lost"),
            std::string::npos);
}

// The rules of torch.distributed.pipelining.schedules._validate_schedule and
// _Action.from_str, restated: one row per rank; every stage on one rank; per
// micro-batch F before I/B before W; per stage M F, I == W, B + I == M.
TEST(PytorchCsv, ZeroBubbleCsvPassesPytorchsOwnRules) {
  const Problem p = Load("unit-4x8");
  const std::string csv = *ToPytorchCsv(p, Build(p, "zb-h1"));
  const auto rows = Cells(csv);
  ASSERT_EQ(rows.size(), 4u);  // pp_group_size
  const std::regex action(
      R"((\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*))");
  std::map<int, int> stage_rank;
  std::map<std::pair<int, char>, std::set<int>> done;  // (stage, F/I/B/W) -> micro-batches
  for (int rank = 0; rank < 4; ++rank) {
    for (const std::string& cell : rows[rank]) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(cell, m, action)) << cell;
      const int stage = std::stoi(m[1]);
      const char type = m[2].str()[0];
      ASSERT_EQ(m[2].str().size(), 1u) << "compute_only holds F, I, B, W";
      ASSERT_FALSE(m[3].str().empty()) << cell;
      const int mb = std::stoi(m[3]);
      if (type == 'I' || type == 'B') {
        EXPECT_TRUE(done[std::make_pair(stage, 'F')].count(mb)) << cell << " before F";
      }
      if (type == 'W') {
        EXPECT_TRUE(done[std::make_pair(stage, 'I')].count(mb)) << cell << " before I";
      }
      done[{stage, type}].insert(mb);
      auto [it, fresh] = stage_rank.insert({stage, rank});
      EXPECT_EQ(it->second, rank) << "stage " << stage << " on two ranks";
    }
  }
  for (int stage = 0; stage < 4; ++stage) {
    const std::size_t f = done[{stage, 'F'}].size(), b = done[{stage, 'B'}].size(),
                      i = done[{stage, 'I'}].size(), w = done[{stage, 'W'}].size();
    EXPECT_EQ(f, 8u);
    EXPECT_EQ(i, w);
    EXPECT_EQ(b + (i + w) / 2, 8u);
    EXPECT_EQ(i, 8u) << "zb-h1 splits every backward";
  }
}

TEST(PytorchCsv, AcceptsWhitespaceQuotesIdleCellsCrlfAndFullBackward) {
  const Problem p = testing::UnitProblem(2, 2, true);
  const std::string csv =
      " 0F0 , 0F1,,0I0 ,\"0W0\", 0B1\r\n"
      "1F0,1I0,1W0,  ,1F1,1I1,1W1\r\n";
  StatusOr<Schedule> s = FromPytorchCsv(p, csv);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(ToText(p, *s), "d0: 0F0 0F1 0B0 0W0 0B1 0W1\nd1: 1F0 1B0 1W0 1F1 1B1 1W1\nl0:\nl1:\n");
  EXPECT_TRUE(Simulate(p, *s).ok());
}

// Every malformed input is rejected and the message names where.
TEST(PytorchCsv, RejectsMalformedNamingRowAndColumn) {
  const Problem split = testing::UnitProblem(2, 2, true);
  const Problem fused = testing::UnitProblem(2, 2, false);
  const std::string row2 = "1F0,1I0,1W0,1F1,1I1,1W1\n";
  const std::vector<std::tuple<const Problem*, std::string, std::string>> cases = {
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1\n", "expected 2 rows, one per rank (device), got 1"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1\n" + row2 + "\n", "got 3"},
      {&split, "0F0,0X1,0I0,0W0,0I1,0W1\n" + row2,
       "row 1 (rank 0), column 2: '0X1': unknown action"},
      {&split, "0F0,0F1,0SEND_F0,0I0,0W0,0I1,0W1\n" + row2, "column 3: '0SEND_F0': unknown action"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1x\n" + row2, "column 6: '0W1x': expected {stage}"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W\n" + row2, "column 6: '0W': the action has no micro-batch"},
      {&split, "0F0,1F1,0I0,0W0,0I1,0W1\n" + row2,
       "row 1 (rank 0), column 2: '1F1': stage 1 runs on device 1"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1\n" + row2.substr(0, row2.size() - 5) + "\n",
       "row 2 (rank 1): 1W1 is missing"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1,0F0\n" + row2,
       "column 7: '0F0': repeats 0F0 of row 1, column 1"},
      {&split, "0F0,0F1,0I0,0W1,0I1,0W0\n" + row2, "column 4: '0W1': W before the input-gradient"},
      {&split, "0I0,0F0,0W0,0F1,0I1,0W1\n" + row2,
       "row 1 (rank 0), column 1: '0I0': backward before"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1,7F0\n",
       "row 2 (rank 1), column 7: '7F0': stage out of range"},
      {&split, "0F0,0F1,0I0,0W0,0I1,0W1,0F5\n" + row2, "micro-batch out of range"},
      {&split, "0F0,\"0F1,0I0\n" + row2, "row 1, column 2: unterminated quote"},
      {&fused, "0F0,0F1,0I0,0B1\n1F0,1B0,1F1,1B1\n",
       "row 1 (rank 0), column 3: '0I0': I (input-gradient backward) needs a split"},
      {&fused, "0F0,0F1,0B0,0W0,0B1\n1F0,1B0,1F1,1B1\n",
       "column 4: '0W0': W (weight-gradient backward)"},
  };
  for (const auto& [p, csv, want] : cases) {
    StatusOr<Schedule> s = FromPytorchCsv(*p, csv);
    ASSERT_FALSE(s.ok()) << csv;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << "message: " << s.status().message() << "\nwanted: " << want;
  }
}

// An order that parses but cannot run is the simulator's to reject.
TEST(PytorchCsv, DeadlockingOrderParsesAndTheSimulatorRejectsIt) {
  const Problem p = testing::UnitProblem(2, 2, true);
  // Device 0 waits for 1I0, which device 1 runs after 1F1, which needs 0F1 after 0I0.
  StatusOr<Schedule> s = FromPytorchCsv(p, "0F0,0I0,0W0,0F1,0I1,0W1\n1F1,1I1,1W1,1F0,1I0,1W0\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  StatusOr<SimResult> r = Simulate(p, *s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
}

}  // namespace
}  // namespace optpipe
