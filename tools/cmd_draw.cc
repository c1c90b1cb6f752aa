// optpipe draw: a timed schedule as a picture (SVG), a Perfetto trace or a PyTorch CSV.
#include <iostream>
#include <memory>

#include "core/chrome_trace.h"
#include "core/format.h"
#include "core/gantt_svg.h"
#include "core/pytorch_csv.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, schedule, out;
  int width = 0;
  bool no_memory = false;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int Run(const Args& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> t = LoadScheduleFor(a.schedule);
  if (!t.ok()) return Fail(t.status());
  // Ops outside the problem cannot be placed; anything else is drawn as recorded.
  StatusOr<Schedule> orders = OrdersOf(*p, *t);
  if (!orders.ok())
    return Fail(Status(orders.status().code(), a.schedule + ": " + orders.status().message()));
  WarnIfInvalid(*p, *t, a.schedule);
  std::string content;
  if (EndsWith(a.out, ".json")) {
    content = ChromeTrace(*p, *t);
  } else if (EndsWith(a.out, ".csv")) {
    StatusOr<std::string> csv = ToPytorchCsv(*p, *orders);
    if (!csv.ok()) return Fail(csv.status());
    content = std::move(*csv);
  } else {
    GanttOptions opt;
    opt.width_px = a.width;
    opt.memory = !a.no_memory;
    content = GanttSvg(*p, *t, opt);
  }
  if (Status st = WriteFile(a.out, content); !st.ok()) return Fail(st);
  Progress() << "optpipe: wrote " << a.out << "\n";
  return kOk;
}

}  // namespace

Command AddDraw(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("draw", "Draw a timed schedule: Gantt SVG, Perfetto trace or PyTorch CSV");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("schedule", args->schedule,
                  "optpipe-schedule/1 JSON file (from `optpipe schedule`)")
      ->required();
  sub->add_option("-o,--output", args->out,
                  "Output file; its extension picks the kind (.svg, .json, .csv)")
      ->required();
  sub->add_option("--width", args->width,
                  "SVG width in pixels (default: wide enough for the labels)")
      ->check(kNonNegative);
  sub->add_flag("--no-memory", args->no_memory, "SVG without the per-device memory curves");
  sub->footer(
      "Kinds, by the extension of -o:\n"
      "  .svg   Gantt chart for people: a row per device with its compute lane (F blue, B orange,\n"
      "         W green), copy lane (O purple, R yellow) and memory curve with the limit as a\n"
      "         dashed red line; grey is idle; labels are micro-batches (stage:micro-batch when\n"
      "         v > 1). Open it in a browser; hover an op for its name and times.\n"
      "  .json  Chrome trace: open in https://ui.perfetto.dev or chrome://tracing; a process per\n"
      "         device, threads compute and copy, memory as a counter; 1 time unit = 1 ms.\n"
      "  .csv   PyTorch pipelining CSV (one row per rank; F, I, W or B), the input of\n"
      "         _PipelineScheduleRuntime._load_csv(path, format=\"compute_only\").\n"
      "A schedule that fails `optpipe validate` is drawn as recorded, with a warning.\n"
      "Example: optpipe schedule tests/cases/unit-4x8.json --method zb-h1 -o s.json &&\n"
      "         optpipe draw tests/cases/unit-4x8.json s.json -o s.svg");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
