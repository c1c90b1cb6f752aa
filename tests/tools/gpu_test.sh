#!/usr/bin/env bash
# `optpipe run --backend cuda` end to end: run a schedule on the GPU, write its
# profile, schedule the profile, validate and run that. Without a GPU (or a
# CUDA build) the run must exit 3 saying why; the script then skips (77).
# Usage: gpu_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"

unit=$cases/unit-4x8.json
llama=$cases/llama-8dev-offload.json

# run_ok DESCRIPTION OUTPUT EXIT: the run exited 0, lasted the simulated
# makespan plus at most 5% (launches and host wake-ups between ops of 10 ms)
# and peaked at exactly the simulated memory on every device.
run_ok() {
  check "$1" -- python3 - "$2" "$3" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
assert sys.argv[2] == "0", out
sim, meas = map(float, re.search(r"simulated (\S+), measured (\S+) ", out).groups())
assert sim <= meas <= 1.05 * sim, (sim, meas)
rows = [l.split() for l in out.splitlines() if re.match(r"^\d+ ", l)]
assert rows and all(r[1] == r[2] for r in rows), rows
PY
}

want="" expect 0 "schedule 1f1b" -- "$bin" schedule "$unit" --method 1f1b -o "$tmp/s.json"
"$bin" run "$unit" "$tmp/s.json" --backend cuda --iterations 3 --profile-out "$tmp/p.json" \
  --measured-out "$tmp/m.json" >"$tmp/run.out" 2>&1
rc=$?
if [ "$rc" -eq 3 ]; then
  if grep -qE "no usable GPU|no CUDA device|not built" "$tmp/run.out"; then
    echo "gpu: skipped: $(tail -1 "$tmp/run.out")"
    exit 77
  fi
  echo "FAIL: exit 3 without saying why:"; sed 's/^/    /' "$tmp/run.out"; exit 1
fi
run_ok "run 1f1b" "$tmp/run.out" "$rc"
check "measured schedule keeps every lane's order" -- python3 - "$tmp/s.json" "$tmp/m.json" <<'PY'
import json, sys
def lanes(path):
    out = {}
    for o in sorted(json.load(open(path))["ops"], key=lambda o: o["start"]):
        out.setdefault((o["device"], o["stream"]), []).append((o["type"], o["stage"], o["microbatch"]))
    return out
assert lanes(sys.argv[1]) == lanes(sys.argv[2])
PY
# Every op of unit-4x8 lasts 1 unit; a measured one, 1 unit and a kernel launch.
check "profile: op times within 2% of the problem's" -- python3 - "$tmp/p.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["stage_time"]
for k in "fbw":
    assert all(1.0 <= x <= 1.02 for x in t[k]), (k, t[k])
PY
want="" expect 0 "schedule the profile" -- "$bin" schedule "$tmp/p.json" --time-limit 1 -o "$tmp/s2.json"
want="valid" expect 0 "validate that schedule" -- "$bin" validate "$tmp/p.json" "$tmp/s2.json"
"$bin" run "$tmp/p.json" "$tmp/s2.json" --backend cuda --iterations 2 >"$tmp/run2.out" 2>&1
run_ok "run the profile's schedule" "$tmp/run2.out" "$?"

# Offload: O and R on the copy stream, activations in pinned host memory.
want="" expect 0 "schedule llama list" -- "$bin" schedule "$llama" --method list -o "$tmp/l.json"
"$bin" run "$llama" "$tmp/l.json" --backend cuda >"$tmp/run3.out" 2>&1
run_ok "run llama with offload" "$tmp/run3.out" "$?"

# Ctrl-C one second into a 25 s run: the spinning kernels see the abort flag,
# every lane stops, exit 130.
start=$SECONDS
timeout --foreground --preserve-status -s INT 1 "$bin" run "$llama" "$tmp/l.json" --backend cuda \
  --time-scale 0.01 >"$tmp/run4.out" 2>&1
rc=$?
check "Ctrl-C: exit 130 within 6 s, every lane stopped" -- bash -c "[ $rc -eq 130 ] && \
  [ $((SECONDS - start)) -le 6 ] && grep -q 'every lane stopped' '$tmp/run4.out' && \
  ! grep -q 'still running' '$tmp/run4.out'"

echo "gpu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
