#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "core/planner/partition.h"

namespace optpipe::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every partition of n layers into S non-empty contiguous stages that cuts only
// where `splittable` allows, as first-layer vectors.
void ForEachPartition(int n, int S, const std::vector<bool>& splittable,
                      const std::function<void(const std::vector<int>&)>& fn) {
  std::vector<int> first = {0};
  std::function<void()> rec = [&] {
    const int stage = static_cast<int>(first.size()) - 1;
    if (stage == S - 1) {
      first.push_back(n);
      fn(first);
      first.pop_back();
      return;
    }
    for (int k = first.back(); k <= n - (S - stage); ++k) {  // k: last layer of `stage`
      if (!splittable[k]) continue;
      first.push_back(k + 1);
      rec();
      first.pop_back();
    }
  };
  rec();
}

double SumSquares(const std::vector<int>& first, const StageCost& cost) {
  double sum = 0;
  for (std::size_t s = 0; s + 1 < first.size(); ++s) {
    const double c = cost(static_cast<int>(s), first[s], first[s + 1] - 1);
    sum += c * c;
  }
  return sum;
}

// Integer-valued layer weights (exact sums, so ties are real ties), a
// per-stage overhead, and a memory-like cap that makes long stages infeasible.
struct RandomCase {
  int n, S;
  std::vector<bool> splittable;
  std::vector<double> weight, overhead;
  double cap;
  double Cost(int s, int i, int k) const {
    double sum = overhead[s];
    for (int j = i; j <= k; ++j) sum += weight[j];
    return sum > cap ? kInf : sum;
  }
};

RandomCase MakeCase(std::mt19937& rng, bool with_fused) {
  RandomCase c;
  c.n = std::uniform_int_distribution<int>(1, 10)(rng);
  c.S = std::uniform_int_distribution<int>(1, std::min(c.n, 4))(rng);
  c.splittable.assign(c.n - 1, true);
  if (with_fused) {
    for (int k = 0; k + 1 < c.n; ++k) c.splittable[k] = rng() % 3 != 0;
  }
  for (int k = 0; k < c.n; ++k) c.weight.push_back(std::uniform_int_distribution<int>(1, 9)(rng));
  for (int s = 0; s < c.S; ++s) c.overhead.push_back(std::uniform_int_distribution<int>(0, 3)(rng));
  c.cap = std::uniform_int_distribution<int>(8, 40)(rng);
  return c;
}

void CheckAgainstBruteForce(bool with_fused, std::uint32_t seed) {
  std::mt19937 rng(seed);
  int solved = 0, infeasible = 0, invalid = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const RandomCase c = MakeCase(rng, with_fused);
    const StageCost cost = [&](int s, int i, int k) { return c.Cost(s, i, k); };
    double best = kInf;
    int count = 0;
    ForEachPartition(c.n, c.S, c.splittable, [&](const std::vector<int>& first) {
      best = std::min(best, PartitionObjective(first, cost));
      ++count;
    });
    double best_sq = kInf;
    ForEachPartition(c.n, c.S, c.splittable, [&](const std::vector<int>& first) {
      if (PartitionObjective(first, cost) == best)
        best_sq = std::min(best_sq, SumSquares(first, cost));
    });
    StatusOr<Partition> p = PartitionLayers(c.n, c.S, c.splittable, cost);
    if (count == 0) {
      ASSERT_FALSE(p.ok());
      EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
      ++invalid;
      continue;
    }
    if (best == kInf) {
      ASSERT_FALSE(p.ok());
      EXPECT_EQ(p.status().code(), StatusCode::kInfeasible) << p.status().message();
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->objective, best) << "trial " << trial;
    ASSERT_EQ(p->first.size(), static_cast<std::size_t>(c.S + 1));
    EXPECT_EQ(p->first.front(), 0);
    EXPECT_EQ(p->first.back(), c.n);
    for (int s = 0; s < c.S; ++s) {
      EXPECT_LT(p->first[s], p->first[s + 1]);
      if (s > 0) {
        EXPECT_TRUE(c.splittable[p->first[s] - 1]) << "cut across a fused boundary";
      }
    }
    EXPECT_EQ(PartitionObjective(p->first, cost), best);
    // Of the optimal partitions, the most balanced.
    EXPECT_EQ(SumSquares(p->first, cost), best_sq) << "trial " << trial;
    ++solved;
  }
  EXPECT_GT(solved, 100);
  EXPECT_GT(infeasible, 5);
  if (with_fused) {
    EXPECT_GT(invalid, 0);
  }
}

TEST(PartitionDp, EqualsBruteForce) { CheckAgainstBruteForce(false, 7); }

TEST(PartitionDp, EqualsBruteForceWithUnsplittableBoundaries) { CheckAgainstBruteForce(true, 8); }

TEST(PartitionDp, BalancesIdenticalLayersAndKeepsFusedPairs) {
  // 6 unit layers, 3 stages: 2+2+2.
  const StageCost sum = [](int, int i, int k) { return static_cast<double>(k - i + 1); };
  StatusOr<Partition> p = PartitionLayers(6, 3, std::vector<bool>(5, true), sum);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->first, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(p->objective, 2);
  // Cuts only after layers 0, 3 and 4: the best is {0}, {1,2,3}, {4,5}, max 3.
  p = PartitionLayers(6, 3, {true, false, false, true, true}, sum);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->objective, 3);
  EXPECT_EQ(p->first, (std::vector<int>{0, 1, 4, 6}));
}

TEST(PartitionDp, RejectsTooManyStagesNamingTheField) {
  const StageCost one = [](int, int, int) { return 1.0; };
  StatusOr<Partition> p = PartitionLayers(4, 3, {true, false, false}, one);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("stages"), std::string::npos);
  p = PartitionLayers(4, 2, {true}, one);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("splittable"), std::string::npos);
}

}  // namespace
}  // namespace optpipe::planner
