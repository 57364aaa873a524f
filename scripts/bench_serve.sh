#!/usr/bin/env bash
# bench_serve.sh [NANDLAB_BIN] [SECONDS] [RUNS]
#
# Throughput of `nandlab serve` (femu-bbssd, page FTL, untimed, every read
# checked) beside `nbdkit memory` (a RAM disk, the NBD server with nothing
# to simulate), both on a Unix socket, in the same run, runs interleaved: fio's nbd
# engine, 4 KiB random read/write 50/50 at iodepth 16 for SECONDS each,
# then 128 KiB sequential writes. Prints every run and the medians.
# Then the byte store's memory: the server's peak RSS with nothing
# written, and after 1 GiB written, on mqsim-default (512 GiB raw).
set -euo pipefail
B=${1:-target/release/nandlab}
SECS=${2:-10}
RUNS=${3:-3}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT

fio_run() { # fio_run URI RW BS -> IOPS (read+write), MiB/s
  fio --name=b --ioengine=nbd --uri="$1" --rw="$2" --bs="$3" --iodepth=16 --size=2G \
      --time_based --runtime="$SECS" --ramp_time=1 --randseed=1 --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):])["jobs"][0]; r,w=j["read"],j["write"]; print(int(r["iops"]+w["iops"]), round((r["bw"]+w["bw"])/1024,1))'
}

serve_start() { # serve_start PRESET -> sets URI, PID
  rm -f "$TMP/n.sock"
  "$B" serve --preset "$1" --ftl page --unix "$TMP/n.sock" --seed 1 >"$TMP/out" 2>"$TMP/err" &
  PID=$!
  for _ in $(seq 300); do grep -q 'listening on' "$TMP/err" && break; sleep 0.1; done
  URI="nbd+unix:///?socket=$TMP/n.sock"
}

serve_stop() { kill -INT "$PID"; wait "$PID" || true; }

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for rw in "randrw 4k" "write 128k"; do
  set -- $rw
  for i in $(seq "$RUNS"); do
    serve_start femu-bbssd
    echo "nandlab $1 $2 run $i: $(fio_run "$URI" "$1" "$2") (IOPS MiB/s)" | tee -a "$TMP/nandlab-$1"
    serve_stop
    rm -f "$TMP/k.sock"
    nbdkit -f -U "$TMP/k.sock" memory 3G &
    KPID=$!
    for _ in $(seq 100); do [ -S "$TMP/k.sock" ] && break; sleep 0.1; done
    KURI="nbd+unix:///?socket=$TMP/k.sock"
    echo "nbdkit  $1 $2 run $i: $(fio_run "$KURI" "$1" "$2") (IOPS MiB/s)" | tee -a "$TMP/nbdkit-$1"
    kill "$KPID"; wait "$KPID" 2>/dev/null || true
  done
  for s in nandlab nbdkit; do
    echo "median $s $1 $2: $(awk "{print \$(NF-3)}" "$TMP/$s-$1" | median) IOPS, $(awk "{print \$(NF-2)}" "$TMP/$s-$1" | median) MiB/s"
  done
done

serve_start mqsim-default
nbdinfo "$URI" >/dev/null
serve_stop
echo "mqsim-default, nothing written: $(grep -o 'peak RSS [0-9]* MiB' "$TMP/out")"
serve_start mqsim-default
fio --name=w --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size=1G >/dev/null 2>&1
serve_stop
echo "mqsim-default, 1 GiB written: $(grep -o 'peak RSS [0-9]* MiB' "$TMP/out"); $(grep '^  bytes' "$TMP/out" | sed 's/^ *//')"
