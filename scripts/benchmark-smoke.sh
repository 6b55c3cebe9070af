#!/usr/bin/env bash
# Every benchmark script once, on a small input and one round: a script that reads a key the
# reports no longer write, or calls a flag that is gone, fails here (and in CI) instead of
# printing a broken chart the next time someone measures. Needs ../shared (data and the anchors'
# Python packages: ../shared/bench/setup.sh). Figures printed here are not measurements.
#   scripts/benchmark-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d ../shared/data ] || { echo "benchmark-smoke: SKIPPED, ../shared/data is absent; no benchmark script was run" >&2; exit 0; }
release=$(scripts/build-release.sh evanesco EvanescoBenchmarks)
run() {
    local name=$1; shift
    local start; start=$(date +%s)
    if ! out=$(timeout 900 "$@" 2>&1); then
        echo "$out" | tail -20 >&2
        echo "benchmark-smoke: $name FAILED: $*" >&2
        exit 1
    fi
    echo "benchmark-smoke: $name ok ($(( $(date +%s) - start )) s)"
}
small=depth/truedepth-iphone/jpeg_depth_data.jpg
run portrait Benchmarks/portrait-vs-anchor.sh "$small" blur 1
run lens Benchmarks/lens-vs-blur.sh "$small" 1
run stack Benchmarks/stack-vs-anchor.sh motorcycle-handheld 1
run stack-all Benchmarks/stack-all-vs-anchor.sh 1 motorcycle-parallax hdrplus-tree
run stack-memory Benchmarks/stack-memory.sh motorcycle-handheld 1 64
run backdrop Benchmarks/backdrop-vs-anchor.sh 1
run build-vs-build Benchmarks/build-vs-build.sh "$release" "$release" 1
run erase-family Benchmarks/erase-family.sh graffiti 1 0.6
run parallax-family Benchmarks/parallax-family.sh motorcycle 4 1
# The alignment bound on a small parallax burst made here (the family script deletes its own).
run parallax-oracle bash -c 'm=../shared/data/stereo/motorcycle; w=$(mktemp -d); trap "rm -rf $w" EXIT
    python3 ../shared/bench/make_burst.py --base $m/motorcycle_left.png --disparity $m/derived_motorcycle_disp.pfm \
        --parallax 4 --frames 4 --seed 1 --max-side 320 --out $w/b --json /dev/null >/dev/null 2>&1
    Benchmarks/parallax-oracle.py $w/b $m/motorcycle_left.png $m/derived_motorcycle_disp.pfm 4 1 16'
# Our raw finish against LibRaw's AHD (rawpy) on one small noise-free frame made here.
run raw-finish bash -c 'w=$(mktemp -d); trap "rm -rf $w" EXIT; scripts/raw-venv.sh &&
    .build/raw-venv/bin/python Benchmarks/raw-finish-vs-rawpy.py --family $w --count 1 --max-side 400 \
        --evanesco '"$release"'/evanesco --json /dev/null'
# Our raw burst merge against anchor_raw.py on the family's smallest burst (4 tripod frames), made
# here in a folder of its own.
run raw-stack bash -c 'w=$(mktemp -d); trap "rm -rf $w" EXIT; Benchmarks/raw-stack-vs-anchor.py --family $w \
    --only aloe-tripod4 --evanesco '"$release"'/evanesco --json /dev/null'
run closerange-family Benchmarks/closerange-family.sh 1 1
run stack-vs-decode Benchmarks/stack-vs-decode.py --rounds 1 \
    --burst ../shared/data/bursts/synthetic/motorcycle-handheld/frames --evanesco "$release/evanesco"
