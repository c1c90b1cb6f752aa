#!/usr/bin/env bash
# Bad and huge input, end to end: each case once crashed, hung or overflowed;
# now each ends with exit 2 and a message naming the file and field (or a
# valid result), and an output file is never left half-written.
# Usage: robust_test.sh OPTPIPE SOURCE_DIR
set -u
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh" "$@"
corpus=$src/tests/fuzz/corpus
unit=$cases/unit-4x8.json

# 1. A number beyond a double's range, in every reader: the field is named.
want="number-overflow.json: memory.activation: '1e400' is beyond the range of a double" \
  expect 2 "problem: 1e400" -- "$bin" schedule "$corpus/problem/number-overflow.json" -m 1f1b
want="ops[0].end: '1e400' is beyond the range" \
  expect 2 "schedule: 1e400" -- "$bin" validate "$src/tests/fuzz/fixed.json" "$corpus/schedule/number-overflow.json"
want="hidden: '1e400' is beyond the range" \
  expect 2 "model: 1e400" -- "$bin" plan "$corpus/model/number-overflow.json" -d 4 -m 8
want="memory_gib: '1e400' is beyond the range" \
  expect 2 "hardware: 1e400" -- "$bin" plan "$cases/models/gpt-5.8b.json" -d 4 -m 8 \
  --hardware "$corpus/hardware/number-overflow.json"
want="memory.activation: '1e400' is beyond the range" \
  expect 2 "profile: 1e400" -- "$bin" plan "$cases/models/gpt-5.8b.json" -d 4 -m 8 \
  --profile "$corpus/problem/number-overflow.json"

# 2. A directory where a file belongs.
want="$tmp: is a directory, expected a file" expect 2 "problem is a directory" -- "$bin" schedule "$tmp"
want="$tmp: is a directory, expected a file" expect 2 "schedule is a directory" -- "$bin" validate "$unit" "$tmp"

# 3-4. Views of times far from zero: show drew outside its buffer, draw hung.
for f in views-shifted-1e300 views-shifted-minus-1e9; do
  want="fixed" expect 0 "show $f" -- timeout 20 "$bin" show "$src/tests/fuzz/fixed.json" "$corpus/schedule/$f.json"
  want="wrote" expect 0 "draw $f" -- timeout 20 "$bin" draw "$src/tests/fuzz/fixed.json" "$corpus/schedule/$f.json" -o "$tmp/$f.svg"
done

# 5. devices x stages_per_device beyond an int.
for f in stages-overflow-46341 stages-overflow-65536; do
  want="that op indices (32-bit) can hold" expect 2 "$f" -- "$bin" schedule "$corpus/problem/$f.json" -m 1f1b
done

# 6. plan with huge counts on the command line.
model=$cases/models/gpt-5.8b.json
want="8 x 2147483647 x 8 gives" expect 2 "plan -v 2^31-1" -- "$bin" plan "$model" -d 8 -v 2147483647 -m 8
want="2147483647 x 1 x 8 gives" expect 2 "plan -d 2^31-1" -- "$bin" plan "$model" -d 2147483647 -m 8
want="4 x 2 x 2147483647 gives" expect 2 "plan -m 2^31-1 -v 2" -- "$bin" plan "$model" -d 4 -m 2147483647 -v 2
want="2000000 ops, more than the 52428 allowed" expect 2 "plan --schedule beyond --max-memory" -- \
  "$bin" plan "$model" -d 4 -m 100000 --schedule 1f1b --max-memory 0.1 -o "$tmp/plan.json"

# 7. A large problem with offload: the SAT encoding's size estimate overflowed,
# and the list scheduler behind the bound took minutes (it rejected every
# ready forward of a device short of memory one by one).
python3 - "$unit" "$tmp/big-offload.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["microbatches"] = 100000; p["offload_time"] = 1
p["memory"]["limit"] = 3; p["host_links"] = [[0, 1], [2, 3]]
json.dump(p, open(sys.argv[2], "w"))
PY
want="lower bound 300003" expect 0 "bound 4 x 100000 with offload" -- \
  timeout 60 "$bin" bound "$tmp/big-offload.json" --search-seconds 0.5

# 8. Too large for the memory: refused up front, saying the estimate.
want="gives 120000000 ops, more than the" expect 2 "M = 10^7" -- "$bin" schedule "$corpus/problem/too-many-ops.json" -m 1f1b
want="see --max-memory" expect 2 "v = 10^7, an array of the wrong length" -- "$bin" methods "$corpus/problem/wrong-length-huge-v.json"
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); p['devices']=100000; p['microbatches']=1000; json.dump(p,open(sys.argv[2],'w'))" "$unit" "$tmp/d1e5.json"
want="ops, more than the" expect 2 "D = 10^5, M = 1000" -- "$bin" schedule "$tmp/d1e5.json" -m 1f1b
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); p['devices']=1000000; json.dump(p,open(sys.argv[2],'w'))" "$unit" "$tmp/d1e6.json"
want="24000000 ops, more than the 524288 allowed" expect 2 "D = 10^6 bound within --max-memory 1" -- "$bin" bound "$tmp/d1e6.json" --max-memory 1
want="more than the" expect 2 "--max-memory before the command" -- "$bin" --max-memory 0.00001 schedule "$unit" -m 1f1b
want="makespan 30" expect 0 "--max-memory that fits" -- "$bin" schedule "$unit" -m 1f1b --max-memory 1 -o "$tmp/fits.json"

# 9. A write that fails midway leaves the previous file whole: the file-size
# limit (ulimit -f, in KiB) kills the write of a schedule of ~280 KiB.
"$bin" schedule "$unit" -m 1f1b -o "$tmp/keep.json" 2>/dev/null
cp "$tmp/keep.json" "$tmp/keep.orig"
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); p['microbatches']=1000; json.dump(p,open(sys.argv[2],'w'))" "$unit" "$tmp/m1000.json"
(ulimit -f 64; exec "$bin" schedule "$tmp/m1000.json" -m 1f1b -o "$tmp/keep.json") >/dev/null 2>&1
rc=$?
if [ "$rc" -ne 0 ] && cmp -s "$tmp/keep.json" "$tmp/keep.orig"; then passed=$((passed + 1)); else
  echo "FAIL: a killed write: exit $rc, previous file $(cmp "$tmp/keep.json" "$tmp/keep.orig" 2>&1 || true)"
  failed=$((failed + 1)); fi
rm -f "$tmp"/.keep.json.tmp*  # what the killed process had written so far
# The same limit with the signal ignored: the write fails (EFBIG), optpipe
# says so, removes its temporary and keeps the previous file.
want="keep.json: cannot write (File too large)" expect 2 "a failed write" -- \
  bash -c "trap '' XFSZ; ulimit -f 64; exec '$bin' schedule '$tmp/m1000.json' -m 1f1b -o '$tmp/keep.json'"
check "the failed write kept the previous file" -- cmp "$tmp/keep.json" "$tmp/keep.orig"
want="/dev/full: cannot write" expect 2 "a full disk" -- "$bin" schedule "$unit" -m 1f1b -o /dev/full
"$bin" schedule "$tmp/m1000.json" -m 1f1b -o "$tmp/keep.json" 2>/dev/null
check "the next write replaces it whole" -- python3 -c "import json,sys; assert len(json.load(open(sys.argv[1]))['ops']) == 12000" "$tmp/keep.json"
check "no temporary left behind" -- bash -c "! ls -A '$tmp' | grep -q tmp"

# Nothing is dropped silently: PyTorch's CSV has no offload action, so a
# schedule that offloads is refused with exit 3, saying what would be lost.
want="O/R ops would be lost" expect 3 "--csv of an offloading schedule" -- \
  "$bin" schedule "$cases/llama-8dev-offload.json" -m list -o "$tmp/l.json" --csv "$tmp/l.csv"
check "no CSV written" -- test ! -e "$tmp/l.csv"
want="O/R ops would be lost" expect 3 "draw .csv of an offloading schedule" -- \
  "$bin" draw "$cases/llama-8dev-offload.json" "$tmp/l.json" -o "$tmp/l.csv"
want="optpipe 0." expect 0 "--version" -- "$bin" --version
check "files say what wrote them" -- grep -q '"generator": "optpipe 0\.' "$tmp/l.json"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
