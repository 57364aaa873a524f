#!/usr/bin/env bash
# compare_reports.sh OLD_BIN NEW_BIN [OUTDIR]
#
# Whether two nandlab binaries give the same reports: runs a fixed set of 75
# commands (stress on every FTL and preset kind, every `buggy` mutant, the
# GC/hot-cold/wear-leveling policies, crash campaigns on every FTL with and
# without power-loss protection, perf on every timed preset, trace replay
# and stats) with each binary, drops what depends on the machine (wall and
# CPU time, throughput, RSS; scripts/normalise_reports.py), and diffs.
# Exit 0 and "IDENTICAL" when nothing differs. Use it for changes that must
# not change behaviour (restructuring, speed work): issue 16 was checked so.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [OUTDIR]" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$ROOT/crates/nandlab/tests/data/traces
OUT=${3:-$(mktemp -d)}
one() { # one BIN DIR: every command, outputs in DIR
  local B=$1 O=$2 n=0
  mkdir -p "$O"; rm -f "$O"/*
  run() { n=$((n+1)); local name; name=$(printf "%02d" $n)-$1; shift
    timeout 300 "$B" "$@" --json "$O/$name.json" > "$O/$name.out" 2>&1; echo "rc=$?" >> "$O/$name.out"; }
  for ftl in page dftl hybrid block optr; do
    run stress-tiny-$ftl stress --preset tiny --ftl $ftl --seed 7 --no-progress --remount
    run stress-vst-$ftl stress --preset vst-jasmine --ftl $ftl --seed 11 --no-progress --rw randrw --bs 4k --io_size 64m
    run crash-tiny-$ftl crash --preset tiny --ftl $ftl --seed 5 --quiet --crash-points 40 --threads 2
  done
  run stress-buggy stress --preset tiny --ftl buggy --seed 3 --no-progress
  run stress-dftl-cmt stress --preset tiny --ftl dftl --cmt-bytes 10% --seed 9 --no-progress --rw randwrite --bs 4k --io_size 8m --remount
  run stress-wl stress --preset tiny --ftl page --wear-leveling static --hot-cold dac --gc-policy cost-benefit --seed 9 --no-progress --io_size 16m
  run stress-femu stress --preset femu-bbssd --ftl page --seed 1 --no-progress --rw randwrite --bs 4k --io_size 32m
  run stress-trace stress --preset femu-bbssd --ftl page --seed 1 --no-progress --trace $T/mqsim_tpcc-small.trace
  for p in tiny-timed mqsim-default softssd ssdexplorer-enterprise femu-bbssd; do
    run perf-$p perf --preset $p --seed 3 --no-progress --rw randrw --bs 4k --iodepth 16 --requests 20000
  done
  run perf-prec perf --preset tiny-timed --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 8 --requests 20000 --precondition 100%
  run perf-dftl perf --preset tiny-timed --ftl dftl --seed 3 --no-progress --rw randwrite --bs 8k --iodepth 32 --requests 20000
  run perf-optr perf --preset tiny-timed --ftl optr --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 4 --requests 10000
  run perf-trace perf --preset mqsim-default --seed 2 --no-progress --trace $T/mqsim_wsrch-small.trace
  n=$((n+1)); timeout 60 "$B" trace stats "$T/blkparse_sample.txt" > "$O/$(printf %02d $n)-trace-stats.out" 2>&1
  run stress-replay-blk stress --preset tiny --ftl dftl --seed 4 --no-progress --trace $T/blkparse_sample.txt
  run bench-perf-small perf --preset tiny-timed --seed 8 --no-progress --rw randwrite --bs 16k --iodepth 64 --requests 5000 --remount
  for bug in skip-first-page skip-first-page-maps-it write-in-place out-of-order gc-stale-remap gc-drops-valid-page alias-two-lbas ignores-trim forgets-to-fill programs-bad-blocks block-past-end multi-plane-on-one-plane copyback-across-planes reads-unwritten-pages fails-writes; do
    run buggy-$bug stress --preset tiny --ftl buggy --ftl-opt bug=$bug --seed 3 --no-progress --max-errors 5
  done
  for gc in cost-benefit fifo random d-choices:4 windowed-greedy:8; do
    run gc-$gc stress --preset tiny --ftl dftl --gc-policy $gc --seed 13 --no-progress --rw randwrite --bs 4k --io_size 16m --remount
  done
  run hc-two stress --preset tiny --ftl page --hot-cold two-stream --wear-leveling dynamic --seed 2 --no-progress --io_size 16m --idle-every 100
  run page-nosum stress --preset tiny --ftl page --ftl-opt summary_pages=false --ftl-opt copyback=false --ftl-opt gc_stream=shared --seed 2 --no-progress --io_size 16m --remount
  run page-bg stress --preset tiny --ftl page --ftl-opt gc_background_free_percent=20 --idle-every 50 --seed 2 --no-progress --io_size 16m
  run dftl-lru stress --preset tiny --ftl dftl --ftl-opt cmt_replacement=lru --cmt-bytes 4KiB --seed 2 --no-progress --rw randrw --bs 8k --io_size 16m --remount
  run hybrid-logs stress --preset tiny --ftl hybrid --ftl-opt random_log_blocks=4 --seed 2 --no-progress --rw randwrite --bs 4k --io_size 8m --remount
  run optr-small stress --preset tiny --ftl optr --ftl-opt cache_pages=16 --ftl-opt log_blocks=4 --seed 2 --no-progress --rw randwrite --bs 4k --io_size 16m --fsync 8 --remount
  run sub-page stress --preset tiny --ftl page --seed 5 --no-progress --rw randrw --bsrange 512-16k --blockalign 512 --io_size 8m --remount
  run softssd-stress stress --preset softssd --ftl page --seed 5 --no-progress --rw randwrite --bs 16k --io_size 64m
  run ssdx-stress stress --preset ssdexplorer-enterprise --ftl dftl --seed 5 --no-progress --rw randwrite --bs 4k --io_size 64m
  for ftl in page dftl hybrid block optr; do
    run crash-every-$ftl crash --preset tiny --ftl $ftl --seed 21 --quiet --crash-every 97 --crash-phase both --threads 2 --rw randwrite --bs 4k --io_size 2m
  done
  run crash-optr-guar crash --preset tiny --ftl optr --guarantee optr --seed 4 --quiet --crash-points 60 --threads 2 --fsync 4
  run crash-nopl crash --preset tiny --ftl page --seed 4 --quiet --crash-points 30 --threads 2 --power-cut write_cache_lost=off --power-cut torn_programs=off
  run crash-warm crash --preset tiny --ftl dftl --seed 4 --quiet --crash-points 30 --threads 2 --warmup 1x --no-nested
  run crash-at crash --preset tiny --ftl hybrid --seed 4 --crash-at 1500 --crash-at 2500:during
  run crash-buggy crash --preset tiny --ftl buggy --ftl-opt bug=out-of-order --seed 4 --quiet --crash-points 30 --threads 2
  run perf-wc-off perf --preset tiny-timed --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 16 --requests 20000 --ftl hybrid
  run perf-seq perf --preset mqsim-default --seed 3 --no-progress --rw write --bs 128k --iodepth 8 --requests 5000
  run perf-read perf --preset femu-bbssd --seed 3 --no-progress --rw randread --bs 4k --iodepth 32 --requests 10000 --precondition 50%
  run perf-block perf --preset tiny-timed --ftl block --seed 3 --no-progress --rw randwrite --bs 4k --iodepth 2 --requests 3000
  python3 "$ROOT/scripts/normalise_reports.py" "$O"
}
one "$1" "$OUT/old"
one "$2" "$OUT/new"
if diff -r "$OUT/old" "$OUT/new"; then echo "IDENTICAL ($(ls "$OUT/old" | wc -l) files in $OUT)"; else echo "DIFFERENT (outputs in $OUT)"; exit 1; fi
