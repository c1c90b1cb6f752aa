// The planner's input files, JSON: a model, a hardware description and an
// optional profile of measured layer times. Like the problem loader, an
// unknown field is an error and every message names its field
// ("hardware.json: efficiency: must be in (0, 1], got 1.5").
//
// optpipe-model/1 (examples: tests/cases/models/)
//   {"format": "optpipe-model/1", "name": "gpt-10.5b", "notes": "free text",
//    "layers": 38, "hidden": 5120, "ffn_hidden": 20480, "heads": 40,
//    "query_groups": 40, "sequence": 2048, "vocabulary": 51200,
//    "microbatch_size": 1, "dtype_bytes": 2, "gated_mlp": false,
//    "dropout": true, "flash_attention": false, "bytes_per_param": 18}
//   required: layers, hidden, ffn_hidden, heads, sequence, vocabulary.
//   Defaults: query_groups = heads, microbatch_size 1, dtype_bytes 2,
//   gated_mlp false, dropout true, flash_attention false, bytes_per_param 18
//   (see ModelConfig in cost_model.h for what each means).
//
// optpipe-hardware/1 (tests/cases/hardware/h100.json, a100.json)
//   {"format": "optpipe-hardware/1", "name": "h100", "notes": "sources",
//    "peak_tflops": 989, "efficiency": 0.45, "device_bandwidth_gb_s": 450,
//    "host_bandwidth_gb_s": 64, "memory_gib": 80, "reserved_gib": 2,
//    "gpus_per_host_link": 1}
//   required: all but name, notes, reserved_gib (0) and gpus_per_host_link (1).
//   GB/s are 1e9 bytes per second in one direction; GiB are 2^30 bytes.
//
// Profile: measured per-layer times override the formulas (memory stays
// modelled). Either
//   {"format": "optpipe-layer-profile/1", "notes": "...",
//    "transformer": {"f": 3.1, "b": 3.3, "w": 2.9},
//    "embedding": {"f": 0.1, "b": 0, "w": 0.1}, "head": {...}}
//   milliseconds per micro-batch (of the model's microbatch_size); any of the
//   three kinds may be left out, w defaults to 0; or
//   an optpipe-problem/1 measured on an even split of this model: the model's
//   L layers must divide into its S stages, and the transformer-layer time is
//   the stage time over L/S, averaged over the stages that hold neither
//   embedding nor head (stages 1..S-2; all stages when S <= 2). A problem
//   with split_backward false gives b = its fused b + w and w = 0.
#pragma once

#include <string>

#include "core/planner/cost_model.h"
#include "core/status.h"

namespace optpipe::planner {

StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text);
StatusOr<Hardware> ParseHardware(const std::string& json_text);
StatusOr<LayerProfile> ParseLayerProfile(const std::string& json_text, const ModelConfig& m);

// Loading prefixes every message with the path. A model or hardware without a
// name is named after its file.
StatusOr<ModelConfig> LoadModelConfig(const std::string& path);
StatusOr<Hardware> LoadHardware(const std::string& path);
StatusOr<LayerProfile> LoadLayerProfile(const std::string& path, const ModelConfig& m);

}  // namespace optpipe::planner
