#include "tools/cli.h"

namespace optpipe::cli {

StatusOr<Solution> Solve(const Problem& p, const std::string& method, const SolveOptions&) {
  if (FindMethod(method)) return RunMethod(p, method);
  return InvalidArgument("--method: unknown method '" + method + "'; `optpipe methods` lists them");
}

std::vector<MethodLine> ListMethods(const Problem* p) {
  std::vector<MethodLine> out;
  for (const MethodInfo& m : Methods()) {
    out.push_back({m.name, m.summary, p ? m.applicable(*p) : OkStatus()});
  }
  return out;
}

}  // namespace optpipe::cli
