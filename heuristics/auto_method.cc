#include "heuristics/auto_method.h"

#include <chrono>
#include <sstream>

namespace optpipe {

StatusOr<AutoResult> RunAuto(const Problem& p, const SearchOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  AutoResult res;
  std::optional<Solution> best;
  for (const MethodInfo& m : Methods()) {
    if (m.name == "auto") continue;
    StatusOr<Solution> s = RunMethod(p, m.name);
    res.seeds.push_back({m.name, s.ok() ? OkStatus() : s.status(), s.ok() ? s->sim.objective : 0.0});
    if (s.ok() && (!best || s->sim.objective < best->sim.objective - 1e-12)) {
      best = std::move(*s);
      res.winner = m.name;
    }
  }
  if (!best) {
    std::ostringstream why;
    for (const SeedOutcome& o : res.seeds) {
      if (o.status.code() == StatusCode::kInfeasible) why << "\n  " << o.status.message();
    }
    return Infeasible("no method fits this problem's memory limit:" + why.str());
  }
  SearchOptions rest = opt;
  rest.time_limit_s =
      opt.time_limit_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StatusOr<SearchResult> search = LocalSearch(p, best->schedule, rest);
  if (!search.ok()) return search.status();
  res.search = std::move(*search);
  StatusOr<Solution> certified = Certify(p, res.search.schedule, "auto");
  if (!certified.ok()) return certified.status();
  res.solution = std::move(*certified);
  return res;
}

}  // namespace optpipe
