#include "core/planner/plan.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>

#include "core/planner/partition.h"

namespace optpipe::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string Gib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / kGiB;
  return os.str();
}

bool SameLayer(const LayerCost& a, const LayerCost& b) {
  return a.kind == b.kind && a.f == b.f && a.b == b.b && a.w == b.w &&
         a.activation == b.activation && a.retained_for_w == b.retained_for_w &&
         a.input == b.input && a.params == b.params;
}

// A stage candidate (layers first..last as stage s): its parameters, budget
// and checkpoint choice. Memoised: the partition DP asks O(S n^2) times, and
// when the transformer layers are identical a range's result depends only on
// whether it holds the embedding / the head, its length and its l.
class StageEvaluator {
 public:
  struct Entry {
    double params = 0, static_bytes = 0, budget = 0;
    CheckpointSearch search;
  };

  StageEvaluator(const ModelCosts& c, const Hardware& hw, const Problem& shape, bool split)
      : c_(c), shape_(shape) {
    opt_.split_backward = split;
    share_ = (hw.memory_gib - hw.reserved_gib) * kGiB / shape.stages_per_device;
    const int n = static_cast<int>(c.layers.size());
    uniform_ = true;
    for (int k = 2; k + 1 < n; ++k) uniform_ = uniform_ && SameLayer(c.layers[k], c.layers[1]);
  }

  const Entry& Get(int stage, int first, int last) {
    const int n = static_cast<int>(c_.layers.size());
    const int l = InFlight(shape_, stage);
    const auto key =
        uniform_ ? std::make_tuple(first == 0 ? 1 : 0, last == n - 1 ? 1 : 0, last - first, l)
                 : std::make_tuple(first, last, -1, l);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Entry e;
    for (int k = first; k <= last; ++k) e.params += c_.layers[k].params;
    e.static_bytes = e.params * c_.bytes_per_param;
    e.budget = share_ - e.static_bytes;
    const std::vector<LayerCost> layers(c_.layers.begin() + first, c_.layers.begin() + last + 1);
    const std::vector<bool> cuts(c_.splittable.begin() + first, c_.splittable.begin() + last);
    CheckpointOptions o = opt_;
    o.in_flight = l;
    // With no room left by the parameters the search still reports the least
    // activation memory, for the message.
    o.budget = std::max(0.0, e.budget);
    e.search = SearchCheckpoints(layers, cuts, o);
    if (e.budget <= 0) e.search.best.reset();
    return memo_.emplace(key, std::move(e)).first->second;
  }

  double Time(int stage, int first, int last) {
    const Entry& e = Get(stage, first, last);
    if (!e.search.best) return kInf;
    return e.search.best->f + e.search.best->b + e.search.best->w;
  }
  // Bytes the stage needs at the least: static + least activations.
  double Need(int stage, int first, int last) {
    const Entry& e = Get(stage, first, last);
    return e.static_bytes + e.search.min_need;
  }
  double share() const { return share_; }

 private:
  const ModelCosts& c_;
  const Problem& shape_;
  CheckpointOptions opt_;
  double share_ = 0;
  bool uniform_ = true;
  std::map<std::tuple<int, int, int, int>, Entry> memo_;
};

// Transformer layers as even as possible (extra ones first), embedding on the
// first stage, head on the last.
std::vector<int> EvenSplit(int n, int S) {
  const int L = n - 2;
  std::vector<int> first = {0};
  int at = 1;
  for (int s = 0; s < S; ++s) {
    at += L / S + (s < L % S ? 1 : 0);
    first.push_back(s + 1 == S ? n : at);
  }
  return first;
}

}  // namespace

int InFlight(const Problem& shape, int stage) {
  const int D = shape.devices, v = shape.stages_per_device, M = shape.microbatches;
  if (v == 1) return std::max(1, std::min(M, shape.stages() - stage));
  const int d = shape.stage_device[stage];
  const int chunks = std::min(M * v, 2 * (D - d - 1) + (v - 1) * D + 1);
  return std::max(1, (chunks + v - 1) / v);
}

std::string LayerRange(const ModelCosts& c, int first, int last) {
  const bool emb = c.layers[first].kind == LayerKind::kEmbedding;
  const bool head = c.layers[last].kind == LayerKind::kHead;
  const int a = first + (emb ? 1 : 0), b = last - (head ? 1 : 0);
  // Transformer layer k is layers[k + 1] when the list starts with the embedding.
  const int off = c.layers.front().kind == LayerKind::kEmbedding ? 1 : 0;
  std::ostringstream os;
  const char* sep = "";
  if (emb) os << "emb", sep = "+";
  if (a <= b) {
    os << sep << "L" << a - off;
    if (b > a) os << "-L" << b - off;
    sep = "+";
  }
  if (head) os << sep << "head";
  return os.str();
}

StatusOr<Plan> BuildPlan(const ModelCosts& c, const Hardware& hw, const PlanOptions& opt) {
  if (Status st = ValidateHardware(hw); !st.ok()) return st;
  if (opt.devices < 1) return InvalidArgument("devices: must be >= 1");
  if (opt.stages_per_device < 1) return InvalidArgument("stages_per_device: must be >= 1");
  if (opt.microbatches < 1) return InvalidArgument("microbatches: must be >= 1");
  const int n = static_cast<int>(c.layers.size());
  if (n < 1 || static_cast<int>(c.splittable.size()) != n - 1) {
    return InvalidArgument("layers: the model has no layers");
  }
  if (Status st = CheckShape(opt.devices, opt.stages_per_device, opt.microbatches); !st.ok())
    return st;
  // Before anything is sized from the counts.
  const std::int64_t stages = std::int64_t{opt.devices} * opt.stages_per_device;
  const int cuts = static_cast<int>(std::count(c.splittable.begin(), c.splittable.end(), true));
  if (stages > cuts + 1) {
    return InvalidArgument(
        "devices: " + std::to_string(opt.devices) + " devices x " +
        std::to_string(opt.stages_per_device) + " stages per device = " + std::to_string(stages) +
        " stages, but the model's layers allow at most " + std::to_string(cuts + 1));
  }
  Problem shape;
  shape.devices = opt.devices;
  shape.stages_per_device = opt.stages_per_device;
  shape.microbatches = opt.microbatches;
  shape.placement = opt.placement;
  StatusOr<std::vector<int>> placed =
      PlaceStages(opt.placement, opt.devices, opt.stages_per_device);
  if (!placed.ok()) return InvalidArgument("placement: " + placed.status().message());
  shape.stage_device = *placed;
  const int S = shape.stages();

  StageEvaluator eval(c, hw, shape, opt.split_backward);
  const StageCost time = [&](int s, int i, int k) { return eval.Time(s, i, k); };
  StatusOr<Partition> part = PartitionLayers(n, S, c.splittable, time);
  if (!part.ok() && part.status().code() != StatusCode::kInfeasible) return part.status();
  if (!part.ok()) {
    // What the closest partition would need: minimise the largest need.
    const StageCost need = [&](int s, int i, int k) { return eval.Need(s, i, k); };
    StatusOr<Partition> closest = PartitionLayers(n, S, c.splittable, need);
    if (!closest.ok()) return part.status();
    std::vector<double> device(opt.devices, hw.reserved_gib * kGiB);
    int worst_stage = 0;
    for (int s = 0; s < S; ++s) {
      const int i = closest->first[s], k = closest->first[s + 1] - 1;
      device[shape.stage_device[s]] += eval.Need(s, i, k);
      if (eval.Need(s, i, k) > eval.Need(worst_stage, closest->first[worst_stage],
                                         closest->first[worst_stage + 1] - 1)) {
        worst_stage = s;
      }
    }
    const int d = shape.stage_device[worst_stage];
    const int i = closest->first[worst_stage], k = closest->first[worst_stage + 1] - 1;
    const StageEvaluator::Entry& e = eval.Get(worst_stage, i, k);
    std::ostringstream os;
    os << "no partition of " << c.name << " into " << S << " stages fits " << hw.memory_gib
       << " GiB per device: the closest needs " << Gib(device[d]) << " GiB on device " << d
       << " (stage " << worst_stage << ", " << LayerRange(c, i, k) << ": " << Gib(e.static_bytes)
       << " GiB weights, gradients and optimizer state + " << Gib(e.search.min_need)
       << " GiB activations for " << InFlight(shape, worst_stage)
       << " micro-batches in flight with full recomputation, + " << hw.reserved_gib
       << " GiB reserved); use more devices, fewer micro-batches in flight or a smaller "
          "micro-batch";
    if (opt.split_backward) {
      os << ", or a fused backward (recomputed layers then keep nothing for W)";
    }
    return Infeasible(os.str());
  }

  Plan plan;
  plan.objective = part->objective;
  plan.even_first = EvenSplit(n, S);
  plan.even_objective = PartitionObjective(plan.even_first, time);

  Problem& p = plan.problem;
  p = shape;
  p.name = !opt.name.empty() ? opt.name
                             : c.name + "-" + std::to_string(opt.devices) + "x" +
                                   std::to_string(opt.stages_per_device) + "-m" +
                                   std::to_string(opt.microbatches);
  p.split_backward = opt.split_backward;
  p.comm.assign(S - 1, c.comm_ms);
  p.static_memory.assign(opt.devices, hw.reserved_gib);
  p.memory_limit = std::vector<double>(opt.devices, hw.memory_gib);
  std::vector<double> offload;
  for (int s = 0; s < S; ++s) {
    const int i = part->first[s], k = part->first[s + 1] - 1;
    const StageEvaluator::Entry& e = eval.Get(s, i, k);
    StagePlan st;
    st.first = i;
    st.last = k;
    st.device = shape.stage_device[s];
    st.in_flight = InFlight(shape, s);
    st.params = e.params;
    st.static_bytes = e.static_bytes;
    st.budget = e.budget;
    st.checkpoints = *e.search.best;
    const CheckpointPlan& ck = st.checkpoints;
    p.f.push_back(ck.f);
    p.b.push_back(ck.b);
    p.w.push_back(ck.w);
    p.activation.push_back(ck.activation / kGiB);
    p.freed_by_b.push_back(std::min(ck.freed_by_b, ck.activation) / kGiB);
    p.static_memory[st.device] += (st.static_bytes + ck.transient) / kGiB;
    offload.push_back(ck.activation / c.host_bytes_per_ms);
    plan.stages.push_back(std::move(st));
  }
  p.offloadable = p.activation;
  if (opt.allow_offload) p.offload = offload;
  p.host_links.clear();
  for (int d = 0; d < opt.devices; d += hw.gpus_per_host_link) {
    std::vector<int> group;
    for (int k = d; k < std::min(opt.devices, d + hw.gpus_per_host_link); ++k) group.push_back(k);
    p.host_links.push_back(group);
  }
  // Only inputs out of any real range get here (a hardware of 1e-300
  // TFLOP/s makes every time infinite): bad input, named by what it gave.
  if (Status st = Validate(p); !st.ok()) {
    return InvalidArgument("the model and hardware give an invalid problem: " + st.message());
  }
  return plan;
}

}  // namespace optpipe::planner
