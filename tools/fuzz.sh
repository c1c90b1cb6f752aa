#!/usr/bin/env bash
# Fuzzes every reader under libFuzzer with ASan+UBSan (tests/fuzz/).
#   tools/fuzz.sh [SECONDS_PER_TARGET=600] [TARGET...]
# Builds only the fuzz targets with clang in build-fuzz/, then runs each
# target for the given time on a copy of its kept corpus, two at a time.
# A finding (crash-*, leak-*, timeout-*, oom-*) is left in build-fuzz/findings/
# and the script exits 1: reproduce it with build-fuzz/fuzz/fuzz_TARGET FILE,
# fix it, and keep the file in tests/fuzz/corpus/TARGET/ as a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(problem schedule csv model hardware check)
if ! command -v clang++-14 >/dev/null || ! compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "fuzz: installing clang-14 and libfuzzer-14-dev" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang-14 libfuzzer-14-dev >&2
fi
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPTPIPE_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DOPTPIPE_WITH_CUDA=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
mkdir -p build-fuzz/findings build-fuzz/logs
status=0
run_one() {
  local t=$1 work="build-fuzz/corpus/$1"
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-fuzz/fuzz/fuzz_"$t" "$work" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len=65536 -timeout=20 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/findings/"$t"- >build-fuzz/logs/"$t".log 2>&1
}
pids=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=("$!:$t")
  if [ ${#pids[@]} -ge 2 ]; then
    entry=${pids[0]}; pids=("${pids[@]:1}")
    wait "${entry%%:*}" || { echo "fuzz: ${entry#*:}: FINDING (build-fuzz/logs/${entry#*:}.log)"; status=1; }
  fi
done
for entry in "${pids[@]}"; do
  wait "${entry%%:*}" || { echo "fuzz: ${entry#*:}: FINDING (build-fuzz/logs/${entry#*:}.log)"; status=1; }
done
for t in "${targets[@]}"; do
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" build-fuzz/logs/"$t".log | grep -o "[0-9]*$" || echo "?")
  echo "fuzz: $t: $execs execs in ${seconds} s"
done
exit $status
