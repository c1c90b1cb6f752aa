#include "core/format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/json_parse.h"
#include "core/version.h"

namespace optpipe {
namespace {

using json = nlohmann::json;

constexpr char kProblemFormat[] = "optpipe-problem/1";
constexpr char kScheduleFormat[] = "optpipe-schedule/1";

// x as nlohmann::json's dump() writes a double: the shortest digits that read
// back as x, fixed-point with at least one decimal (1.0, 0.001) where the
// decimal exponent lies in (-4, 15], else d.ddde+XX; null where not finite.
void AppendJsonNumber(std::string& out, double x) {
  if (!std::isfinite(x)) {
    out += "null";
    return;
  }
  if (std::signbit(x)) out += '-';
  x = std::fabs(x);
  if (x == 0) {
    out += "0.0";
    return;
  }
  char buf[32];
  const char* end = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific).ptr;
  const char* e = std::find(static_cast<const char*>(buf), end, 'e');
  // The digits without the point ("d.ddd"), in place: no string per number.
  if (e - buf > 2) buf[1] = buf[0];
  const char* digits = e - buf > 2 ? buf + 1 : buf;
  const int k = static_cast<int>(e - digits);
  int exponent = 0;
  std::from_chars(e + (e[1] == '+' ? 2 : 1), end, exponent);
  const int n = exponent + 1;
  if (k <= n && n <= 15) {
    out.append(digits, k);
    out.append(n - k, '0');
    out += ".0";
  } else if (0 < n && n <= 15) {
    out.append(digits, n);
    out += '.';
    out.append(digits + n, k - n);
  } else if (-4 < n && n <= 0) {
    out += "0.";
    out.append(-n, '0');
    out.append(digits, k);
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out.append(digits + 1, k - 1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const int a = std::abs(exponent);
    if (a < 10) out += '0';
    out += std::to_string(a);
  }
}

// Field readers: each fails with the field's full path in the message.
class Reader {
 public:
  Status status;
  bool ok() const { return status.ok(); }

  void Fail(const std::string& field, const std::string& what) {
    if (status.ok()) status = InvalidArgument(field + ": " + what);
  }

  void AllowOnly(const json& obj, const std::string& prefix, std::set<std::string> allowed) {
    for (const auto& [key, value] : obj.items()) {
      if (!allowed.count(key)) Fail(prefix + key, "unknown field");
    }
  }

  // `field` is the field's name, or a callable that makes it: a schedule's
  // ops name theirs only when one fails (naming every op costs about a second at 800k ops).
  template <class Field>
  int Int(const json& v, const Field& field) {
    if (!v.is_number() || (v.is_number_float() && std::floor(v.get<double>()) != v.get<double>())) {
      Fail(Name(field), "expected an integer, got " + v.dump());
      return 0;
    }
    const double x = v.get<double>();
    if (std::abs(x) > 1e9) {
      Fail(Name(field), "integer out of range: " + v.dump());
      return 0;
    }
    return static_cast<int>(x);
  }

  template <class Field>
  double Number(const json& v, const Field& field) {
    if (!v.is_number()) {
      Fail(Name(field), "expected a number, got " + v.dump());
      return 0;
    }
    return v.get<double>();
  }

  // x|[n]: one number for all, or an array of exactly n numbers.
  std::vector<double> Vec(const json& v, const std::string& field, std::size_t n) {
    if (v.is_number()) return std::vector<double>(n, v.get<double>());
    if (!v.is_array() || v.size() != n) {
      Fail(field, "expected a number or an array of " + std::to_string(n) + " numbers, got " +
                      (v.is_array() ? "an array of " + std::to_string(v.size()) : v.dump()));
      return {};
    }
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i)
      out[i] = Number(v[i], field + "[" + std::to_string(i) + "]");
    return out;
  }

  const json* Object(const json& parent, const char* key, const std::string& field) {
    if (!parent.contains(key)) return nullptr;
    const json& v = parent[key];
    if (!v.is_object()) {
      Fail(field, "expected an object, got " + v.dump());
      return nullptr;
    }
    return &v;
  }

  template <class Field>
  std::string String(const json& v, const Field& field) {
    if (!v.is_string()) {
      Fail(Name(field), "expected a string, got " + v.dump());
      return {};
    }
    return v.get<std::string>();
  }

 private:
  template <class Field>
  static std::string Name(const Field& field) {
    if constexpr (std::is_invocable_v<Field>) {
      return field();
    } else {
      return field;
    }
  }
};

Status CheckFormat(Reader& r, const json& j, const char* expected) {
  if (!j.is_object()) return InvalidArgument("expected a JSON object at the top level");
  if (!j.contains("format"))
    return InvalidArgument(std::string("format: missing; expected \"") + expected + "\"");
  if (!j["format"].is_string() || j["format"].get<std::string>() != expected) {
    return InvalidArgument(std::string("format: expected \"") + expected + "\", got " +
                           j["format"].dump());
  }
  return r.status;
}

json Compact(const std::vector<double>& v) {
  if (!v.empty() && std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; }))
    return v[0];
  return v;
}

Status WithPath(const Status& st, const std::string& path) {
  return st.ok() ? st : Status(st.code(), path + ": " + st.message());
}

}  // namespace

StatusOr<Problem> ParseProblem(const std::string& text, const SizeLimit& limit) {
  StatusOr<json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r;
  if (Status st = CheckFormat(r, j, kProblemFormat); !st.ok()) return st;
  r.AllowOnly(j, "",
              {"format", "name", "devices", "microbatches", "stages_per_device", "placement",
               "split_backward", "stage_time", "comm_time", "offload_time", "memory", "host_links",
               "objective", "generator"});
  Problem p;
  if (j.contains("name")) p.name = r.String(j["name"], "name");
  for (const char* req : {"devices", "microbatches", "stage_time"}) {
    if (!j.contains(req)) r.Fail(req, "missing (required)");
  }
  if (!r.ok()) return r.status;
  p.devices = r.Int(j["devices"], "devices");
  p.microbatches = r.Int(j["microbatches"], "microbatches");
  if (j.contains("stages_per_device"))
    p.stages_per_device = r.Int(j["stages_per_device"], "stages_per_device");
  if (!r.ok()) return r.status;
  if (p.devices < 1)
    return InvalidArgument("devices: must be >= 1 (got " + std::to_string(p.devices) + ")");
  if (p.microbatches < 1)
    return InvalidArgument("microbatches: must be >= 1 (got " + std::to_string(p.microbatches) +
                           ")");
  if (p.stages_per_device < 1) return InvalidArgument("stages_per_device: must be >= 1");
  if (Status st = CheckShape(p.devices, p.stages_per_device, p.microbatches); !st.ok()) return st;
  // Before anything is sized from the counts: the most ops the caller can afford.
  Problem shape = p;  // the counts alone: nothing sized yet
  shape.split_backward = !j.contains("split_backward") || j["split_backward"] != false;
  if (j.contains("offload_time") && !j["offload_time"].is_null()) shape.offload.emplace();
  if (Status st = CheckSize(shape, limit); !st.ok()) return st;
  const std::size_t S = p.stages(), D = p.devices;

  if (!j.contains("placement") || j["placement"].is_string()) {
    if (j.contains("placement")) p.placement = j["placement"].get<std::string>();
    StatusOr<std::vector<int>> placed = PlaceStages(p.placement, p.devices, p.stages_per_device);
    if (!placed.ok()) return placed.status();
    p.stage_device = *placed;
  } else if (j["placement"].is_array()) {
    p.placement = "explicit";
    if (j["placement"].size() != S) {
      return InvalidArgument("placement: expected an array of " + std::to_string(S) +
                             " device ids (devices * stages_per_device), got " +
                             std::to_string(j["placement"].size()));
    }
    for (std::size_t s = 0; s < S; ++s) {
      p.stage_device.push_back(r.Int(j["placement"][s], "placement[" + std::to_string(s) + "]"));
    }
  } else {
    r.Fail("placement", "expected \"interleaved\", \"vshape\" or an array of device ids");
  }
  if (j.contains("split_backward")) {
    if (!j["split_backward"].is_boolean())
      r.Fail("split_backward", "expected true or false");
    else
      p.split_backward = j["split_backward"].get<bool>();
  }

  if (const json* st = r.Object(j, "stage_time", "stage_time")) {
    r.AllowOnly(*st, "stage_time.", {"f", "b", "w"});
    for (const char* req : {"f", "b"}) {
      if (!st->contains(req)) r.Fail(std::string("stage_time.") + req, "missing (required)");
    }
    if (!r.ok()) return r.status;
    p.f = r.Vec((*st)["f"], "stage_time.f", S);
    p.b = r.Vec((*st)["b"], "stage_time.b", S);
    p.w = st->contains("w") ? r.Vec((*st)["w"], "stage_time.w", S) : std::vector<double>(S, 0.0);
  }
  if (!r.ok()) return r.status;
  p.comm = j.contains("comm_time") ? r.Vec(j["comm_time"], "comm_time", S - 1)
                                   : std::vector<double>(S - 1, 0.0);
  if (j.contains("offload_time") && !j["offload_time"].is_null()) {
    p.offload = r.Vec(j["offload_time"], "offload_time", S);
  }
  p.activation.assign(S, 0.0);
  p.freed_by_b.assign(S, 0.0);
  p.static_memory.assign(D, 0.0);
  bool offloadable_given = false;
  if (const json* m = r.Object(j, "memory", "memory")) {
    r.AllowOnly(*m, "memory.", {"activation", "freed_by_b", "offloadable", "static", "limit"});
    if (m->contains("activation")) p.activation = r.Vec((*m)["activation"], "memory.activation", S);
    if (m->contains("freed_by_b")) p.freed_by_b = r.Vec((*m)["freed_by_b"], "memory.freed_by_b", S);
    if (m->contains("offloadable")) {
      p.offloadable = r.Vec((*m)["offloadable"], "memory.offloadable", S);
      offloadable_given = true;
    }
    if (m->contains("static")) p.static_memory = r.Vec((*m)["static"], "memory.static", D);
    if (m->contains("limit") && !(*m)["limit"].is_null()) {
      p.memory_limit = r.Vec((*m)["limit"], "memory.limit", D);
    }
  }
  if (!offloadable_given) p.offloadable = p.activation;

  std::vector<char> grouped(D, 0);
  if (j.contains("host_links")) {
    const json& hl = j["host_links"];
    if (!hl.is_array()) r.Fail("host_links", "expected an array of device-id arrays");
    for (std::size_t g = 0; r.ok() && g < hl.size(); ++g) {
      const std::string field = "host_links[" + std::to_string(g) + "]";
      if (!hl[g].is_array()) {
        r.Fail(field, "expected an array of device ids");
        break;
      }
      std::vector<int> group;
      for (std::size_t k = 0; k < hl[g].size(); ++k) {
        group.push_back(r.Int(hl[g][k], field + "[" + std::to_string(k) + "]"));
        if (group.back() >= 0 && group.back() < p.devices) grouped[group.back()] = 1;
      }
      p.host_links.push_back(group);
    }
  }
  for (std::size_t d = 0; d < D; ++d) {
    if (!grouped[d]) p.host_links.push_back({static_cast<int>(d)});
  }
  if (j.contains("objective")) {
    const std::string o = r.String(j["objective"], "objective");
    if (o == "makespan")
      p.objective = Objective::kMakespan;
    else if (o == "device_span")
      p.objective = Objective::kDeviceSpan;
    else
      r.Fail("objective", "expected \"makespan\" or \"device_span\", got \"" + o + "\"");
  }
  if (!r.ok()) return r.status;
  if (Status st = Validate(p); !st.ok()) return st;
  return p;
}

std::string ToJson(const Problem& p) {
  json j = {{"format", kProblemFormat},
            {"generator", Generator()},
            {"name", p.name},
            {"devices", p.devices},
            {"microbatches", p.microbatches},
            {"stages_per_device", p.stages_per_device}};
  if (p.placement == "explicit")
    j["placement"] = p.stage_device;
  else
    j["placement"] = p.placement;
  j["split_backward"] = p.split_backward;
  j["stage_time"] = {{"f", Compact(p.f)}, {"b", Compact(p.b)}, {"w", Compact(p.w)}};
  j["comm_time"] = p.comm.empty() ? json(0.0) : Compact(p.comm);
  j["offload_time"] = p.offload ? Compact(*p.offload) : json(nullptr);
  j["memory"] = {{"activation", Compact(p.activation)},
                 {"freed_by_b", Compact(p.freed_by_b)},
                 {"offloadable", Compact(p.offloadable)},
                 {"static", Compact(p.static_memory)},
                 {"limit", p.memory_limit ? Compact(*p.memory_limit) : json(nullptr)}};
  j["host_links"] = p.host_links;
  j["objective"] = p.objective == Objective::kMakespan ? "makespan" : "device_span";
  return j.dump(1) + "\n";
}

StatusOr<TimedSchedule> ParseTimedSchedule(const std::string& text) {
  StatusOr<json> parsed = ParseJsonText(text);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  Reader r;
  if (Status st = CheckFormat(r, j, kScheduleFormat); !st.ok()) return st;
  TimedSchedule t;
  if (j.contains("problem")) t.problem = r.String(j["problem"], "problem");
  if (j.contains("method")) t.method = r.String(j["method"], "method");
  for (auto [key, field] : {std::pair{"makespan", &t.makespan},
                            {"device_span", &t.device_span},
                            {"objective", &t.objective},
                            {"bound", &t.info.bound},
                            {"gap", &t.info.gap},
                            {"solve_seconds", &t.info.solve_seconds}}) {
    if (j.contains(key) && !j[key].is_null()) *field = r.Number(j[key], key);
  }
  if (j.contains("termination")) t.info.termination = r.String(j["termination"], "termination");
  if (j.contains("peak_memory")) {
    const json& pm = j["peak_memory"];
    if (!pm.is_array())
      r.Fail("peak_memory", "expected an array of numbers");
    else
      t.peak_memory = r.Vec(pm, "peak_memory", pm.size());
  }
  if (!j.contains("ops") || !j["ops"].is_array()) {
    r.Fail("ops", "missing or not an array");
    return r.status;
  }
  const json& ops = j["ops"];
  t.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size() && r.ok(); ++i) {
    const auto field = [i](const char* name) {
      return [i, name] { return "ops[" + std::to_string(i) + "]" + name; };
    };
    const json& o = ops[i];
    if (!o.is_object()) {
      r.Fail(field("")(), "expected an object");
      break;
    }
    for (const char* req : {"device", "stream", "type", "stage", "microbatch", "start", "end"}) {
      if (!o.contains(req)) r.Fail(field(".")() + req, "missing (required)");
    }
    if (!r.ok()) break;
    TimedOp op;
    op.device = r.Int(o["device"], field(".device"));
    op.op.stage = r.Int(o["stage"], field(".stage"));
    op.op.microbatch = r.Int(o["microbatch"], field(".microbatch"));
    op.start = r.Number(o["start"], field(".start"));
    op.end = r.Number(o["end"], field(".end"));
    const std::string type = r.String(o["type"], field(".type"));
    const std::string stream = r.String(o["stream"], field(".stream"));
    if (!r.ok()) break;
    const std::optional<OpType> parsed_type =
        type.size() == 1 ? TypeOfLetter(type[0]) : std::nullopt;
    if (!parsed_type) {
      r.Fail(field(".type")(), "expected one of F, B, W, O, R, got \"" + type + "\"");
      break;
    }
    op.op.type = *parsed_type;
    const char* want = IsCompute(op.op.type) ? "compute" : "copy";
    if (stream != want)
      r.Fail(field(".stream")(),
             "a " + type + " op runs on stream \"" + want + "\", got \"" + stream + "\"");
    t.ops.push_back(op);
  }
  if (!r.ok()) return r.status;
  return t;
}

std::string ToJson(const TimedSchedule& t) {
  json j = {{"format", kScheduleFormat},
            {"generator", Generator()},
            {"problem", t.problem},
            {"method", t.method}};
  if (t.makespan) j["makespan"] = *t.makespan;
  if (t.device_span) j["device_span"] = *t.device_span;
  if (t.objective) j["objective"] = *t.objective;
  if (t.peak_memory) j["peak_memory"] = *t.peak_memory;
  if (t.info.termination) j["termination"] = *t.info.termination;
  if (t.info.bound) j["bound"] = *t.info.bound;
  if (t.info.gap) j["gap"] = *t.info.gap;
  if (t.info.solve_seconds) j["solve_seconds"] = *t.info.solve_seconds;
  // One op a line keeps the file readable and diffable; written by hand, as
  // nlohmann's dump() of the op would (keys sorted, numbers as below):
  // several times faster than an object per op.
  std::string head = j.dump(1);
  head.pop_back();  // drop the closing brace; the ops array follows
  while (!head.empty() && (head.back() == '\n' || head.back() == ' ')) head.pop_back();
  std::string out = std::move(head);
  out.reserve(out.size() + t.ops.size() * 100 + 16);
  out += ",\n \"ops\": [";
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimedOp& o = t.ops[i];
    out += i ? ",\n  {\"device\":" : "\n  {\"device\":";
    out += std::to_string(o.device);
    out += ",\"end\":";
    AppendJsonNumber(out, o.end);
    out += ",\"microbatch\":";
    out += std::to_string(o.op.microbatch);
    out += ",\"stage\":";
    out += std::to_string(o.op.stage);
    out += ",\"start\":";
    AppendJsonNumber(out, o.start);
    out += IsCompute(o.op.type) ? ",\"stream\":\"compute\",\"type\":\""
                                : ",\"stream\":\"copy\",\"type\":\"";
    out += TypeLetter(o.op.type);
    out += "\"}";
  }
  out += "\n ]\n}\n";
  return out;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st))
    return InvalidArgument(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound(path + ": cannot open for reading");
  // One read of the whole file where its size is known (a stream buffer is
  // far slower on large files); a pipe or other stream, piece by piece.
  std::string text;
  if (const std::streamoff size = in.tellg(); std::filesystem::is_regular_file(st) && size > 0) {
    text.resize(static_cast<std::size_t>(size));
    in.seekg(0);
    if (in.read(text.data(), size) && in.gcount() == size) return text;
    return NotFound(path + ": cannot read");
  }
  in.clear();
  in.seekg(0);
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) return NotFound(path + ": cannot read");
  return os.str();
}

Status WriteFileWith(const std::string& path,
                     const std::function<bool(const std::string& to)>& write) {
  const auto failed = [&](int error) {
    return NotFound(path + ": cannot write (" + std::strerror(error ? error : EIO) + ")");
  };
  // A device or pipe (/dev/stdout, /dev/null) is written in place; a file
  // goes to a temporary beside it, renamed over it only once whole, so a
  // failed or killed write leaves the previous file as it was.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st)) return NotFound(path + ": cannot write: is a directory");
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    errno = 0;
    return write(path) ? OkStatus() : failed(errno);
  }
  // A name no one else uses, created with the mode (and umask) a new file gets.
  const std::filesystem::path target(path);
  const std::string prefix =
      (target.parent_path() / ("." + target.filename().string() + ".tmp")).string();
  static std::atomic<unsigned> serial{0};
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = prefix + std::to_string(getpid()) + "-" + std::to_string(serial++);
    fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return failed(errno);
  close(fd);
  errno = 0;
  if (!write(temp) || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return failed(error);
  }
  return OkStatus();
}

Status WriteFile(const std::string& path, const std::string& content) {
  return WriteFileWith(path, [&](const std::string& to) {
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    return out && out.write(content.data(), static_cast<std::streamsize>(content.size())) &&
           out.flush();
  });
}

Status CheckSize(const Problem& p, const SizeLimit& limit) {
  const std::int64_t ops = OpCount(p);
  if (ops <= limit.max_ops) return OkStatus();
  return InvalidArgument(
      "devices x stages_per_device x microbatches: " + std::to_string(p.devices) + " x " +
      std::to_string(p.stages_per_device) + " x " + std::to_string(p.microbatches) + " gives " +
      std::to_string(ops) + " ops, more than the " + std::to_string(limit.max_ops) + " allowed" +
      (limit.why.empty() ? "" : " (" + limit.why + ")"));
}

StatusOr<Problem> LoadProblem(const std::string& path, const SizeLimit& limit) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<Problem> p = ParseProblem(*text, limit);
  if (!p.ok()) return WithPath(p.status(), path);
  if (p->name.empty()) p->name = std::filesystem::path(path).stem().string();
  return p;
}

StatusOr<TimedSchedule> LoadTimedSchedule(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<TimedSchedule> t = ParseTimedSchedule(*text);
  if (!t.ok()) return WithPath(t.status(), path);
  return t;
}

}  // namespace optpipe
