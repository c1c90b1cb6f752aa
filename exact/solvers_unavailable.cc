// The exact solvers' entry points in a build without lp_solve and CaDiCaL
// (OPTPIPE_WITH_EXACT=OFF): milp says it is not available, the SAT probes
// never apply, so the facade's bounds come from the device and order
// searches alone.
#include <algorithm>

#include "exact/lp_solve_backend.h"
#include "exact/milp.h"
#include "exact/sat_search.h"

namespace optpipe {

bool MilpAvailable() { return false; }

struct SatSession::Racers {};
SatSession::SatSession() : racers_(std::make_unique<Racers>()) {}
SatSession::~SatSession() = default;

bool SatSearchApplies(const Problem&) { return false; }
bool SatSearchIsLarge(const Problem&) { return false; }
std::int64_t SatLaneLiterals(const Problem&, double) { return 0; }

// Not reached (SatSearchApplies is false): nothing proven beyond what was given.
SatSearchResult SearchTimeIndexed(const Problem&, double lower_bound, double incumbent,
                                  const SatSearchOptions&) {
  SatSearchResult r;
  r.bound = std::min(lower_bound, incumbent);
  r.best = incumbent;
  return r;
}
SatSearchResult SearchNeighbourhoods(const Problem&, const SimResult& best,
                                     const SatSearchOptions&) {
  SatSearchResult r;
  r.best = best.objective;
  return r;
}

namespace milp {
LpOutcome SolveWithLpSolve(const Model&, const LpParams&) {
  LpOutcome out;
  out.error = kMilpUnavailable;
  return out;
}
Status WriteModelFile(const Model&, const std::string&) {
  return Status(StatusCode::kNotApplicable, kMilpUnavailable);
}
}  // namespace milp

}  // namespace optpipe
