// PLACEHOLDER: being implemented; says "not implemented yet" until then.
#include "heuristics/method.h"

namespace optpipe {

Status ZeroBubbleApplies(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildZBH1(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildZBH2(const Problem&) { return NotApplicable("not implemented yet"); }

}  // namespace optpipe
