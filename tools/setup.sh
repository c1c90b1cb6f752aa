#!/usr/bin/env bash
# Installs the Debian 12 packages optpipe builds and tests with, when missing.
# Idempotent: does nothing when everything is there. Uses sudo when not root.
set -euo pipefail
packages=(
  cmake g++ make python3
  liblpsolve55-dev libsuitesparse-dev   # exact/: lp_solve (needs colamd)
  libcadical-dev                        # exact/: the SAT solver of the time-grid probes
  libtbb-dev libboost-graph-dev         # parallel search, the op DAG
  nlohmann-json3-dev libcli11-dev       # file formats, command line
  libgtest-dev libbenchmark-dev         # tests and benchmarks
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
