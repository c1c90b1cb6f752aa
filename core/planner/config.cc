#include "core/planner/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/format.h"
#include "core/json_parse.h"

namespace optpipe::planner {
namespace {

using json = nlohmann::json;

// Field readers that keep the first error, naming the field.
class Reader {
 public:
  Status status;
  bool ok() const { return status.ok(); }
  void Fail(const std::string& field, const std::string& what) {
    if (status.ok()) status = InvalidArgument(field + ": " + what);
  }
  void AllowOnly(const json& obj, const std::string& prefix, const std::set<std::string>& allowed) {
    for (const auto& [key, value] : obj.items()) {
      if (!allowed.count(key)) Fail(prefix + key, "unknown field");
    }
  }
  void Require(const json& obj, const std::string& prefix, const std::set<std::string>& keys) {
    for (const std::string& k : keys) {
      if (!obj.contains(k)) Fail(prefix + k, "missing (required)");
    }
  }
  void Int(const json& obj, const char* key, int* out) {
    if (!obj.contains(key)) return;
    const json& v = obj[key];
    if (!v.is_number() || std::floor(v.get<double>()) != v.get<double>() ||
        std::abs(v.get<double>()) > 1e9) {
      Fail(key, "expected an integer, got " + v.dump());
      return;
    }
    *out = static_cast<int>(v.get<double>());
  }
  void Number(const json& obj, const std::string& prefix, const char* key, double* out) {
    if (!obj.contains(key)) return;
    const json& v = obj[key];
    if (!v.is_number()) {
      Fail(prefix + key, "expected a number, got " + v.dump());
      return;
    }
    *out = v.get<double>();
  }
  void Bool(const json& obj, const char* key, bool* out) {
    if (!obj.contains(key)) return;
    if (!obj[key].is_boolean()) {
      Fail(key, "expected true or false, got " + obj[key].dump());
      return;
    }
    *out = obj[key].get<bool>();
  }
  void String(const json& obj, const char* key, std::string* out) {
    if (!obj.contains(key)) return;
    if (!obj[key].is_string()) {
      Fail(key, "expected a string, got " + obj[key].dump());
      return;
    }
    *out = obj[key].get<std::string>();
  }
};

StatusOr<json> Parse(const std::string& text, const char* format) {
  StatusOr<json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return parsed.status();
  json j = std::move(*parsed);
  if (!j.is_object()) return InvalidArgument("expected a JSON object at the top level");
  if (format) {
    if (!j.contains("format")) {
      return InvalidArgument(std::string("format: missing; expected \"") + format + "\"");
    }
    if (!j["format"].is_string() || j["format"].get<std::string>() != format) {
      return InvalidArgument(std::string("format: expected \"") + format + "\", got " +
                             j["format"].dump());
    }
  }
  return j;
}

Status WithPath(const Status& st, const std::string& path) {
  return st.ok() ? st : Status(st.code(), path + ": " + st.message());
}

std::string Stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

StatusOr<LayerProfile> FromProblem(const std::string& text, const ModelConfig& m) {
  StatusOr<Problem> p = ParseProblem(text);
  if (!p.ok()) return p.status();
  const int S = p->stages();
  if (m.layers % S != 0) {
    return InvalidArgument("devices: the model's " + std::to_string(m.layers) +
                           " layers do not split evenly into the profile's " + std::to_string(S) +
                           " stages (devices x stages_per_device)");
  }
  const double per_stage = static_cast<double>(m.layers) / S;
  const int lo = S >= 3 ? 1 : 0, hi = S >= 3 ? S - 2 : S - 1;
  LayerTimes t;
  for (int s = lo; s <= hi; ++s) {
    t.f += p->f[s];
    t.b += p->split_backward ? p->b[s] : p->b[s] + p->w[s];
    t.w += p->split_backward ? p->w[s] : 0.0;
  }
  const double k = per_stage * (hi - lo + 1);
  t.f /= k, t.b /= k, t.w /= k;
  LayerProfile out;
  out.transformer = t;
  return out;
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const std::string& text) {
  StatusOr<json> parsed = Parse(text, "optpipe-model/1");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r;
  r.AllowOnly(j, "",
              {"format", "name", "notes", "layers", "hidden", "ffn_hidden", "heads", "query_groups",
               "sequence", "vocabulary", "microbatch_size", "dtype_bytes", "gated_mlp", "dropout",
               "flash_attention", "bytes_per_param"});
  r.Require(j, "", {"layers", "hidden", "ffn_hidden", "heads", "sequence", "vocabulary"});
  ModelConfig m;
  std::string notes;
  r.String(j, "name", &m.name);
  r.String(j, "notes", &notes);
  r.Int(j, "layers", &m.layers);
  r.Int(j, "hidden", &m.hidden);
  r.Int(j, "ffn_hidden", &m.ffn_hidden);
  r.Int(j, "heads", &m.heads);
  r.Int(j, "query_groups", &m.query_groups);
  r.Int(j, "sequence", &m.sequence);
  r.Int(j, "vocabulary", &m.vocabulary);
  r.Int(j, "microbatch_size", &m.microbatch_size);
  r.Int(j, "dtype_bytes", &m.dtype_bytes);
  r.Bool(j, "gated_mlp", &m.gated_mlp);
  r.Bool(j, "dropout", &m.dropout);
  r.Bool(j, "flash_attention", &m.flash_attention);
  r.Number(j, "", "bytes_per_param", &m.bytes_per_param);
  if (!r.ok()) return r.status;
  if (Status st = ValidateModel(m); !st.ok()) return st;
  return m;
}

StatusOr<Hardware> ParseHardware(const std::string& text) {
  StatusOr<json> parsed = Parse(text, "optpipe-hardware/1");
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r;
  r.AllowOnly(j, "",
              {"format", "name", "notes", "peak_tflops", "efficiency", "device_bandwidth_gb_s",
               "host_bandwidth_gb_s", "memory_gib", "reserved_gib", "gpus_per_host_link"});
  r.Require(
      j, "",
      {"peak_tflops", "efficiency", "device_bandwidth_gb_s", "host_bandwidth_gb_s", "memory_gib"});
  Hardware hw;
  std::string notes;
  r.String(j, "name", &hw.name);
  r.String(j, "notes", &notes);
  r.Number(j, "", "peak_tflops", &hw.peak_tflops);
  r.Number(j, "", "efficiency", &hw.efficiency);
  r.Number(j, "", "device_bandwidth_gb_s", &hw.device_bandwidth_gb_s);
  r.Number(j, "", "host_bandwidth_gb_s", &hw.host_bandwidth_gb_s);
  r.Number(j, "", "memory_gib", &hw.memory_gib);
  r.Number(j, "", "reserved_gib", &hw.reserved_gib);
  r.Int(j, "gpus_per_host_link", &hw.gpus_per_host_link);
  if (!r.ok()) return r.status;
  if (Status st = ValidateHardware(hw); !st.ok()) return st;
  return hw;
}

StatusOr<LayerProfile> ParseLayerProfile(const std::string& text, const ModelConfig& m) {
  StatusOr<json> parsed = Parse(text, nullptr);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (j.contains("format") && j["format"] == "optpipe-problem/1") return FromProblem(text, m);
  if (!j.contains("format") || j["format"] != "optpipe-layer-profile/1") {
    return InvalidArgument(
        "format: expected \"optpipe-layer-profile/1\" or \"optpipe-problem/1\", got " +
        (j.contains("format") ? j["format"].dump() : std::string("nothing")));
  }
  Reader r;
  r.AllowOnly(j, "", {"format", "notes", "embedding", "transformer", "head"});
  LayerProfile out;
  for (auto [key, slot] : {std::pair{"embedding", &out.embedding},
                           {"transformer", &out.transformer},
                           {"head", &out.head}}) {
    if (!j.contains(key)) continue;
    const std::string prefix = std::string(key) + ".";
    const json& t = j[key];
    if (!t.is_object()) {
      r.Fail(key, "expected an object {\"f\", \"b\", \"w\"}");
      break;
    }
    r.AllowOnly(t, prefix, {"f", "b", "w"});
    r.Require(t, prefix, {"f", "b"});
    LayerTimes lt;
    r.Number(t, prefix, "f", &lt.f);
    r.Number(t, prefix, "b", &lt.b);
    r.Number(t, prefix, "w", &lt.w);
    for (auto [v, name] : {std::pair{lt.f, "f"}, {lt.b, "b"}, {lt.w, "w"}}) {
      if (!(v >= 0) || !std::isfinite(v)) r.Fail(prefix + name, "must be a finite number >= 0");
    }
    *slot = lt;
  }
  if (!r.ok()) return r.status;
  return out;
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<ModelConfig> m = ParseModelConfig(*text);
  if (!m.ok()) return WithPath(m.status(), path);
  if (m->name.empty()) m->name = Stem(path);
  return m;
}

StatusOr<Hardware> LoadHardware(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<Hardware> hw = ParseHardware(*text);
  if (!hw.ok()) return WithPath(hw.status(), path);
  if (hw->name.empty()) hw->name = Stem(path);
  return hw;
}

StatusOr<LayerProfile> LoadLayerProfile(const std::string& path, const ModelConfig& m) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<LayerProfile> p = ParseLayerProfile(*text, m);
  if (!p.ok()) return WithPath(p.status(), path);
  return p;
}

}  // namespace optpipe::planner
