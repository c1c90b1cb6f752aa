#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

#include "core/planner/checkpoint.h"

namespace optpipe::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The memory model of checkpoint.h, written out again from its comment as an
// independent oracle: K stores the activation; R stores the input plus what
// W needs; r stores what W needs; a block's transient is its layers'
// activations minus what they already store; need = l * stored + the largest
// transient. nullopt for modes that break a rule.
struct Scored {
  double recompute, need;
};
std::optional<Scored> Score(const std::vector<LayerCost>& layers, const std::vector<bool>& cuts,
                            const std::vector<LayerMode>& modes, int l, bool split) {
  double stored = 0, recompute = 0, transient = 0, block = 0;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const LayerCost& x = layers[k];
    const double held = split ? std::min(x.retained_for_w, x.activation) : 0.0;
    if (modes[k] == LayerMode::kKeep) {
      stored += x.activation;
      block = 0;
      continue;
    }
    if (modes[k] == LayerMode::kCheckpoint) {
      if (k > 0 && !cuts[k - 1]) return std::nullopt;
      stored += x.input;
      block = 0;
    } else if (k == 0 || modes[k - 1] == LayerMode::kKeep) {
      return std::nullopt;
    }
    stored += held;
    recompute += x.f;
    block += x.activation - held;
    transient = std::max(transient, block);
  }
  return Scored{recompute, l * stored + transient};
}

void ForEachModes(int n, const std::function<void(const std::vector<LayerMode>&)>& fn) {
  std::vector<LayerMode> modes(n, LayerMode::kKeep);
  const LayerMode all[] = {LayerMode::kKeep, LayerMode::kCheckpoint, LayerMode::kRecompute};
  std::function<void(int)> rec = [&](int k) {
    if (k == n) return fn(modes);
    for (LayerMode m : all) {
      modes[k] = m;
      rec(k + 1);
    }
  };
  rec(0);
}

// Small integers: sums are exact, so ties in recompute time are real ties.
std::vector<LayerCost> RandomLayers(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> time(0, 6), act(4, 20), in(1, 3);
  std::vector<LayerCost> layers(n);
  for (LayerCost& x : layers) {
    x.f = time(rng);
    x.b = time(rng);
    x.w = time(rng);
    x.activation = act(rng);
    x.retained_for_w = std::uniform_int_distribution<int>(0, static_cast<int>(x.activation))(rng);
    x.input = in(rng);
  }
  return layers;
}

void CheckAgainstBruteForce(bool split, bool fused, std::uint32_t seed) {
  std::mt19937 rng(seed);
  int fits_all = 0, recomputes = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 7)(rng);
    const std::vector<LayerCost> layers = RandomLayers(rng, n);
    std::vector<bool> cuts(n - 1, true);
    if (fused) {
      for (int k = 0; k + 1 < n; ++k) cuts[k] = rng() % 3 != 0;
    }
    CheckpointOptions opt;
    opt.in_flight = std::uniform_int_distribution<int>(1, 4)(rng);
    opt.split_backward = split;
    opt.budget = std::uniform_int_distribution<int>(0, 14 * n * opt.in_flight)(rng);

    double best_recompute = kInf, best_need = kInf, min_need = kInf;
    ForEachModes(n, [&](const std::vector<LayerMode>& modes) {
      const std::optional<Scored> s = Score(layers, cuts, modes, opt.in_flight, split);
      if (!s) return;
      min_need = std::min(min_need, s->need);
      if (s->need > opt.budget) return;
      if (s->recompute < best_recompute ||
          (s->recompute == best_recompute && s->need < best_need)) {
        best_recompute = s->recompute;
        best_need = s->need;
      }
    });
    const CheckpointSearch r = SearchCheckpoints(layers, cuts, opt);
    EXPECT_DOUBLE_EQ(r.min_need, min_need) << "trial " << trial;
    if (best_recompute == kInf) {
      EXPECT_FALSE(r.best) << "trial " << trial << ": " << r.best->Text();
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(r.best) << "trial " << trial;
    EXPECT_EQ(r.best->recompute, best_recompute) << "trial " << trial << " " << r.best->Text();
    EXPECT_EQ(r.best->need, best_need) << "trial " << trial << " " << r.best->Text();
    // The plan's own numbers agree with the oracle and with EvaluateCheckpoints.
    const std::optional<Scored> s = Score(layers, cuts, r.best->modes, opt.in_flight, split);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->need, r.best->need);
    StatusOr<CheckpointPlan> again = EvaluateCheckpoints(layers, cuts, r.best->modes, opt);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->need, r.best->need);
    double f = 0, b = 0, w = 0;
    for (const LayerCost& x : layers) f += x.f, b += x.b, w += x.w;
    EXPECT_EQ(r.best->f, f);
    EXPECT_EQ(r.best->w, w);
    EXPECT_EQ(r.best->b, b + best_recompute);  // recomputation runs inside B
    EXPECT_LE(r.best->freed_by_b, r.best->activation);
    (best_recompute == 0 ? fits_all : recomputes)++;
  }
  // Each outcome is exercised.
  EXPECT_GT(fits_all, 20);
  EXPECT_GT(recomputes, 50);
  EXPECT_GT(infeasible, 20);
}

TEST(CheckpointDp, EqualsBruteForceSplitBackward) { CheckAgainstBruteForce(true, false, 11); }
TEST(CheckpointDp, EqualsBruteForceFusedBackward) { CheckAgainstBruteForce(false, false, 12); }
TEST(CheckpointDp, EqualsBruteForceWithFastForwardEdges) { CheckAgainstBruteForce(true, true, 13); }

TEST(CheckpointDp, KeepsEverythingWhenItFitsAndRecomputesTheCheapestOtherwise) {
  // Three layers: activation 10 each, W needs 2, input 1; forward 1, 5, 3.
  std::vector<LayerCost> layers(3);
  const double f[] = {1, 5, 3};
  for (int k = 0; k < 3; ++k) {
    layers[k].f = f[k];
    layers[k].b = 2 * f[k];
    layers[k].activation = 10;
    layers[k].retained_for_w = 2;
    layers[k].input = 1;
  }
  const std::vector<bool> cuts = {true, true};
  CheckpointOptions opt;
  opt.in_flight = 2;
  opt.budget = 60;  // 2 * 30: everything kept
  CheckpointSearch r = SearchCheckpoints(layers, cuts, opt);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->Text(), "KKK");
  EXPECT_EQ(r.best->recompute, 0);
  EXPECT_EQ(r.best->activation, 30);
  EXPECT_EQ(r.best->freed_by_b, 24);  // W keeps 2 per layer
  // 50: recompute layer 0 alone: stored 10+10+(1+2) = 23, need 2*23 + 8 = 54 > 50;
  // layers 0 and 2 as two blocks: stored 3+10+3 = 16, need 32 + 8 = 40 (recompute 4).
  opt.budget = 50;
  r = SearchCheckpoints(layers, cuts, opt);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->Text(), "RKR");
  EXPECT_EQ(r.best->recompute, 4);
  EXPECT_EQ(r.best->need, 40);
  EXPECT_EQ(r.best->b, 2 * (1 + 5 + 3) + 4);
  // Nothing fits 10: everything recomputed per layer needs 2*9 + 8 = 26.
  opt.budget = 10;
  r = SearchCheckpoints(layers, cuts, opt);
  EXPECT_FALSE(r.best);
  EXPECT_EQ(r.min_need, 26);
}

TEST(CheckpointDp, EvaluateRejectsModesThatBreakARule) {
  std::vector<LayerCost> layers(2);
  const CheckpointOptions opt;
  EXPECT_FALSE(
      EvaluateCheckpoints(layers, {true}, {LayerMode::kRecompute, LayerMode::kKeep}, opt).ok());
  EXPECT_FALSE(
      EvaluateCheckpoints(layers, {true}, {LayerMode::kKeep, LayerMode::kRecompute}, opt).ok());
  // A block cannot start across a fused boundary, but may run through it.
  EXPECT_FALSE(
      EvaluateCheckpoints(layers, {false}, {LayerMode::kKeep, LayerMode::kCheckpoint}, opt).ok());
  EXPECT_TRUE(
      EvaluateCheckpoints(layers, {false}, {LayerMode::kCheckpoint, LayerMode::kRecompute}, opt)
          .ok());
  EXPECT_FALSE(EvaluateCheckpoints(layers, {true}, {LayerMode::kKeep}, opt).ok());
}

}  // namespace
}  // namespace optpipe::planner
