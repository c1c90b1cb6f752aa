// optpipe show: a timed schedule as a text timeline in the terminal.
#include <iostream>
#include <memory>

#include "core/format.h"
#include "core/timeline_text.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, schedule;
  int width = 100;
};

int Run(const Args& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> t = LoadScheduleFor(a.schedule);
  if (!t.ok()) return Fail(t.status());
  if (StatusOr<Schedule> orders = OrdersOf(*p, *t); !orders.ok()) {
    return Fail(Status(orders.status().code(), a.schedule + ": " + orders.status().message()));
  }
  WarnIfInvalid(*p, *t, a.schedule);
  std::cout << TextTimeline(*p, *t, a.width);
  return kOk;
}

}  // namespace

Command AddShow(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("show", "Print a timed schedule as a text timeline");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("schedule", args->schedule,
                  "optpipe-schedule/1 JSON file (from `optpipe schedule`)")
      ->required();
  sub->add_option("-w,--width", args->width, "Characters per line, labels included")
      ->capture_default_str()
      ->check(CLI::Range(20, 100000));
  sub->footer(
      "One line per device (d0, d1, ...), one character per equal slice of time: the op running\n"
      "in the middle of the slice, F forward, B backward, W weight gradient, upper case for even\n"
      "and lower case for odd micro-batches, '.' idle. With offload, a copy line (c0, ...) under\n"
      "each device shows O (offload) and R (reload). A ruler with times closes the picture.\n"
      "Example: optpipe schedule tests/cases/unit-4x8.json --method 1f1b -o s.json &&\n"
      "         optpipe show tests/cases/unit-4x8.json s.json --width 80");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
