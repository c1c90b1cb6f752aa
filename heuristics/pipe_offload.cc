// PLACEHOLDER: being implemented; says "not implemented yet" until then.
#include "heuristics/method.h"

namespace optpipe {

Status GisApplies(const Problem&) { return NotApplicable("not implemented yet"); }
Status PipeOffloadApplies(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildGIS(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildGISH(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildPOH(const Problem&) { return NotApplicable("not implemented yet"); }
StatusOr<Schedule> BuildPOF(const Problem&) { return NotApplicable("not implemented yet"); }

}  // namespace optpipe
