#!/bin/sh
# Run the perf scenarios of scripts/compare_reports.sh under the default
# timing core (reservation) and under the event core with each scheduler,
# and tabulate IOPS and read/write mean and p99 (README "Timed simulation").
# Usage: scripts/compare_schedulers.sh [NANDLAB] [OUT_DIR] [SCHEDULERS...]
set -e
B=${1:-target/release/nandlab}
O=${2:-/tmp/nandlab-schedulers}
shift 2 2>/dev/null || shift $#
S=${*:-reservation fifo mqsim read-priority}
T=$(dirname "$0")/../crates/nandlab/tests/data/traces
mkdir -p "$O"
run() {
  name=$1; shift
  for s in $S; do
    timeout 600 "$B" "$@" --scheduler "$s" --json "$O/$name.$s.json" > /dev/null 2>&1 || echo "$name $s: exit $?"
  done
}
for p in tiny-timed mqsim-default softssd ssdexplorer-enterprise femu-bbssd; do
  run perf-$p perf --preset $p --seed 3 --no-progress --rw randrw --bs 4k --iodepth 16 --requests 20000
done
run perf-prec perf --preset tiny-timed --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 8 --requests 20000 --precondition 100%
run perf-dftl perf --preset tiny-timed --ftl dftl --seed 3 --no-progress --rw randwrite --bs 8k --iodepth 32 --requests 20000
run perf-optr perf --preset tiny-timed --ftl optr --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 4 --requests 10000
run perf-trace perf --preset mqsim-default --seed 2 --no-progress --trace "$T/mqsim_wsrch-small.trace"
run perf-wc-off perf --preset tiny-timed --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 16 --requests 20000 --ftl hybrid
run perf-seq perf --preset mqsim-default --seed 3 --no-progress --rw write --bs 128k --iodepth 8 --requests 5000
run perf-read perf --preset femu-bbssd --seed 3 --no-progress --rw randread --bs 4k --iodepth 32 --requests 10000 --precondition 50%
run perf-block perf --preset tiny-timed --ftl block --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 2 --requests 3000
python3 - "$O" $S <<'PY'
import json, sys, glob, os
out, scheds = sys.argv[1], sys.argv[2:]
names = sorted({os.path.basename(f).split('.')[0] for f in glob.glob(out + '/*.json')})
def fig(r, op, k):
    l = r['perf']['latency'].get(op)
    return l[k] if l and l['count'] else None
print('| scenario | figure | ' + ' | '.join(scheds) + ' |')
print('|---|---|' + '---|' * len(scheds))
for n in names:
    rs = {}
    for s in scheds:
        try:
            rs[s] = json.load(open(f'{out}/{n}.{s}.json'))
        except Exception:
            rs[s] = None
    for label, get in [('IOPS', lambda r: r['perf']['iops']),
                       ('read mean µs', lambda r: fig(r, 'read', 'mean_us')),
                       ('read p99 µs', lambda r: fig(r, 'read', 'p99_us')),
                       ('write mean µs', lambda r: fig(r, 'write', 'mean_us')),
                       ('write p99 µs', lambda r: fig(r, 'write', 'p99_us'))]:
        vals = [get(rs[s]) if rs[s] else None for s in scheds]
        if all(v is None for v in vals):
            continue
        base = vals[0]
        cells = []
        for i, v in enumerate(vals):
            if v is None:
                cells.append('-')
            elif i == 0 or not base:
                cells.append(f'{v:,.1f}')
            else:
                cells.append(f'{v:,.1f} ({(v / base - 1) * 100:+.1f} %)')
        print(f'| {n} | {label} | ' + ' | '.join(cells) + ' |')
PY
