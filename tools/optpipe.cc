// optpipe: the command-line front end. Each subcommand lives in its own
// tools/cmd_*.cc file and registers itself here.
#include <iostream>

#include "tools/cli.h"

namespace optpipe::cli {

int ExitFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk:
      return kOk;
    case StatusCode::kNotApplicable:
    case StatusCode::kInfeasible:
      return kNotApplicable;
    case StatusCode::kInternal:
      return kInvalid;
    default:
      return kBadInput;
  }
}

int Fail(const Status& st) {
  std::cerr << "optpipe: " << st.message() << "\n";
  return ExitFor(st);
}

}  // namespace optpipe::cli

int main(int argc, char** argv) {
  using namespace optpipe::cli;
  CLI::App app{
      "optpipe: pipeline-parallel training schedules (F/B/W per stage and micro-batch, optional\n"
      "activation offload) that respect device memory. Exit codes: 0 ok, 1 invalid, 2 bad input,\n"
      "3 method not applicable or infeasible."};
  app.require_subcommand(1);
  const std::vector<Command> commands = {
      AddSchedule(app), AddValidate(app), AddBound(app),     AddMethods(app), AddBench(app),
      AddDraw(app),     AddShow(app),     AddImportCsv(app), AddRun(app),     AddPlan(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kBadInput;
  }
  for (const Command& c : commands) {
    if (c.sub->parsed()) return c.run();
  }
  return kBadInput;
}
