// The library example of README.md, "Library": its lines are copied here as
// they stand there (tests/tools/readme_test.sh checks that every line of the
// README's C++ block appears in this file), and this test runs them.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "core/format.h"
#include "heuristics/method.h"

namespace {

// The README's statements; the value of its `return`, 0 past its end.
int ReadmeExample() {
  optpipe::StatusOr<optpipe::Problem> p = optpipe::LoadProblem("tests/cases/unit-4x8.json");
  if (!p.ok()) return 2;       // p.status().message() names the field
  optpipe::SearchOptions opt;  // time limit, budget, threads, seed
  opt.time_limit_s = 0.5;
  optpipe::StatusOr<optpipe::Solution> s = optpipe::RunMethod(*p, "auto", opt);
  if (s.ok()) std::cout << s->sim.makespan << "\n" << optpipe::ToText(*p, s->schedule);
  return s.ok() ? 0 : 3;
}

TEST(ReadmeExample, PrintsTheMakespanAndTheOrders) {
  std::filesystem::current_path(OPTPIPE_SOURCE_DIR);  // the README's paths are the repository's
  ::testing::internal::CaptureStdout();
  const int rc = ReadmeExample();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  // unit-4x8's lower bound is 27, which auto reaches (zb-h1 does).
  EXPECT_EQ(out.substr(0, 3), "27\n") << out;
  EXPECT_NE(out.find("\nd0: 0F0 "), std::string::npos) << out;  // ToText's lanes
  EXPECT_NE(out.find("\nd3: "), std::string::npos) << out;
}

}  // namespace
