// runtime/peers.h in a build without MPI: one process runs every device.
#include <cstdlib>

#include "runtime/peers.h"

namespace optpipe::runtime {

bool LaunchedAsRanks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

StatusOr<std::unique_ptr<Peers>> ConnectPeers() {
  return Status(StatusCode::kNotApplicable,
                "optpipe was built without MPI: one process per device needs Open MPI "
                "(libopenmpi-dev, tools/setup.sh) at build time");
}

}  // namespace optpipe::runtime
