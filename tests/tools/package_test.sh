#!/usr/bin/env bash
# optpipe as a dependency: installed, a separate project finds it with
# find_package(optpipe) and runs examples/solve.cc, pkg-config gives the flags
# that build it too; taken as a subproject, it leaves the parent's settings alone.
# Usage: package_test.sh OPTPIPE SOURCE_DIR BUILD_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"
build=$3
prefix=$tmp/prefix
example_out="auto objective 27  bound 27  gap 0.00%  optimal"

check "cmake --install" -- cmake --install "$build" --prefix "$prefix"
want="optpipe 0.1" expect 0 "installed optpipe --version" -- "$prefix/bin/optpipe" --version
check "public headers installed" -- test -f "$prefix/include/optpipe/exact/solve.h"
internal=$(find "$prefix/include" -name '*internal*' -o -name 'scorer.h' -o -name 'json_parse.h')
check "no internal header installed: $internal" -- test -z "$internal"

# find_package(optpipe) from a project of its own.
check "find_package: configure" -- cmake -S "$src/tests/package" -B "$tmp/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
check "find_package: build" -- cmake --build "$tmp/consumer"
want=$example_out expect 0 "find_package: run" -- "$tmp/consumer/solve" "$cases/unit-4x8.json"

# pkg-config, where it is installed.
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  check "pkg-config: build" -- bash -c "g++ -O1 $src/examples/solve.cc -o $tmp/solve_pc \
    \$(pkg-config --cflags --libs optpipe)"
  want=$example_out expect 0 "pkg-config: run" -- "$tmp/solve_pc" "$cases/unit-4x8.json"
fi

# add_subdirectory: no build type forced, no tests, no CLI in the parent (configure only).
check "subproject: configure" -- cmake -S "$src/tests/subproject" -B "$tmp/parent" \
  -DOPTPIPE_SOURCE_DIR="$src"
check "subproject: build type left empty" -- \
  grep -qx "CMAKE_BUILD_TYPE:STRING=" "$tmp/parent/CMakeCache.txt"
check "subproject: no optpipe tests, benchmarks or CLI" -- \
  bash -c "! test -e '$tmp/parent/optpipe/tests' && ! test -e '$tmp/parent/optpipe/tools'"

echo "package: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
