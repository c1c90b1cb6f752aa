// PLACEHOLDER: being implemented; says "not implemented yet" until then.
#include "heuristics/method.h"

namespace optpipe {

Status VShapeApplies(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildZBV(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildVHalf(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildVMin(const Problem&) { return NotApplicable("not implemented yet"); }

}  // namespace optpipe
