#!/usr/bin/env bash
# README.md's examples, run. Every `$ build/bin/optpipe ...` line of its code
# blocks runs, in the README's order, in a scratch directory that sees the
# repository's tests/ (so `tests/cases/...` resolves) and keeps the files one
# example writes for the next; each must exit as the README shows: 0, or N
# where the line ends in `# exit N`. Every line of the README's C++ block must
# appear in examples/solve.cc, and its Python block in examples/solve.py, which the tests run.
# Usage: readme_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"
readme=$src/README.md

ln -s "$src/tests" "$tmp/tests"
cd "$tmp" || exit 1

# The command lines of the README's code blocks (```...``` fences).
commands=$(awk '/^```/ { inside = !inside; next } inside && /^\$ build\/bin\/optpipe / { print }' \
  "$readme")
ran=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  cmd=${line#'$ build/bin/optpipe '}
  code=0
  if [[ $cmd =~ ^(.*[^[:space:]])[[:space:]]+#[[:space:]]*exit[[:space:]]+([0-9]+)[[:space:]]*$ ]]; then
    cmd=${BASH_REMATCH[1]}
    code=${BASH_REMATCH[2]}
  fi
  # Plain words only: the line runs without a shell, as the README shows it.
  if [[ $cmd =~ [\"\'\`\$\;\&\|\<\>\*\?\(\)\\] ]]; then
    echo "FAIL: README: '$line': quotes and shell syntax are not supported here"
    failed=$((failed + 1))
    continue
  fi
  read -r -a args <<<"$cmd"
  want="" expect "$code" "README: optpipe $cmd" -- "$bin" "${args[@]}"
  ran=$((ran + 1))
done <<<"$commands"
# A README whose examples the pattern above no longer finds must not pass.
if [ "$ran" -lt 5 ]; then
  echo "FAIL: README: found $ran '\$ build/bin/optpipe' example lines, expected at least 5"
  failed=$((failed + 1))
fi

# The C++ and Python blocks, line by line (indentation aside), in the examples the tests run.
in_example() {  # in_example LANG EXAMPLE
  local block trimmed line missing=0
  block=$(awk -v fence="^\`\`\`$1\$" '$0 ~ fence { inside = 1; next } /^```/ { inside = 0 } inside' \
    "$readme")
  if [ -z "$block" ]; then
    echo "FAIL: README: no \`\`\`$1 block"
    failed=$((failed + 1))
    return
  fi
  trimmed=$(sed 's/^[[:space:]]*//' "$2")
  while IFS= read -r line; do
    line=${line#"${line%%[![:space:]]*}"}
    [ -n "$line" ] || continue
    if ! grep -qxF -- "$line" <<<"$trimmed"; then
      echo "FAIL: README's $1 line is not in $(basename "$2"): $line"
      missing=$((missing + 1))
    fi
  done <<<"$block"
  if [ "$missing" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
in_example cpp "$src/examples/solve.cc"
in_example python "$src/examples/solve.py"

echo "readme: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
