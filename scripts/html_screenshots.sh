#!/usr/bin/env bash
# html_screenshots.sh [NANDLAB_BIN]
#
# Remakes docs/screenshots/: the HTML report of one run of each kind (and
# of three FTLs compared) and a bench's page, drawn by nandlab and photographed by headless
# Chromium, quantised by pngquant (Debian: apt-get install -y chromium
# pngquant). The README shows them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(realpath "${1:-$ROOT/target/release/nandlab}")
OUT=$ROOT/docs/screenshots
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$OUT"
for ftl in page dftl hybrid; do
  "$B" stress --preset tiny --ftl $ftl --seed 1 --no-progress --rw randwrite --bs 4k --write_size 2x --json "$T/$ftl.json" >/dev/null
done
"$B" report "$T/page.json" "$T/dftl.json" "$T/hybrid.json" -o "$T/stress.html"
"$B" perf --preset tiny-timed --seed 1 --no-progress --rw randwrite --bs 4k --iodepth 16 --requests 40000 --html "$T/perf.html" >/dev/null
for ftl in page dftl; do
  "$B" crash --preset tiny --ftl $ftl --seed 4 --quiet --crash-points 80 --threads 2 --json "$T/crash-$ftl.json" >/dev/null
done
"$B" report "$T/crash-page.json" "$T/crash-dftl.json" -o "$T/crash.html"
(cd "$T" && "$B" bench stress --preset tiny --runs 3 --write-size 8m --ftl page --ftl dftl --html "$T/bench-stress.html" >/dev/null)
# shot NAME HEIGHT: photograph $T/NAME.html into docs/screenshots/NAME.png.
shot() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$T/profile" \
    --window-size=1400,"$2" --screenshot="$T/$1.png" "file://$T/$1.html" >/dev/null 2>&1
  # 32 colours: a small file that still reads.
  pngquant --force --strip --speed 1 32 --output "$OUT/$1.png" "$T/$1.png"
  echo "$OUT/$1.png: $(stat -c %s "$OUT/$1.png") bytes"
}
for kind in stress perf crash; do
  cp "$T/$kind.html" "$T/report-$kind.html"
  shot "report-$kind" 1300
done
shot bench-stress 900
