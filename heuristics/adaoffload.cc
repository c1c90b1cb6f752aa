// PLACEHOLDER: being implemented; says "not implemented yet" until then.
#include "heuristics/method.h"

namespace optpipe {

Status AdaOffloadApplies(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildAdaOffload(const Problem&) { return NotApplicable("not implemented yet"); }

}  // namespace optpipe
