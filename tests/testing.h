// Test helpers: small problems built in code, random heterogeneous problems,
// and brute-force enumeration of every per-device order of a tiny problem.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/checker.h"
#include "core/format.h"
#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "heuristics/method.h"

namespace optpipe::testing {

// A problem from a JSON body (the "format" field is added); aborts the test on error.
Problem MakeProblem(const std::string& json_fields);

// Unit-time problem: F=B=W=1 (fused B = b+w), comm 0, activation 1.
Problem UnitProblem(int devices, int microbatches, bool split_backward);

// Random heterogeneous problem: times in [0.5, 2], comm in [0, 0.3], activation memory,
// optional offload; no memory limit unless `limit_factor` > 0 (limit = static +
// limit_factor * sum of a stage's activations over M).
Problem RandomProblem(std::mt19937& rng, int devices, int microbatches, int v = 1,
                      bool split_backward = true, bool offload = false);

// Calls fn(schedule) for every combination of per-device compute orders that
// respect each (stage, micro-batch)'s own F -> B -> W order. With `offload`,
// also every subset of offloaded activations and every order of its O/R ops per
// host link that keeps each O before its R (activations whose offloadable
// part is 0 stay: moving nothing only delays their B). Only for tiny problems.
void ForEachSchedule(const Problem& p, bool offload,
                     const std::function<void(const Schedule&)>& fn);

// The least objective over every schedule ForEachSchedule enumerates and,
// where one reloads under a memory limit, over those orders held to the
// earliest times of every order in which each device allocates (its
// forwards and reloads start): a reload started as soon as its link allows
// may take the memory a forward needs, and the simulator replays orders as
// soon as possible (infinity if none simulates; `count` receives how many
// it simulated). The makespan optimum; for device_span, the least over
// those schedules (a device's first op held later may shorten its span).
double BruteForceOptimum(const Problem& p, bool offload, long* count = nullptr);

// Tiny problems to compare with brute force, drawn from `rng`: unit costs,
// random costs, and random costs under a memory limit that binds (room for
// one activation fewer than 1F1B keeps), at 2x2, 2x3 (fused only) and 3x2
// with either backward; then a random interleaved 2x1 with two chunks.
struct NamedProblem {
  std::string name;
  Problem p;
  bool offload = false;  // a brute force over its orders also tries offloads
};
std::vector<NamedProblem> TinyProblems(std::mt19937& rng);

// Two devices with two chunks each, one micro-batch, offload, room for one of
// a device's two activations: the optimum is the critical path, 16, reached
// only with reloads held (every order replayed as soon as possible gives at
// least 22, its reloads taking the memory a second-chunk forward needs).
Problem HeldReloadsProblem();

// Two devices, two micro-batches, offload, room for about 1.75 activations:
// the core bounds stop at 10.36, the optimum (brute force) is 10.55.
Problem OffloadTwoByTwo();

// Runs a method through the registry and checks its output independently: the
// checker accepts it and agrees with the simulator on the objective. Returns an
// empty Solution (after a test failure) when the method fails.
Solution Solve(const Problem& p, const std::string& method);

// Path of a bundled example problem (tests/cases/NAME.json).
std::string CasePath(const std::string& name);

// The schedule an exact search returns (OrderSearchResult, SatSearchResult)
// is one: it simulates to the objective reported and the checker accepts it.
template <class Result>
void ExpectSchedule(const Problem& p, const Result& r, const std::string& what) {
  ASSERT_TRUE(r.schedule.has_value()) << what;
  StatusOr<SimResult> sim = Simulate(p, *r.schedule);
  ASSERT_TRUE(sim.ok()) << what << ": " << sim.status().message();
  EXPECT_NEAR(sim->objective, r.best, 1e-6) << what;
  EXPECT_TRUE(CheckSchedule(p, ToTimed(p, *r.schedule, *sim)).valid()) << what;
}

// An exact search (search(lower_bound, incumbent) -> OrderSearchResult or
// SatSearchResult) on a problem whose optimum is known: from no bound and an
// incumbent far above it finds the optimum and proves it; given the optimum
// as incumbent it proves it and finds nothing better.
template <class Search>
void ExpectFindsAndProves(const Problem& p, double optimum, const Search& search,
                          const std::string& what) {
  constexpr double kTol = 1e-6;
  auto r = search(0.0, 2 * optimum + 1);
  EXPECT_TRUE(r.optimal) << what;
  EXPECT_NEAR(r.best, optimum, kTol * optimum) << what;
  EXPECT_NEAR(r.bound, optimum, kTol * optimum) << what;
  ExpectSchedule(p, r, what);
  r = search(0.0, optimum);
  EXPECT_TRUE(r.optimal) << what;
  EXPECT_FALSE(r.schedule.has_value()) << what;
  EXPECT_NEAR(r.bound, optimum, kTol * optimum) << what;
}

}  // namespace optpipe::testing
