# Shared by the CLI test scripts: sourced after they set $tmp, it keeps the
# pass/fail counts and defines `expect`.
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
