#!/usr/bin/env bash
# bench_serve_cpu.sh [NANDLAB_BIN] [SECONDS] [RUNS]
#
# Server CPU time per request: `nandlab serve` (femu-bbssd, page FTL,
# untimed, every read checked) beside `nbdkit memory` (a RAM disk), both on
# a Unix socket, runs interleaved. fio's nbd engine, 4 KiB random
# read/write 50/50 at iodepth 16 for SECONDS. The server's CPU (user +
# system, from /proc/PID/stat) is read just before and just after fio;
# requests are fio's completed I/Os. Prints every run and the medians.
set -euo pipefail
B=${1:-target/release/nandlab}
SECS=${2:-10}
RUNS=${3:-3}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
HZ=$(getconf CLK_TCK)

cpu_s() { awk -v hz="$HZ" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

measure() { # measure NAME PID URI -> "NAME IOPS us-CPU/request"
  local before after ios
  before=$(cpu_s "$2")
  ios=$(fio --name=b --ioengine=nbd --uri="$3" --rw=randrw --bs=4k --iodepth=16 --size=2G \
      --time_based --runtime="$SECS" --randseed=1 --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; print(j["read"]["total_ios"]+j["write"]["total_ios"])')
  after=$(cpu_s "$2")
  python3 -c "b,a,n,s=$before,$after,$ios,$SECS; print('$1', int(n/s), 'IOPS', round((a-b)/n*1e6,2), 'us-CPU/request', round(a-b,2), 's-CPU')"
}

for i in $(seq "$RUNS"); do
  rm -f "$TMP/n.sock"
  "$B" serve --preset femu-bbssd --ftl page --unix "$TMP/n.sock" --seed 1 >"$TMP/out" 2>"$TMP/err" &
  PID=$!
  for _ in $(seq 300); do grep -q 'listening on' "$TMP/err" && break; sleep 0.1; done
  measure nandlab "$PID" "nbd+unix:///?socket=$TMP/n.sock" | tee -a "$TMP/nandlab"
  kill -INT "$PID"; wait "$PID" || true
  rm -f "$TMP/k.sock"
  nbdkit -f -U "$TMP/k.sock" memory 3G &
  KPID=$!
  for _ in $(seq 100); do [ -S "$TMP/k.sock" ] && break; sleep 0.1; done
  measure nbdkit "$KPID" "nbd+unix:///?socket=$TMP/k.sock" | tee -a "$TMP/nbdkit"
  kill "$KPID"; wait "$KPID" 2>/dev/null || true
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for s in nandlab nbdkit; do
  echo "median $s: $(awk '{print $2}' "$TMP/$s" | median) IOPS, $(awk '{print $4}' "$TMP/$s" | median) us-CPU/request"
done
