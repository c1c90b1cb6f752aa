#!/usr/bin/env bash
# One process per device under Open MPI's mpirun (CPU backend): the schedule's op order per
# lane (as one process runs it), exact peaks, a measured makespan within 5% of the
# simulation, the payload checksum chain right for every micro-batch; with offload on 8 ranks;
# and a rank that hangs, fails or is killed stops every other one, non-zero, saying where;
# run --online across ranks.
# Skips (77) without mpirun or in a build without MPI.
# Usage: mpi_test.sh OPTPIPE SOURCE_DIR [timing|faults]   (default: both; faults also runs
# --online on 4 ranks, which has no timing to check)
set -u
part=${3:-all}
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"
command -v mpirun >/dev/null || { echo "mpi: no mpirun (openmpi-bin): skipped"; exit 77; }
mpi=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
unit=$cases/unit-4x8.json
llama=$cases/llama-8dev-offload.json

"$bin" schedule "$unit" --method zb-h1 -o "$tmp/zb.json" -q
"${mpi[@]}" -np 4 "$bin" run "$unit" "$tmp/zb.json" --iterations 1 >"$tmp/probe" 2>&1
if grep -q "built without MPI" "$tmp/probe"; then echo "mpi: optpipe built without MPI: skipped"; exit 77; fi

# The numbers of the report: makespans (simulated, measured) and the peak table.
figures() { python3 -c "import re, sys
t = open(sys.argv[1]).read()
m = re.search(r'makespan: simulated ([0-9.e+]+), measured ([0-9.e+]+)', t)
best = re.search(r'; min ([0-9.e+]+),', t)  # the best iteration: interference only adds
peaks = re.findall(r'^\d+\s+([0-9.e+]+)\s+([0-9.e+]+)\s+\d+$', t, re.M)
assert m and peaks, t
print(m.group(1), best.group(1) if best else m.group(2), ' '.join(a + '/' + b for a, b in peaks))" "$1"; }

# The schedule's op order on every lane (the executor runs exactly it; one process does too);
# times within 5%; exact peaks.
# Time units as long as the runtime's own tests use: the shortest op 20 ms, against which the
# messages' latency between 4-8 oversubscribed ranks stays well inside 5%.
compare() {  # compare WHAT PROBLEM SCHEDULE RANKS ITERATIONS TIME_SCALE
  local what=$1 problem=$2 schedule=$3 np=$4 its=$5 scale=$6
  "${mpi[@]}" -np "$np" "$bin" run "$problem" "$schedule" --iterations "$its" \
    --time-scale "$scale" \
    --measured-out "$tmp/ranks.json" >"$tmp/ranks.out" 2>"$tmp/ranks.err"
  check "$what: mpirun -np $np exits 0" -- test $? -eq 0
  check "$what: one report, by rank 0" -- test "$(grep -c '^makespan:' "$tmp/ranks.out")" -eq 1
  local want=$((its * $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['microbatches'])" "$problem")))
  check "$what: checksum chain right for every micro-batch" -- grep -q \
    "checksum chain right for $want/$want micro-batches forward and $want/$want backward" \
    "$tmp/ranks.err"
  check "$what: the schedule's op order on every lane" -- python3 -c "import json, sys
def lanes(path):
    ops = json.load(open(path))['ops']
    out = {}
    for o in sorted(ops, key=lambda o: (o['start'], o['end'])):
        out.setdefault((o['device'], o['stream']), []).append((o['stage'], o['type'], o['microbatch']))
    return out
a, b = lanes(sys.argv[1]), lanes(sys.argv[2])
compute = {k: v for k, v in a.items() if k[1] == 'compute'}
assert all(compute[k] == b[k] for k in compute), 'compute lanes differ'
assert sorted(map(sorted, a.values())) == sorted(map(sorted, b.values()))" "$schedule" "$tmp/ranks.json"
  read -r sim measured peaks <<<"$(figures "$tmp/ranks.out")"
  check "$what: best iteration $measured within 5% of simulated $sim" -- python3 -c "
import sys; s, m = map(float, sys.argv[1:]); assert abs(m - s) <= 0.05 * s" "$sim" "$measured"
  check "$what: peaks exact ($peaks)" -- python3 -c "
import sys; assert all(a == b for a, b in (p.split('/') for p in sys.argv[1:]))" $peaks
}
if [ "$part" != faults ]; then
  compare "unit-4x8 zb-h1" "$unit" "$tmp/zb.json" 4 5 0.02
  "$bin" schedule "$llama" --method auto --time-limit 0.5 -o "$tmp/llama.json" -q
  check "llama-8dev-offload's schedule offloads" -- grep -q '"type":"O"' "$tmp/llama.json"
  compare "llama-8dev-offload (offload, shared links)" "$llama" "$tmp/llama.json" 8 1 0.0013
fi
if [ "$part" = timing ]; then
  echo "mpi: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

# Online across ranks: rank 0 decides at each boundary, every rank runs what it broadcast
# (hetoff-1f: 4 devices, the published schedules' 45.21, auto's 40.17).
"${mpi[@]}" -np 4 "$bin" run "$src/tests/bench/problems/hetoff-1f.json" --online \
  --iterations 6 --refine-seconds 0.5 --methods auto --time-scale 0.005 --json \
  >"$tmp/online.json" 2>"$tmp/online.err"
check "online on 4 ranks exits 0" -- test $? -eq 0
check "online on 4 ranks: one record a boundary, the refinement's schedule adopted" -- \
  python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
its = d['iterations']
assert [r['iteration'] for r in its] == [1, 2, 3, 4, 5, 6], its
assert any(r['swapped'] and r['schedule']['method'] == 'auto' for r in its), its
for a, b in zip(its, its[1:]):
    assert a['model'] != b['model'] or b['objective'] <= a['objective'], (a, b)" "$tmp/online.json"

# Faults: a hang on rank 2 and a failure on rank 1 stop every rank, non-zero, each saying
# where it stood; a rank count that is not the device count is refused.
for fault in hang:2F3 fail:1B2; do
  start=$(date +%s)
  "${mpi[@]}" -np 4 "$bin" run "$unit" "$tmp/zb.json" --iterations 2 --watchdog 1 \
    --fault "$fault" >"$tmp/f.out" 2>&1
  code=$?
  check "$fault: non-zero exit" -- test "$code" -ne 0
  check "$fault: within the timeout" -- test $(($(date +%s) - start)) -lt 30
  for r in 0 1 2 3; do
    check "$fault: rank $r says where it stood" -- grep -q "optpipe: rank $r: " "$tmp/f.out"
  done
done
want="start one a device (mpirun -np 4)" expect 2 "2 ranks for 4 devices" -- \
  "${mpi[@]}" -np 2 "$bin" run "$unit" "$tmp/zb.json"

# A rank killed mid-run: mpirun ends the job; every other rank stops, non-zero.
"${mpi[@]}" -np 4 "$bin" run "$unit" "$tmp/zb.json" --iterations 400 >"$tmp/k.out" 2>&1 &
job=$!
sleep 1.5
victim=$(pgrep -f "optpipe run $unit" | grep -v "^$job\$" | tail -1)
start=$(date +%s)
kill -9 "$victim"
wait "$job"
code=$?
check "killed rank: the job exits non-zero" -- test "$code" -ne 0
check "killed rank: within the timeout" -- test $(($(date +%s) - start)) -lt 30
check "killed rank: no rank left running" -- bash -c "! pgrep -f '[o]ptpipe run $unit'"

echo "mpi: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
