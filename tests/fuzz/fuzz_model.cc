// The planner's readers: model configs, and layer profiles for a fixed model.
#include "core/planner/config.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optpipe;
  const std::string text = fuzz::Text(data, size);
  StatusOr<planner::ModelConfig> m = planner::ParseModelConfig(text);
  static const planner::ModelConfig fixed = *planner::ParseModelConfig(R"({
    "format": "optpipe-model/1", "name": "tiny", "layers": 4, "hidden": 64, "heads": 4,
    "ffn_hidden": 256, "vocabulary": 1000, "sequence": 32})");
  planner::ParseLayerProfile(text, m.ok() ? *m : fixed);
  return 0;
}
