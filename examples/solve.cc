// Solve a problem file with auto, then with the exact solver for 2 s, and
// print what each found: objective, proven bound, gap and how it ended.
//   build/bin/optpipe_example_solve tests/cases/unit-4x8.json
#include <optpipe/core/format.h>
#include <optpipe/exact/solve.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROBLEM.json\n", argv[0]);
    return 2;
  }
  optpipe::StatusOr<optpipe::Problem> problem = optpipe::LoadProblem(argv[1]);
  if (!problem.ok()) {
    std::fprintf(stderr, "%s\n", problem.status().message().c_str());
    return 2;
  }
  for (const char* method : {"auto", "milp"}) {
    optpipe::SolveOptions options;
    options.method = method;
    options.time_limit_s = 2;
    optpipe::StatusOr<optpipe::SolveResult> r = optpipe::Solve(*problem, options);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", method, r.status().message().c_str());
      return 1;
    }
    std::printf("%-4s objective %g  bound %g  gap %.2f%%  %s\n", method, r->objective, r->bound,
                100 * r->gap, optpipe::ToString(r->termination));
  }
  return 0;
}
