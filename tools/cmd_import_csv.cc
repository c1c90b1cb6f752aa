// optpipe import-csv: a PyTorch pipelining CSV (compute_only) as a timed optpipe schedule.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/checker.h"
#include "core/format.h"
#include "core/pytorch_csv.h"
#include "core/simulator.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, csv, out, method = "pytorch-csv";
};

int Run(const Args& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<std::string> text = ReadFile(a.csv);
  if (!text.ok()) return Fail(text.status());
  StatusOr<Schedule> s = FromPytorchCsv(*p, *text);
  if (!s.ok()) return Fail(Status(s.status().code(), a.csv + ": " + s.status().message()));
  s->method = a.method;
  // Deadlock or memory that never fits: kInfeasible, exit 3.
  StatusOr<SimResult> r = Simulate(*p, *s);
  if (!r.ok()) {
    return Fail(
        Status(r.status().code(), a.csv + ": the order cannot run: " + r.status().message()));
  }
  const TimedSchedule t = ToTimed(*p, *s, *r);
  const CheckReport rep = CheckSchedule(*p, t);
  if (!rep.valid()) {
    return Fail(Internal("the simulated schedule fails the checker: " + rep.errors.front()));
  }
  const std::string json = ToJson(t);
  if (a.out.empty() || a.out == "-") {
    std::cout << json;
  } else if (Status st = WriteFile(a.out, json); !st.ok()) {
    return Fail(st);
  }
  Progress() << "optpipe: " << a.csv << ": makespan " << r->makespan << ", device_span "
             << r->device_span << ", bubble " << 100 * r->bubble_ratio << "%, peak memory "
             << nlohmann::json(r->peak_memory).dump() << "\n";
  return kOk;
}

}  // namespace

Command AddImportCsv(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "import-csv", "Time a PyTorch pipelining CSV schedule and write it as optpipe-schedule/1");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file the CSV schedules")
      ->required();
  sub->add_option("csv", args->csv, "CSV file: one row per rank, cells like 0F0, 1I0, 1W0, 0B0")
      ->required();
  sub->add_option("-o,--output", args->out,
                  "Write the optpipe-schedule/1 file here (default: stdout)");
  sub->add_option("--method", args->method, "Method name recorded in the schedule")
      ->capture_default_str();
  sub->footer(
      "The CSV is what torch.distributed.pipelining's _dump_csv(path, format=\"compute_only\")\n"
      "writes and _load_csv reads: row r lists rank r's actions in order, "
      "{stage}{action}{micro-batch}\n"
      "with the global stage index and F forward, I backward for the input, W backward for the\n"
      "weights, B full backward (I and W at once); empty cells are idle steps and are skipped.\n"
      "Rank r must be device r of the problem. In a problem with split_backward true, B becomes\n"
      "our B followed at once by W; with split_backward false only F and B are allowed.\n"
      "The order is timed by the simulator (every op as early as its dependencies and memory\n"
      "allow) and checked before it is written.\n"
      "Exit 2: the CSV is malformed (the message names row and column, 1-based) or does not match\n"
      "the problem; exit 3: the order deadlocks or never fits the memory limit.\n"
      "Example: optpipe schedule tests/cases/unit-4x8.json --method zb-h1 --csv zb.csv &&\n"
      "         optpipe import-csv tests/cases/unit-4x8.json zb.csv -o zb.json");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
