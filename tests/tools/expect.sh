# Shared by the CLI test scripts, sourced with their arguments (OPTPIPE
# SOURCE_DIR): sets $bin, $src, $cases and a scratch $tmp removed on exit,
# keeps the pass/fail counts and defines `expect` and `check`.
bin=$1
src=$2
cases=$src/tests/cases
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# expect CODE DESCRIPTION -- command...; also greps stderr+stdout for $want if set.
expect() {
  local code=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL: $what: exit $rc, expected $code"; sed 's/^/    /' "$tmp/out"; failed=$((failed + 1)); return
  fi
  if [ -n "${want:-}" ] && ! grep -qF -- "$want" "$tmp/out"; then
    echo "FAIL: $what: output lacks '$want'"; sed 's/^/    /' "$tmp/out"; failed=$((failed + 1)); return
  fi
  passed=$((passed + 1))
}

# check DESCRIPTION -- command...: passes when the command exits 0.
check() {
  local what=$1
  shift 2
  if "$@" >"$tmp/out" 2>&1; then passed=$((passed + 1)); else
    echo "FAIL: $what"; sed 's/^/    /' "$tmp/out"; failed=$((failed + 1)); fi
}
