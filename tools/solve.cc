#include <iostream>

#include "heuristics/auto_method.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

// auto, with its story on stderr: what every seed scored, which won, what the
// search added.
StatusOr<Solution> SolveAuto(const Problem& p, const SearchOptions& opt) {
  StatusOr<AutoResult> r = RunAuto(p, opt);
  if (!r.ok()) return r.status();
  for (const SeedOutcome& s : r->seeds) {
    std::cerr << "optpipe:   " << s.method << std::string(s.method.size() < 11 ? 11 - s.method.size() : 1, ' ');
    if (s.status.ok()) {
      std::cerr << s.objective << (s.method == r->winner ? "  <- best seed" : "") << "\n";
    } else {
      std::string why = s.status.message();
      if (why.size() > 90) why = why.substr(0, 87) + "...";
      std::cerr << "-  (" << why << ")\n";
    }
  }
  const SearchResult& sr = r->search;
  std::cerr << "optpipe: local search from " << r->winner << ": " << sr.start_objective << " -> "
            << sr.sim.objective << " (" << sr.improvements << " improvements, " << sr.evaluations
            << " evaluations in " << sr.seconds << " s, stopped: " << ToString(sr.stop) << ")\n";
  return std::move(r->solution);
}

}  // namespace

StatusOr<Solution> Solve(const Problem& p, const std::string& method, const SolveOptions& opt) {
  SearchOptions search;
  search.time_limit_s = opt.time_limit_s;
  if (method == "auto") return SolveAuto(p, search);
  if (FindMethod(method)) return RunMethod(p, method, search);
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
