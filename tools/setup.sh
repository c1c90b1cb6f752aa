#!/usr/bin/env bash
# Installs what optpipe builds and tests with, when missing: Debian 12
# packages, and from PyPI the Python module's build tools and pytest.
# Idempotent: does nothing when everything is there. Uses sudo when not root.
#   tools/setup.sh [--with-torch]   (--with-torch: PyTorch, for the pipelining test)
set -euo pipefail
packages=(
  cmake g++ make python3 pkg-config
  liblpsolve55-dev libsuitesparse-dev   # exact/: lp_solve (needs colamd)
  libcadical-dev                        # exact/: the SAT solver of the time-grid probes
  libtbb-dev libboost-graph-dev         # parallel search, the op DAG
  nlohmann-json3-dev libcli11-dev       # file formats, command line
  libsqlite3-dev                        # online/: the schedule cache
  openmpi-bin libopenmpi-dev            # runtime/: one process per device under mpirun
  libgtest-dev libbenchmark-dev         # tests and benchmarks
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present" >&2
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
fi

# Python: the module's build (nanobind, scikit-build-core) and its tests (pytest).
python=$(command -v python3)
wanted=(nanobind scikit-build-core pytest)
[ "${1:-}" = "--with-torch" ] && wanted+=(torch numpy)  # numpy: pipelining passes shapes with it
absent=()
for m in "${wanted[@]}"; do
  "$python" -m pip show -q "$m" >/dev/null 2>&1 || absent+=("$m")
done
if [ ${#absent[@]} -gt 0 ]; then
  echo "setup: pip installing ${absent[*]}" >&2
  "$python" -m pip install -q --disable-pip-version-check "${absent[@]}" >&2 ||
    echo "setup: pip failed: the Python module and its tests will be off" >&2
fi
