// PLACEHOLDER: being implemented; says "not implemented yet" until then.
#include "heuristics/method.h"

namespace optpipe {

Status Interleaved1F1BApplies(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildInterleaved1F1B(const Problem&) { return NotApplicable("not implemented yet"); }

}  // namespace optpipe
