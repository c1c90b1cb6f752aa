// Cost model of a decoder-only transformer for pipeline planning: per-layer
// F/B/W times, activation memory (what F saves, what B and W free), parameter
// memory, and the time of a stage-to-stage send and of a host offload.
//
// The model is a layer list [embedding, L transformer layers, head]; the head
// is the final layer norm, the output projection and the cross-entropy loss.
// The boundary embedding|layer 0 and layer L-1|head cannot be cut, so the
// embedding lands on the first stage and the head on the last.
//
//   ModelConfig m = ...;  Hardware hw = *HardwarePreset("h100");
//   ModelCosts c = BuildCosts(m, hw);         // formulas
//   ModelCosts p = BuildCosts(m, hw, &prof);  // measured layer times win
//
// Notation (Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", §4): s sequence, b micro-batch size, h hidden,
// f ffn hidden, a attention heads, g query groups, h_kv = h*g/a (the key/value
// width; = h without grouped-query attention), V vocabulary, t = dtype bytes.
// Every formula is written next to the code that evaluates it, in cost_model.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace optpipe::planner {

// A transformer configuration (optpipe-model/1, see core/planner/config.h).
struct ModelConfig {
  std::string name;
  int layers = 0;                // L
  int hidden = 0;                // h
  int ffn_hidden = 0;            // f
  int heads = 0;                 // a
  int query_groups = 0;          // g; 0 means a (no grouped-query attention)
  int sequence = 0;              // s
  int vocabulary = 0;            // V
  int microbatch_size = 1;       // b
  int dtype_bytes = 2;           // t: bytes of one activation element (bf16/fp16)
  bool gated_mlp = false;        // SwiGLU (three f x h matrices) instead of GeLU (two)
  bool dropout = true;           // dropout layers and their 1-byte masks
  bool flash_attention = false;  // the a*s*s score tensors are not stored
  // Static bytes per parameter (mixed-precision Adam, no optimizer sharding):
  // 2 bf16 weight + 4 fp32 gradient + 4 fp32 master weight + 4 + 4 Adam
  // moments = 18 (the Megatron-LM accounting; ZeRO (Rajbhandari et al. 2020)
  // counts 16 with 16-bit gradients).
  double bytes_per_param = 18;

  int kv_groups() const { return query_groups > 0 ? query_groups : heads; }
};

// One accelerator model and its links (optpipe-hardware/1).
struct Hardware {
  std::string name;
  double peak_tflops = 0;            // dense 16-bit tensor-core peak, 1e12 FLOP/s
  double efficiency = 0;             // achievable fraction of the peak, (0, 1]
  double device_bandwidth_gb_s = 0;  // device-to-device, one direction, 1e9 B/s
  double host_bandwidth_gb_s = 0;    // device-to-host link, one direction, 1e9 B/s
  double memory_gib = 0;             // device memory capacity, GiB
  double reserved_gib = 0;           // CUDA context, NCCL and allocator slack, GiB
  int gpus_per_host_link = 1;        // devices that share one host link (PCIe switch)
};

// The built-in "h100" and "a100" (the same figures as tests/cases/hardware/).
StatusOr<Hardware> HardwarePreset(const std::string& name);

// Measured times of one micro-batch through one layer of each kind, in ms.
struct LayerTimes {
  double f = 0, b = 0, w = 0;
};
struct LayerProfile {
  std::optional<LayerTimes> embedding, transformer, head;
};

enum class LayerKind { kEmbedding, kTransformer, kHead };
const char* ToString(LayerKind k);

// One layer, one micro-batch. Times in ms, memory in bytes.
struct LayerCost {
  LayerKind kind = LayerKind::kTransformer;
  double f = 0, b = 0, w = 0;
  // What F saves for the backward pass (Korthikanti §4.1-4.3).
  double activation = 0;
  // The part of it W still needs (see RetainedForW in cost_model.cc).
  double retained_for_w = 0;
  // The layer's input tensor: what a recomputation restarts from.
  double input = 0;
  double params = 0;
};

struct ModelCosts {
  std::string name;
  std::vector<LayerCost> layers;  // [embedding, transformer x L, head]
  // splittable[k]: a stage may end after layer k (size layers.size() - 1).
  std::vector<bool> splittable;
  double boundary_bytes = 0;     // s*b*h*t: the tensor sent between stages
  double comm_ms = 0;            // boundary_bytes / device bandwidth
  double host_bytes_per_ms = 0;  // host bandwidth, for offload times
  double bytes_per_param = 18;
};

// Checks ranges (every count >= 1, heads divide hidden, groups divide heads,
// 0 < efficiency <= 1, ...); the message names the field.
Status ValidateModel(const ModelConfig& m);
Status ValidateHardware(const Hardware& hw);

// --- The formulas, one layer, one micro-batch ---
double TransformerParams(const ModelConfig& m);
double TransformerForwardFlops(const ModelConfig& m);
double TransformerActivationBytes(const ModelConfig& m);
double TransformerRetainedForWBytes(const ModelConfig& m);
double HeadActivationBytes(const ModelConfig& m);
double BoundaryBytes(const ModelConfig& m);
double TotalParams(const ModelConfig& m);

// The layer list with formula costs; `profile` replaces the times it gives.
ModelCosts BuildCosts(const ModelConfig& m, const Hardware& hw,
                      const LayerProfile* profile = nullptr);

}  // namespace optpipe::planner
