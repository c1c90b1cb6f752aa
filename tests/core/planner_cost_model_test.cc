#include <gtest/gtest.h>

#include <filesystem>

#include "core/format.h"
#include "core/planner/config.h"
#include "core/planner/cost_model.h"
#include "tests/testing.h"

namespace optpipe::planner {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/models/" + name + ".json";
}
std::string HardwarePath(const std::string& name) {
  return std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/hardware/" + name + ".json";
}

ModelConfig Gpt105() {
  StatusOr<ModelConfig> m = LoadModelConfig(ModelPath("gpt-10.5b"));
  EXPECT_TRUE(m.ok()) << m.status().message();
  return *m;
}

// GPT 10.5B (L 38, h 5120, a 40, f 20480, s 2048, b 1, V 51200, 16-bit):
//   s*b*h            = 2048 * 5120               = 10,485,760
//   34 s b h         = 34 * 10,485,760           = 356,515,840
//   5 a s^2 b        = 5 * 40 * 2048^2           = 838,860,800
//   activation/layer = 356,515,840 + 838,860,800 = 1,195,376,640 bytes (1.113 GiB)
//   W keeps 32 s b h = 335,544,320 (matmul inputs 14sbh + output gradients 18sbh)
//   head             = 2*2*sbh + 4*s*b*V = 41,943,040 + 419,430,400 = 461,373,440
//   boundary s*b*h*2 = 20,971,520
//   params/layer     = 12 h^2 + 4 h = 314,572,800 + 20,480 = 314,593,280
//   static/layer     = 18 * 314,593,280 = 5,662,679,040 bytes (5.274 GiB)
//   all parameters   = 38 * 314,593,280 + 2 * 51200 * 5120 + 2 * 5120 = 12,478,842,880
TEST(CostModel, MemoryMatchesHandComputedGpt105b) {
  const ModelConfig m = Gpt105();
  EXPECT_DOUBLE_EQ(TransformerActivationBytes(m), 1195376640.0);
  EXPECT_DOUBLE_EQ(TransformerRetainedForWBytes(m), 335544320.0);
  EXPECT_DOUBLE_EQ(HeadActivationBytes(m), 461373440.0);
  EXPECT_DOUBLE_EQ(BoundaryBytes(m), 20971520.0);
  EXPECT_DOUBLE_EQ(TransformerParams(m), 314593280.0);
  EXPECT_DOUBLE_EQ(TotalParams(m), 12478842880.0);

  const ModelCosts c = BuildCosts(m, *HardwarePreset("h100"));
  ASSERT_EQ(c.layers.size(), 40u);
  EXPECT_EQ(c.layers.front().kind, LayerKind::kEmbedding);
  EXPECT_EQ(c.layers.back().kind, LayerKind::kHead);
  EXPECT_DOUBLE_EQ(c.layers[1].activation, 1195376640.0);
  EXPECT_DOUBLE_EQ(c.layers[1].params * c.bytes_per_param, 5662679040.0);
  // Embedding: int64 ids 8*s*b = 16,384 + dropout mask s*b*h = 10,485,760.
  EXPECT_DOUBLE_EQ(c.layers[0].activation, 10502144.0);
  // The embedding and the head stay with their neighbours.
  EXPECT_FALSE(c.splittable.front());
  EXPECT_FALSE(c.splittable.back());
  EXPECT_TRUE(c.splittable[1]);
}

// Without dropout and with flash attention the s^2 terms and masks vanish:
// 2+4+2+2 (attention) + 2+8+8 (MLP) + 4 (norms) = 32 sbh, plus the fp32
// log-sum-exp 4*a*s*b.
TEST(CostModel, FlashAttentionAndNoDropoutDropTheirTerms) {
  ModelConfig m = Gpt105();
  m.dropout = false;
  m.flash_attention = true;
  const double sbh = 2048.0 * 5120;
  EXPECT_DOUBLE_EQ(TransformerActivationBytes(m), 32 * sbh + 4 * 40 * 2048.0);
}

// Forward 24 s b h^2 + 4 s^2 b h; B adds 8 s^2 b h instead of 4; W 24 s b h^2
// (Zero Bubble, Table 1), at 989e12 * 0.45 FLOP/s.
TEST(CostModel, TimesFollowTheFlopCounts) {
  const ModelConfig m = Gpt105();
  const Hardware hw = *HardwarePreset("h100");
  const ModelCosts c = BuildCosts(m, hw);
  const double s = 2048, h = 5120, rate = 989e12 * 0.45 / 1e3;  // FLOP per ms
  EXPECT_NEAR(c.layers[1].f, (24 * s * h * h + 4 * s * s * h) / rate, 1e-9);
  EXPECT_NEAR(c.layers[1].b, (24 * s * h * h + 8 * s * s * h) / rate, 1e-9);
  EXPECT_NEAR(c.layers[1].w, 24 * s * h * h / rate, 1e-9);
  EXPECT_NEAR(c.layers[1].f, 3.0882, 1e-4);
  EXPECT_NEAR(c.layers.back().f, 2 * s * h * 51200 / rate, 1e-9);
  EXPECT_NEAR(c.comm_ms, 20971520.0 / 450e9 * 1e3, 1e-12);
}

TEST(CostModel, LlamaLikeCountsGroupedQueryAttentionAndSwiGlu) {
  StatusOr<ModelConfig> m = LoadModelConfig(ModelPath("llama-8b"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  // 32 * (4096 * (4096 + 2*1024) + 4096^2 + 3 * 4096 * 14336) + 2 * 128256 * 4096 ~ 8.03e9.
  EXPECT_NEAR(TotalParams(*m), 8.03e9, 0.01e9);
}

TEST(CostModel, MeasuredLayerTimesOverrideTheFormulas) {
  const ModelConfig m = Gpt105();
  StatusOr<LayerProfile> prof = ParseLayerProfile(
      R"({"format": "optpipe-layer-profile/1", "transformer": {"f": 1, "b": 2, "w": 3}})", m);
  ASSERT_TRUE(prof.ok()) << prof.status().message();
  const ModelCosts c = BuildCosts(m, *HardwarePreset("h100"), &*prof);
  EXPECT_EQ(c.layers[5].f, 1);
  EXPECT_EQ(c.layers[5].b, 2);
  EXPECT_EQ(c.layers[5].w, 3);
  EXPECT_GT(c.layers.back().f, 0);  // the head keeps its formula
  EXPECT_DOUBLE_EQ(c.layers[5].activation, 1195376640.0);

  // A problem measured on an even split: 38 layers on 2 stages of 19.
  prof = ParseLayerProfile(R"({"format": "optpipe-problem/1", "devices": 2, "microbatches": 4,
                               "stage_time": {"f": [38, 57], "b": 19, "w": 0}})",
                           m);
  ASSERT_TRUE(prof.ok()) << prof.status().message();
  EXPECT_DOUBLE_EQ(prof->transformer->f, 2.5);  // (38 + 57) / 38
  EXPECT_DOUBLE_EQ(prof->transformer->b, 1.0);
  prof = ParseLayerProfile(R"({"format": "optpipe-problem/1", "devices": 4, "microbatches": 4,
                               "stage_time": {"f": 1, "b": 1}})",
                           m);
  ASSERT_FALSE(prof.ok());
  EXPECT_NE(prof.status().message().find("do not split evenly"), std::string::npos);
}

TEST(CostModel, BundledHardwareFilesEqualThePresets) {
  for (const char* name : {"h100", "a100"}) {
    StatusOr<Hardware> file = LoadHardware(HardwarePath(name));
    ASSERT_TRUE(file.ok()) << file.status().message();
    const Hardware preset = *HardwarePreset(name);
    EXPECT_EQ(file->name, preset.name);
    EXPECT_EQ(file->peak_tflops, preset.peak_tflops);
    EXPECT_EQ(file->efficiency, preset.efficiency);
    EXPECT_EQ(file->device_bandwidth_gb_s, preset.device_bandwidth_gb_s);
    EXPECT_EQ(file->host_bandwidth_gb_s, preset.host_bandwidth_gb_s);
    EXPECT_EQ(file->memory_gib, preset.memory_gib);
    EXPECT_EQ(file->reserved_gib, preset.reserved_gib);
    EXPECT_EQ(file->gpus_per_host_link, preset.gpus_per_host_link);
  }
  EXPECT_FALSE(HardwarePreset("tpu").ok());
}

TEST(CostModel, EveryBundledModelLoads) {
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(OPTPIPE_SOURCE_DIR) +
                                                           "/tests/cases/models")) {
    StatusOr<ModelConfig> m = LoadModelConfig(e.path().string());
    EXPECT_TRUE(m.ok()) << e.path() << ": " << m.status().message();
    ++loaded;
  }
  EXPECT_EQ(loaded, 5);
}

TEST(CostModel, RejectsMalformedFilesNamingTheField) {
  const std::string base =
      R"("format": "optpipe-model/1", "layers": 4, "ffn_hidden": 64, "sequence": 8, "vocabulary": 100)";
  const std::vector<std::pair<std::string, std::string>> models = {
      {"{" + base + R"(, "hidden": 16, "heads": 2, "colour": 1})", "colour: unknown field"},
      {"{" + base + R"(, "heads": 2})", "hidden: missing"},
      {"{" + base + R"(, "hidden": "big", "heads": 2})", "hidden: expected an integer"},
      {"{" + base + R"(, "hidden": 16, "heads": 3})", "heads: must divide hidden"},
      {"{" + base + R"(, "hidden": 16, "heads": 4, "query_groups": 3})", "query_groups"},
      {"{" + base + R"(, "hidden": 16, "heads": 2, "dropout": 1})",
       "dropout: expected true or false"},
      {"{" + base + R"(, "hidden": 16, "heads": 2, "dtype_bytes": 3})", "dtype_bytes"},
      {R"({"format": "optpipe-problem/1"})", "format: expected \"optpipe-model/1\""},
  };
  for (const auto& [text, want] : models) {
    StatusOr<ModelConfig> m = ParseModelConfig(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(want), std::string::npos) << m.status().message();
  }
  const std::string hw =
      R"("format": "optpipe-hardware/1", "peak_tflops": 100, "device_bandwidth_gb_s": 100,
         "host_bandwidth_gb_s": 10, "memory_gib": 40)";
  const std::vector<std::pair<std::string, std::string>> hws = {
      {"{" + hw + R"(, "efficiency": 1.5})", "efficiency: must be in (0, 1]"},
      {"{" + hw + "}", "efficiency: missing"},
      {"{" + hw + R"(, "efficiency": 0.5, "nvlink": 1})", "nvlink: unknown field"},
      {"{" + hw + R"(, "efficiency": 0.5, "reserved_gib": 50})", "reserved_gib"},
  };
  for (const auto& [text, want] : hws) {
    StatusOr<Hardware> h = ParseHardware(text);
    ASSERT_FALSE(h.ok()) << text;
    EXPECT_NE(h.status().message().find(want), std::string::npos) << h.status().message();
  }
  StatusOr<LayerProfile> p = ParseLayerProfile(
      R"({"format": "optpipe-layer-profile/1", "transformer": {"f": 1, "b": 1, "x": 1}})",
      Gpt105());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("transformer.x: unknown field"), std::string::npos);
  StatusOr<ModelConfig> missing = LoadModelConfig("/nonexistent/model.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.json"), std::string::npos);
}

}  // namespace
}  // namespace optpipe::planner
