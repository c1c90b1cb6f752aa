// The model written for other solvers is the problem: read back by lp_solve
// from either file format and solved, its optimum is the brute-force one.
#include <gtest/gtest.h>
#include <lpsolve/lp_lib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "core/lower_bound.h"
#include "exact/milp.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// lp_solve's optimum of a written model file (infinity when it finds none).
double SolveFile(const std::string& path) {
  const bool mps = path.ends_with(".mps");
  lprec* lp = mps ? read_freeMPS(const_cast<char*>(path.c_str()), NEUTRAL)
                  : read_LP(const_cast<char*>(path.c_str()), NEUTRAL, nullptr);
  if (!lp) return -1;
  set_verbose(lp, NEUTRAL);
  const int ret = solve(lp);
  const double v = ret == OPTIMAL ? get_objective(lp) : std::numeric_limits<double>::infinity();
  delete_lp(lp);
  return v;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ModelFile, ReadBackItsOptimumIsTheProblemsWithAndWithoutOffload) {
  const std::string dir = ::testing::TempDir();
  // Offload under a binding limit, whose optimum the core bounds miss, and
  // tiny problems without offload (memory-limited among them).
  const Problem off = testing::OffloadTwoByTwo();
  std::mt19937 rng(3);
  std::vector<testing::NamedProblem> cases = testing::TinyProblems(rng);
  cases.resize(4);
  cases.push_back({"offload-2x2", off});
  for (const testing::NamedProblem& c : cases) {
    const double brute = testing::BruteForceOptimum(c.p, c.p.offload_allowed());
    StatusOr<Solution> seq = RunMethod(c.p, "list");
    ASSERT_TRUE(seq.ok()) << c.name << ": " << seq.status().message();
    for (const char* ext : {".lp", ".mps"}) {
      const std::string path = dir + "/optpipe_model_" + c.name + ext;
      StatusOr<MilpStats> st = WriteMilpModel(c.p, seq->schedule, path);
      ASSERT_TRUE(st.ok()) << c.name << ": " << st.status().message();
      EXPECT_NEAR(st->horizon, seq->sim.objective, 1e-9) << c.name;
      EXPECT_NEAR(SolveFile(path), brute, 1e-6) << c.name << ext;
      const std::string text = Slurp(path);
      EXPECT_NE(text.find("S_0F0"), std::string::npos) << c.name << ext;
      if (c.p.offload_allowed()) {
        EXPECT_NE(text.find("Y_s0_m0"), std::string::npos) << path;
      }
      std::remove(path.c_str());
    }
  }
  // A file that cannot be written is an error naming it.
  StatusOr<Solution> s = RunMethod(off, "list");
  ASSERT_TRUE(s.ok());
  StatusOr<MilpStats> bad = WriteMilpModel(off, s->schedule, dir + "/no/such/dir/m.lp");
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace optpipe
