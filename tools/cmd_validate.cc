#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/checker.h"
#include "core/format.h"
#include "core/version.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, schedule;
  bool json = false;
};

int Run(const Args& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> t = LoadScheduleFor(a.schedule);
  if (!t.ok()) return Fail(t.status());
  const CheckReport rep = CheckSchedule(*p, *t);
  if (a.json) {
    nlohmann::json violations = nlohmann::json::array();
    for (const Violation& v : rep.violations) {
      violations.push_back({{"kind", v.kind},
                            {"op", v.op ? nlohmann::json(ToString(*v.op)) : nullptr},
                            {"device", v.device >= 0 ? nlohmann::json(v.device) : nullptr},
                            {"time", v.time ? nlohmann::json(*v.time) : nullptr},
                            {"detail", v.detail}});
    }
    std::cout << nlohmann::json{{"format", "optpipe-validation/1"},
                                {"generator", Generator()},
                                {"valid", rep.valid()},
                                {"makespan", rep.makespan},
                                {"device_span", rep.device_span},
                                {"objective", rep.objective},
                                {"peak_memory", rep.peak_memory},
                                {"violations", violations}}
                     .dump(1)
              << "\n";
  } else {
    for (const std::string& e : rep.errors) std::cout << "invalid: " << e << "\n";
    std::cout << (rep.valid() ? "valid" : std::to_string(rep.errors.size()) + " violation(s)")
              << ": makespan " << rep.makespan << ", device_span " << rep.device_span
              << ", peak memory " << Brief(rep.peak_memory) << "\n";
  }
  return rep.valid() ? kOk : kInvalid;
}

}  // namespace

Command AddValidate(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("validate", "Check a timed schedule against its problem");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("schedule", args->schedule, "optpipe-schedule/1 JSON file")->required();
  sub->add_flag("--json", args->json,
                "Print {valid, makespan, device_span, objective, peak_memory, errors}");
  sub->footer(
      "Checks every rule of the format: each op once on its device and stream, durations,\n"
      "dependencies with comm time, one op per lane at a time, memory under the limit, and the\n"
      "makespan/device_span/objective/peak_memory the file reports.\n"
      "Exit 0 when valid, 1 listing every violation, 2 when a file cannot be read.");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
