#include "core/checker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "core/text_format.h"

namespace optpipe {

CheckReport CheckSchedule(const Problem& p, const TimedSchedule& t, double tol) {
  CheckReport rep;
  const auto add = [&](const char* kind, const TimedOp* o, int device, std::optional<double> time,
                       std::string detail) {
    rep.errors.push_back(detail);
    rep.violations.push_back(
        {kind, o ? std::optional<Op>(o->op) : std::nullopt, device, time, std::move(detail)});
  };
  const int S = p.stages(), M = p.microbatches, D = p.devices;
  const std::vector<int> link = LinkOfDevice(p);

  // 1. Every op at most once, in range, on its device, with its duration.
  const OpSpace sp = p.op_space();
  std::vector<const TimedOp*> at(sp.size(), nullptr);  // by OpSpace index
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const TimedOp& o = t.ops[i];
    const auto name = [&] { return "op " + ToString(o.op); };
    if (o.op.stage < 0 || o.op.stage >= S || o.op.microbatch < 0 || o.op.microbatch >= M) {
      add("out_of_range", &o, o.device, std::nullopt,
          name() + ": stage or micro-batch out of range");
      continue;
    }
    if (o.op.type == OpType::kW && !p.split_backward) {
      add("not_in_problem", &o, o.device, std::nullopt, name() + ": the problem fuses W into B");
      continue;
    }
    if (IsCopy(o.op.type) && !p.offload) {
      add("not_in_problem", &o, o.device, std::nullopt, name() + ": the problem allows no offload");
      continue;
    }
    if (!std::isfinite(o.start) || !std::isfinite(o.end)) {
      add("not_finite", &o, o.device, std::nullopt,
          name() + ": start and end must be finite numbers");
      continue;
    }
    const TimedOp*& slot = at[sp.Index(o.op)];
    if (slot) {
      add("duplicate", &o, o.device, o.start, name() + ": appears more than once");
      continue;
    }
    slot = &o;
    if (o.device != p.stage_device[o.op.stage]) {
      add("wrong_device", &o, o.device, o.start,
          name() + ": on device " + std::to_string(o.device) + ", but stage " +
              std::to_string(o.op.stage) + " is on device " +
              std::to_string(p.stage_device[o.op.stage]));
    }
    const double dur = Duration(p, o.op);
    if (std::abs((o.end - o.start) - dur) > tol) {
      add("duration", &o, o.device, o.start,
          name() + " on device " + std::to_string(o.device) + ": runs " +
              FormatNumber(o.start, 10) + ".." + FormatNumber(o.end, 10) + " (" +
              FormatNumber(o.end - o.start, 10) + "), but its duration is " +
              FormatNumber(dur, 10));
    }
  }
  const auto find = [&](OpType ty, int s, int m) { return at[sp.Index(ty, s, m)]; };
  std::vector<const TimedOp*> ops;  // the ops in index order
  for (const TimedOp* o : at) {
    if (o) ops.push_back(o);
  }

  // 2. Completeness and dependencies.
  const auto after = [&](const TimedOp* later, const TimedOp* earlier, double lag) {
    if (later && earlier && later->start + tol < earlier->end + lag) {
      add("dependency", later, later->device, later->start,
          "op " + ToString(later->op) + " on device " + std::to_string(later->device) +
              " starts at " + FormatNumber(later->start, 10) + ", before op " +
              ToString(earlier->op) + " ends at " + FormatNumber(earlier->end, 10) +
              (lag > 0 ? " + comm " + FormatNumber(lag, 10) : ""));
    }
  };
  for (int s = 0; s < S; ++s) {
    for (int m = 0; m < M; ++m) {
      const TimedOp* F = find(OpType::kF, s, m);
      const TimedOp* B = find(OpType::kB, s, m);
      const TimedOp* W = find(OpType::kW, s, m);
      const TimedOp* O = find(OpType::kO, s, m);
      const TimedOp* R = find(OpType::kR, s, m);
      for (auto [op, ty] : {std::pair{F, 'F'}, {B, 'B'}, {W, 'W'}}) {
        if (!op && (ty != 'W' || p.split_backward)) {
          add("missing", nullptr, p.stage_device[s], std::nullopt,
              "op " + std::to_string(s) + ty + std::to_string(m) + " is missing");
        }
      }
      if (!O != !R) {
        add("unmatched_copy", O ? O : R, p.stage_device[s], std::nullopt,
            "op " + std::to_string(s) + (O ? "O" : "R") + std::to_string(m) + " has no matching " +
                (O ? "reload" : "offload"));
      }
      const double up = s > 0 && p.stage_device[s - 1] != p.stage_device[s] ? p.comm[s - 1] : 0;
      const double down = s + 1 < S && p.stage_device[s + 1] != p.stage_device[s] ? p.comm[s] : 0;
      if (s > 0) after(F, find(OpType::kF, s - 1, m), up);
      if (s + 1 < S) after(B, find(OpType::kB, s + 1, m), down);
      after(B, F, 0);
      after(W, B, 0);
      after(O, F, 0);
      after(R, O, 0);
      after(B, R, 0);
    }
  }

  // 3. One op at a time per compute lane (device) and copy lane (host link).
  std::vector<std::vector<const TimedOp*>> lanes(D + p.host_links.size());
  for (const TimedOp* o : ops) {
    const int d = p.stage_device[o->op.stage];
    lanes[IsCompute(o->op.type) ? d : D + link[d]].push_back(o);
  }
  for (std::size_t r = 0; r < lanes.size(); ++r) {
    auto& l = lanes[r];
    std::sort(l.begin(), l.end(), [](auto* a, auto* b) {
      return std::tie(a->start, a->end) < std::tie(b->start, b->end);
    });
    for (std::size_t i = 1; i < l.size(); ++i) {
      if (l[i]->start + tol < l[i - 1]->end) {
        add("overlap", l[i], l[i]->device, l[i]->start,
            "op " + ToString(l[i]->op) + " starts at " + FormatNumber(l[i]->start, 10) + " on " +
                (r < std::size_t(D) ? "device " + std::to_string(r)
                                    : "host link " + std::to_string(r - D)) +
                " while op " + ToString(l[i - 1]->op) + " runs until " +
                FormatNumber(l[i - 1]->end, 10));
      }
    }
  }

  // 4. Memory sweep per device: frees at an instant count before allocations.
  rep.peak_memory = p.static_memory;
  std::vector<std::vector<std::tuple<double, int, double, const TimedOp*>>> ev(D);
  for (const TimedOp* o : ops) {
    const int d = p.stage_device[o->op.stage];
    if (double a = Allocates(p, o->op); a > 0) ev[d].emplace_back(o->start, 1, a, o);
    if (double f = Frees(p, o->op); f > 0) ev[d].emplace_back(o->end, 0, -f, o);
  }
  for (int d = 0; d < D; ++d) {
    std::sort(ev[d].begin(), ev[d].end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
    });
    double mem = p.static_memory[d];
    bool reported = false;
    for (const auto& [time, kind, delta, o] : ev[d]) {
      mem += delta;
      rep.peak_memory[d] = std::max(rep.peak_memory[d], mem);
      if (p.memory_limit && !reported && mem > (*p.memory_limit)[d] + tol) {
        add("memory", o, d, time,
            "memory on device " + std::to_string(d) + " reaches " + FormatNumber(mem, 10) +
                " at t=" + FormatNumber(time, 10) + " when " + ToString(o->op) + " starts; limit " +
                FormatNumber((*p.memory_limit)[d], 10));
        reported = true;  // one message a device; later ones follow from it
      }
    }
  }

  // 5. Metrics, and the values the file reports.
  double first = std::numeric_limits<double>::infinity(), last = -first;
  std::vector<double> dfirst(D, first), dlast(D, last);
  const TimedOp *first_op = nullptr, *last_op = nullptr;
  for (const TimedOp* o : ops) {
    if (o->start < first) first = o->start, first_op = o;
    if (o->end > last) last = o->end, last_op = o;
    const int d = p.stage_device[o->op.stage];
    dfirst[d] = std::min(dfirst[d], o->start);
    dlast[d] = std::max(dlast[d], o->end);
  }
  rep.makespan = ops.empty() ? 0 : last - first;
  for (int d = 0; d < D; ++d) {
    if (dlast[d] >= dfirst[d]) rep.device_span = std::max(rep.device_span, dlast[d] - dfirst[d]);
  }
  rep.objective = p.objective == Objective::kMakespan ? rep.makespan : rep.device_span;
  const auto reported = [&](const std::optional<double>& v, double actual, const char* field) {
    if (v && std::abs(*v - actual) > tol) {
      std::string why;
      if (first_op && field[0] != 'p') {  // say which ops set the span
        why = " (op " + ToString(first_op->op) + " starts first at " +
              FormatNumber(first_op->start, 10) + ", op " + ToString(last_op->op) +
              " ends last at " + FormatNumber(last_op->end, 10) + ")";
      }
      add("reported_value", nullptr, -1, std::nullopt,
          std::string(field) + ": file says " + FormatNumber(*v, 10) + ", the ops give " +
              FormatNumber(actual, 10) + why);
    }
  };
  reported(t.makespan, rep.makespan, "makespan");
  reported(t.device_span, rep.device_span, "device_span");
  reported(t.objective, rep.objective, "objective");
  if (t.peak_memory) {
    if (t.peak_memory->size() != std::size_t(D)) {
      add("reported_value", nullptr, -1, std::nullopt,
          "peak_memory: expected " + std::to_string(D) + " values, got " +
              std::to_string(t.peak_memory->size()));
    } else {
      for (int d = 0; d < D; ++d) {
        reported((*t.peak_memory)[d], rep.peak_memory[d],
                 ("peak_memory[" + std::to_string(d) + "]").c_str());
      }
    }
  }
  return rep;
}

}  // namespace optpipe
