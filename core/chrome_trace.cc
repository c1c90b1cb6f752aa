#include "core/chrome_trace.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/memory_curve.h"

namespace optpipe {
namespace {

using nlohmann::json;

// Problem time to trace microseconds, rounded to whole nanoseconds so the
// numbers print short and identically on every run.
double Micros(double t) { return std::round(t * kTraceMicrosPerUnit * 1000.0) / 1000.0; }

int Pid(int device) { return device + 1; }
// Thread ids are unique over the whole trace: some viewers key threads by tid alone.
int Tid(int device, bool copy) { return 2 * device + (copy ? 2 : 1); }

json Meta(const char* what, int pid, std::optional<int> tid, json args) {
  json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", std::move(args)}};
  if (tid) e["tid"] = *tid;
  return e;
}

std::string StagesOf(const Problem& p, int d) {
  std::string s;
  for (int st = 0; st < p.stages(); ++st) {
    if (p.stage_device[st] != d) continue;
    if (!s.empty()) s += ',';
    s += std::to_string(st);
  }
  return s;
}

}  // namespace

std::string ChromeTrace(const Problem& p, const TimedSchedule& t) {
  json events = json::array();
  for (int d = 0; d < p.devices; ++d) {
    const std::string stages = StagesOf(p, d);
    events.push_back(
        Meta("process_name", Pid(d), std::nullopt,
             {{"name", "device " + std::to_string(d) + " (stage" +
                           (stages.find(',') == std::string::npos ? " " : "s ") + stages + ")"}}));
    events.push_back(Meta("process_sort_index", Pid(d), std::nullopt, {{"sort_index", d}}));
    for (bool copy : {false, true}) {
      events.push_back(
          Meta("thread_name", Pid(d), Tid(d, copy), {{"name", copy ? "copy" : "compute"}}));
      events.push_back(
          Meta("thread_sort_index", Pid(d), Tid(d, copy), {{"sort_index", copy ? 1 : 0}}));
    }
  }

  const OpSpace space = p.op_space();
  for (const TimedOp& o : t.ops) {
    if (!space.Contains(o.op)) continue;
    const int d = DeviceOf(p, o.op);
    const bool copy = IsCopy(o.op.type);
    const std::string type(1, TypeLetter(o.op.type));
    events.push_back({{"ph", "X"},
                      {"name", ToString(o.op)},
                      {"cat", type},
                      {"pid", Pid(d)},
                      {"tid", Tid(d, copy)},
                      {"ts", Micros(o.start)},
                      {"dur", std::round((Micros(o.end) - Micros(o.start)) * 1000.0) / 1000.0},
                      {"args",
                       {{"stage", o.op.stage},
                        {"microbatch", o.op.microbatch},
                        {"type", type},
                        {"start", o.start},
                        {"end", o.end}}}});
  }

  const std::vector<MemoryCurve> curves = MemoryCurves(p, t);
  for (int d = 0; d < p.devices; ++d) {
    for (const MemoryStep& s : curves[d].steps) {
      json args = {{"in use", s.value}};
      if (p.memory_limit) args["limit"] = (*p.memory_limit)[d];
      events.push_back({{"ph", "C"},
                        {"name", "memory"},
                        {"pid", Pid(d)},
                        {"ts", Micros(s.t)},
                        {"args", std::move(args)}});
    }
  }

  // One event a line: greppable, and diffs stay small.
  const json other = {
      {"problem", p.name},
      {"method", t.method},
      {"time_scale", "1 problem time unit = 1 ms (ts and dur are in microseconds)"}};
  std::string out =
      "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other.dump() + ",\n\"traceEvents\": [\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    out += events[i].dump();
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

}  // namespace optpipe
