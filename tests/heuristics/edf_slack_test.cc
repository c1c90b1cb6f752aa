#include "heuristics/edf_slack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace optpipe::pipe_offload {
namespace {

// The definition: sort the members by deadline, run them back to back from t.
double Naive(const std::vector<double>& deadline, const std::vector<double>& dur,
             std::vector<int> members, double t) {
  std::stable_sort(members.begin(), members.end(),
                   [&](int x, int y) { return deadline[x] < deadline[y]; });
  double least = std::numeric_limits<double>::infinity();
  for (int k : members) {
    t += dur[k];
    least = std::min(least, deadline[k] - t);
  }
  return least;
}

// Equal, infinities included (an empty set has no slack limit).
void ExpectSame(double got, double want) {
  if (std::isinf(want)) {
    EXPECT_EQ(got, want);
  } else {
    EXPECT_NEAR(got, want, 1e-9);
  }
}

TEST(EdfSlack, ByHand) {
  const std::vector<double> deadline = {10, 4, 7}, dur = {3, 2, 2};
  EdfSlack edf(deadline, dur);
  EXPECT_EQ(edf.Least(0), std::numeric_limits<double>::infinity());
  edf.Insert(0);
  EXPECT_DOUBLE_EQ(edf.Least(0), 7);  // 10 - 3
  edf.Insert(1);                      // runs first: 4 - 2 = 2, then 10 - 5 = 5
  EXPECT_DOUBLE_EQ(edf.Least(0), 2);
  EXPECT_DOUBLE_EQ(edf.Least(1.5), 0.5);
  EXPECT_DOUBLE_EQ(edf.LeastWith(0, 2), 2);  // 2, then 7 - 4 = 3, then 10 - 7 = 3
  EXPECT_DOUBLE_EQ(edf.Least(0), 2);         // LeastWith leaves the set as it was
  edf.Erase(1);
  EXPECT_DOUBLE_EQ(edf.Least(0), 7);
}

TEST(EdfSlack, MatchesTheDefinitionUnderRandomInsertsAndErases) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + trial * 3;
    std::uniform_real_distribution<double> when(0, 50), len(0.5, 4);
    std::vector<double> deadline(n), dur(n);
    for (int k = 0; k < n; ++k) {
      deadline[k] = trial % 3 == 0 ? std::floor(when(rng) / 10) * 10 : when(rng);  // ties too
      dur[k] = len(rng);
    }
    EdfSlack edf(deadline, dur);
    std::set<int> in;
    for (int step = 0; step < 200; ++step) {
      const int k = std::uniform_int_distribution<int>(0, n - 1)(rng);
      if (in.count(k)) {
        edf.Erase(k);
        in.erase(k);
      } else {
        edf.Insert(k);
        in.insert(k);
      }
      const double t = when(rng);
      const std::vector<int> members(in.begin(), in.end());
      ExpectSame(edf.Least(t), Naive(deadline, dur, members, t));
      const int extra = std::uniform_int_distribution<int>(0, n - 1)(rng);
      if (!in.count(extra)) {
        std::vector<int> with = members;
        with.push_back(extra);
        ExpectSame(edf.LeastWith(t, extra), Naive(deadline, dur, with, t));
      }
    }
  }
}

}  // namespace
}  // namespace optpipe::pipe_offload
