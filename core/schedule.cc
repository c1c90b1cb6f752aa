#include "core/schedule.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/text_format.h"

namespace optpipe {

Schedule Schedule::Empty(const Problem& p, std::string method) {
  Schedule s;
  s.method = std::move(method);
  s.compute.resize(p.devices);
  s.copy.resize(p.host_links.size());
  return s;
}

std::vector<char> OffloadedSet(const Problem& p, const Schedule& s) {
  std::vector<char> off(static_cast<std::size_t>(p.stages()) * p.microbatches, 0);
  for (const auto& lane : s.copy) {
    for (const Op& op : lane) {
      if (op.type == OpType::kO && p.op_space().Contains(op)) {
        off[static_cast<std::size_t>(op.stage) * p.microbatches + op.microbatch] = 1;
      }
    }
  }
  return off;
}

std::string ToText(const Problem& p, const Schedule& s) {
  std::ostringstream os;
  const OpSpace sp = p.op_space();
  const auto lanes = [&](const std::vector<std::vector<Op>>& v, char tag) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      os << tag << i << ":";
      for (const Op& op : v[i]) {
        os << ' ' << ToString(op);
        if (!sp.Contains(op)) continue;  // not of this problem: Simulate names it
        if (const double r = s.ReleaseOf(sp.Index(op)); r > 0) os << '@' << FormatNumber(r);
      }
      os << '\n';
    }
  };
  lanes(s.compute, 'd');
  lanes(s.copy, 'l');
  return os.str();
}

StatusOr<Schedule> ParseScheduleText(const Problem& p, const std::string& text) {
  Schedule s = Schedule::Empty(p, "text");
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const auto colon = line.find(':');
    const std::string where = "line " + std::to_string(lineno) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (colon == std::string::npos || colon < 2 || (line[0] != 'd' && line[0] != 'l')) {
      return InvalidArgument(where + "expected 'dN:' or 'lN:' followed by ops");
    }
    auto& lanes = line[0] == 'd' ? s.compute : s.copy;
    int lane = -1;
    try {
      lane = std::stoi(line.substr(1, colon - 1));
    } catch (...) {
    }
    if (lane < 0 || lane >= static_cast<int>(lanes.size())) {
      return InvalidArgument(where + "lane '" + line.substr(0, colon) + "' does not exist");
    }
    std::istringstream words(line.substr(colon + 1));
    for (std::string w; words >> w;) {
      const auto at = w.find('@');
      StatusOr<Op> op = ParseOp(std::string_view(w).substr(0, at));
      if (!op.ok()) return InvalidArgument(where + op.status().message());
      if (!p.op_space().Contains(*op)) {
        return InvalidArgument(where + "op " + w +
                               " is outside the problem's stages/micro-batches");
      }
      if (at != std::string::npos) {
        double hold = -1;
        try {
          std::size_t used = 0;
          hold = std::stod(w.substr(at + 1), &used);
          if (used != w.size() - at - 1) hold = -1;
        } catch (...) {
        }
        if (!(hold >= 0) || !std::isfinite(hold)) {
          return InvalidArgument(where + "op " + w + ": the hold after '@' must be a time >= 0");
        }
        if (s.release.empty()) s.release.assign(p.op_space().size(), 0.0);
        s.release[p.op_space().Index(*op)] = hold;
      }
      if (IsCompute(op->type) != (line[0] == 'd')) {
        return InvalidArgument(where + "op " + w + " belongs on a " +
                               (IsCompute(op->type) ? "device" : "host link") + " lane");
      }
      lanes[lane].push_back(*op);
    }
  }
  return s;
}

void SortByStart(std::vector<TimedOp>& ops) {
  std::stable_sort(ops.begin(), ops.end(), [](const TimedOp& a, const TimedOp& b) {
    if (a.start != b.start) return a.start < b.start;
    return a.device < b.device;
  });
}

StatusOr<Schedule> OrdersOf(const Problem& p, const TimedSchedule& t) {
  Schedule s = Schedule::Empty(p, t.method);
  const std::vector<int> link = LinkOfDevice(p);
  std::vector<int> idx(t.ops.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return t.ops[a].start < t.ops[b].start; });
  s.release.assign(p.op_space().size(), 0.0);
  for (int i : idx) {
    const TimedOp& o = t.ops[i];
    if (!p.op_space().Contains(o.op)) {
      return InvalidArgument("ops[" + std::to_string(i) + "]: " + ToString(o.op) +
                             " is outside the problem's stages/micro-batches");
    }
    s.release[p.op_space().Index(o.op)] = std::max(0.0, o.start);
    const int d = DeviceOf(p, o.op);
    if (IsCompute(o.op.type)) {
      s.compute[d].push_back(o.op);
    } else {
      s.copy[link[d]].push_back(o.op);
    }
  }
  return s;
}

}  // namespace optpipe
