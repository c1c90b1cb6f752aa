#include "core/planner/cost_model.h"

#include <algorithm>
#include <cmath>

namespace optpipe::planner {
namespace {

// Element counts as doubles: s*b*h reaches 1e8 and s*s*a*b 1e11.
struct Dims {
  double s, b, h, f, a, hkv, V, t;
  double mlp_width;  // f, or 2f for a gated MLP (gate and up projections)
  explicit Dims(const ModelConfig& m)
      : s(m.sequence),
        b(m.microbatch_size),
        h(m.hidden),
        f(m.ffn_hidden),
        a(m.heads),
        hkv(static_cast<double>(m.hidden) * m.kv_groups() / m.heads),
        V(m.vocabulary),
        t(m.dtype_bytes),
        mlp_width(m.gated_mlp ? 2.0 * m.ffn_hidden : m.ffn_hidden) {}
};

// Parameters of the four weight matmuls of a layer: QKV h x (h + 2 h_kv),
// output projection h x h, MLP h x 2f (GeLU) or h x 3f (SwiGLU). Biases are
// O(h) and left out. GPT (h_kv = h, f = 4h): 12h^2 (Narayanan et al. 2021, §5.1).
double MatmulParams(const Dims& d) {
  return d.h * (d.h + 2 * d.hkv) + d.h * d.h + d.h * (d.mlp_width + d.f);
}

double Ms(double flops, const Hardware& hw) {
  return flops / (hw.peak_tflops * 1e12 * hw.efficiency) * 1e3;
}

Status Positive(int v, const char* field) {
  if (v < 1)
    return InvalidArgument(std::string(field) + ": must be >= 1 (got " + std::to_string(v) + ")");
  return OkStatus();
}

}  // namespace

const char* ToString(LayerKind k) {
  switch (k) {
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kTransformer:
      return "transformer";
    case LayerKind::kHead:
      return "head";
  }
  return "?";
}

Status ValidateModel(const ModelConfig& m) {
  for (auto [v, field] : {std::pair{m.layers, "layers"},
                          {m.hidden, "hidden"},
                          {m.ffn_hidden, "ffn_hidden"},
                          {m.heads, "heads"},
                          {m.sequence, "sequence"},
                          {m.vocabulary, "vocabulary"},
                          {m.microbatch_size, "microbatch_size"}}) {
    if (Status st = Positive(v, field); !st.ok()) return st;
  }
  if (m.hidden % m.heads != 0) {
    return InvalidArgument("heads: must divide hidden (" + std::to_string(m.hidden) + " % " +
                           std::to_string(m.heads) + " != 0)");
  }
  if (m.query_groups < 0 || m.query_groups > m.heads ||
      (m.query_groups > 0 && m.heads % m.query_groups != 0)) {
    return InvalidArgument("query_groups: must divide heads (" + std::to_string(m.heads) +
                           "), got " + std::to_string(m.query_groups));
  }
  if (m.dtype_bytes != 1 && m.dtype_bytes != 2 && m.dtype_bytes != 4) {
    return InvalidArgument("dtype_bytes: expected 1, 2 or 4, got " + std::to_string(m.dtype_bytes));
  }
  if (!(m.bytes_per_param >= 0) || !std::isfinite(m.bytes_per_param)) {
    return InvalidArgument("bytes_per_param: must be a number >= 0");
  }
  return OkStatus();
}

Status ValidateHardware(const Hardware& hw) {
  for (auto [v, field] : {std::pair{hw.peak_tflops, "peak_tflops"},
                          {hw.device_bandwidth_gb_s, "device_bandwidth_gb_s"},
                          {hw.host_bandwidth_gb_s, "host_bandwidth_gb_s"},
                          {hw.memory_gib, "memory_gib"}}) {
    if (!(v > 0) || !std::isfinite(v)) return InvalidArgument(std::string(field) + ": must be > 0");
  }
  if (!(hw.efficiency > 0 && hw.efficiency <= 1)) {
    return InvalidArgument("efficiency: must be in (0, 1], got " + std::to_string(hw.efficiency));
  }
  if (!(hw.reserved_gib >= 0 && hw.reserved_gib < hw.memory_gib)) {
    return InvalidArgument("reserved_gib: must be >= 0 and < memory_gib");
  }
  if (hw.gpus_per_host_link < 1) return InvalidArgument("gpus_per_host_link: must be >= 1");
  return OkStatus();
}

StatusOr<Hardware> HardwarePreset(const std::string& name) {
  Hardware hw;
  hw.memory_gib = 80;
  hw.reserved_gib = 2;
  hw.efficiency = 0.45;
  if (name == "h100") {
    // H100 SXM5 80GB datasheet: 989 TFLOP/s dense BF16; NVLink 4 900 GB/s
    // total = 450 GB/s per direction; PCIe Gen5 x16 64 GB/s per direction;
    // one host link per GPU (OptPipe, 2025, §3).
    hw.name = "h100";
    hw.peak_tflops = 989;
    hw.device_bandwidth_gb_s = 450;
    hw.host_bandwidth_gb_s = 64;
    hw.gpus_per_host_link = 1;
  } else if (name == "a100") {
    // A100 SXM4 80GB datasheet: 312 TFLOP/s dense BF16; NVLink 3 600 GB/s
    // total = 300 GB/s per direction; PCIe Gen4 x16 32 GB/s per direction;
    // two GPUs share a PCIe switch in a DGX A100 (OptPipe, 2025, §3).
    hw.name = "a100";
    hw.peak_tflops = 312;
    hw.device_bandwidth_gb_s = 300;
    hw.host_bandwidth_gb_s = 32;
    hw.gpus_per_host_link = 2;
  } else {
    return NotFound("hardware: no built-in '" + name + "' (h100, a100, or a JSON file)");
  }
  return hw;
}

double TransformerParams(const ModelConfig& m) {
  const Dims d(m);
  return MatmulParams(d) + 4 * d.h;  // + two layer norms (gain and bias)
}

// Forward FLOPs of one layer: 2 per multiply-add of every weight matmul over
// s*b tokens, plus QK^T and attention-over-values, 2*s*s*h*b each
// (Narayanan et al. 2021, §5.1: 24bsh^2 + 4bs^2h for GPT; no causal discount).
double TransformerForwardFlops(const ModelConfig& m) {
  const Dims d(m);
  return 2 * MatmulParams(d) * d.s * d.b + 4 * d.s * d.s * d.b * d.h;
}

// Activation saved by F, in bytes (Korthikanti et al. 2022, §4.1, eq. 1:
// 34sbh + 5as^2b for 16-bit GPT with dropout), term by term so that GQA,
// gated MLPs, no dropout and flash attention follow from the same list:
//   attention  QKV input t*sbh; Q and K for QK^T t*sb(h + h_kv) [4sbh];
//              softmax output t*as^2b [2as^2b]; its dropout mask as^2b and
//              the dropped-out scores t*as^2b [2as^2b]; V t*sb*h_kv [2sbh];
//              projection input t*sbh; output dropout mask sbh   -> 11sbh + 5as^2b
//   MLP        fc1 input t*sbh; activation-function input t*sb*f (2f gated)
//              [8sbh]; fc2 input t*sbf [8sbh]; dropout mask sbh  -> 19sbh
//   norms      two layer-norm inputs 2*t*sbh                     -> 4sbh
// Flash attention keeps no score tensors, only the fp32 log-sum-exp 4*a*s*b
// (its other inputs Q, K, V and the output are counted above).
double TransformerActivationBytes(const ModelConfig& m) {
  const Dims d(m);
  const double sb = d.s * d.b, drop = m.dropout ? 1.0 : 0.0;
  double attn = d.t * sb * d.h + d.t * sb * (d.h + d.hkv) + d.t * sb * d.hkv + d.t * sb * d.h +
                drop * sb * d.h;
  if (m.flash_attention) {
    attn += 4 * d.a * sb;
  } else {
    const double scores = d.a * d.s * sb;
    attn += d.t * scores + drop * (scores + d.t * scores);
  }
  const double mlp = d.t * sb * d.h + d.t * sb * d.mlp_width + d.t * sb * d.f + drop * sb * d.h;
  const double norms = 2 * d.t * sb * d.h;
  return attn + mlp + norms;
}

// What a layer holds from B until W when the backward is split (Zero Bubble,
// Qi et al. 2024, §2): W computes dW = X^T dY for every weight matmul, so it
// needs each matmul's input X (saved by F) and output gradient dY (made by B):
//   inputs     QKV t*sbh, projection t*sbh, fc1 t*sbh, fc2 t*sbf     [14sbh]
//   gradients  QKV t*sb(h + 2h_kv), projection t*sbh, fc1 t*sb*f (2f
//              gated), fc2 t*sbh                                     [18sbh]
// = 32sbh for GPT. The problem format frees memory but never allocates it at
// B, so these gradients are booked as part of F's activation: B frees the
// activation minus this, W frees this. Layer-norm weight gradients are tiny
// and computed in B.
double TransformerRetainedForWBytes(const ModelConfig& m) {
  const Dims d(m);
  const double sb = d.s * d.b;
  const double inputs = d.t * sb * (3 * d.h + d.f);
  const double grads = d.t * sb * ((d.h + 2 * d.hkv) + d.h + d.mlp_width + d.h);
  return std::min(inputs + grads, TransformerActivationBytes(m));
}

// Output layer (Korthikanti §4.3): final layer-norm input t*sbh, output
// projection input t*sbh, and the logits the cross entropy keeps in fp32, 4sbV.
double HeadActivationBytes(const ModelConfig& m) {
  const Dims d(m);
  return 2 * d.t * d.s * d.b * d.h + 4 * d.s * d.b * d.V;
}

double BoundaryBytes(const ModelConfig& m) {
  const Dims d(m);
  return d.t * d.s * d.b * d.h;
}

// Embedding V*h (a pipeline keeps its own copy of the output matrix on the
// last stage even when the two are tied, as Megatron-LM does), L layers, and
// the output matrix with the final norm. Learned position embeddings (s*h)
// are left out.
double TotalParams(const ModelConfig& m) {
  const Dims d(m);
  return d.V * d.h + m.layers * TransformerParams(m) + d.V * d.h + 2 * d.h;
}

ModelCosts BuildCosts(const ModelConfig& m, const Hardware& hw, const LayerProfile* profile) {
  const Dims d(m);
  const double sb = d.s * d.b;
  ModelCosts c;
  c.name = m.name;
  c.bytes_per_param = m.bytes_per_param;
  c.boundary_bytes = BoundaryBytes(m);
  // A send of the s*b*h boundary tensor over the device link (one direction).
  c.comm_ms = c.boundary_bytes / (hw.device_bandwidth_gb_s * 1e9) * 1e3;
  c.host_bytes_per_ms = hw.host_bandwidth_gb_s * 1e9 / 1e3;

  // Embedding: a gather (F) and a scatter-add of its gradient (W): memory-
  // bound and small next to a layer, so 0 FLOPs. It keeps the int64 token ids
  // (8sb) and the dropout mask of its output (sbh, Korthikanti §4.3); W needs
  // the ids and the output gradient t*sbh.
  LayerCost emb;
  emb.kind = LayerKind::kEmbedding;
  emb.activation = 8 * sb + (m.dropout ? sb * d.h : 0.0);
  emb.retained_for_w = std::min(emb.activation, 8 * sb + d.t * sb * d.h);
  emb.input = 8 * sb;
  emb.params = d.V * d.h;

  // Transformer layer. B (activation gradients) repeats the forward matmuls
  // with the weights transposed and differentiates both operands of QK^T and
  // of attention-over-values: 2*P*s*b + 8*s^2*b*h. W (weight gradients) is
  // one matmul per weight: 2*P*s*b (Zero Bubble, Qi et al. 2024, Table 1:
  // F 24bsh^2 + 4bs^2h, B 24bsh^2 + 8bs^2h, W 24bsh^2).
  LayerCost layer;
  layer.kind = LayerKind::kTransformer;
  const double matmul = 2 * MatmulParams(d) * sb;
  layer.f = Ms(TransformerForwardFlops(m), hw);
  layer.b = Ms(matmul + 8 * d.s * sb * d.h, hw);
  layer.w = Ms(matmul, hw);
  layer.activation = TransformerActivationBytes(m);
  layer.retained_for_w = TransformerRetainedForWBytes(m);
  layer.input = c.boundary_bytes;
  layer.params = TransformerParams(m);

  // Head: the logits matmul s*b x h x V forward (2sbhV), its input gradient
  // (2sbhV) and its weight gradient (2sbhV) (Narayanan et al. 2021: the
  // 6*s*b*h*V logit term of their FLOP count). W needs the projection input
  // t*sbh and the logits gradient t*sbV.
  LayerCost head;
  head.kind = LayerKind::kHead;
  const double logits = 2 * sb * d.h * d.V;
  head.f = head.b = head.w = Ms(logits, hw);
  head.activation = HeadActivationBytes(m);
  head.retained_for_w = std::min(head.activation, d.t * sb * d.h + d.t * sb * d.V);
  head.input = c.boundary_bytes;
  head.params = d.V * d.h + 2 * d.h;

  if (profile) {
    auto apply = [](LayerCost& l, const std::optional<LayerTimes>& t) {
      if (t) l.f = t->f, l.b = t->b, l.w = t->w;
    };
    apply(emb, profile->embedding);
    apply(layer, profile->transformer);
    apply(head, profile->head);
  }

  c.layers.push_back(emb);
  for (int i = 0; i < m.layers; ++i) c.layers.push_back(layer);
  c.layers.push_back(head);
  const std::size_t n = c.layers.size();
  c.splittable.assign(n - 1, true);
  c.splittable.front() = false;  // the embedding stays with the first layer
  c.splittable.back() = false;   // the head stays with the last layer
  return c;
}

}  // namespace optpipe::planner
