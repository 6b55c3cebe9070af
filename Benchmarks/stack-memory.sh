#!/usr/bin/env bash
# Peak memory and time per frame of `evanesco stack` on a large burst, with its frames held in
# memory (--memory-limit 0) and kept in a temporary file (the default limit, 1024 MB, or the one
# given), alternated ROUNDS times. BURST is a burst folder of ../shared/data/bursts/synthetic
# (pug-handheld is 20 x 12 MP), or FRAMESxWIDTHxHEIGHT: that many frames of that size (hand-held
# motion, moving occluders), made once with ../shared/bench/make_burst.py from pug-handheld's
# background and kept in $EVANESCO_BIG_BURSTS (default /tmp/evanesco-big-bursts; 100 x 24 MP is
# 380 MB of JPEG and takes about 8 minutes to make).
#   Benchmarks/stack-memory.sh [BURST=100x6000x4000] [ROUNDS=1] [LIMIT_MB=1024] [MODES="memory file"]
# Peak memory is the process's maximum resident set (/usr/bin/time), which counts the pages of a
# memory-mapped file while they are mapped in.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
burst=${1:-100x6000x4000}; rounds=${2:-1}; limit=${3:-1024}; modes=${4:-memory file}
if [ -d "$shared/data/bursts/synthetic/$burst" ]; then
    dir=$shared/data/bursts/synthetic/$burst
else
    IFS=x read -r frames w h <<< "$burst"
    dir=${EVANESCO_BIG_BURSTS:-/tmp/evanesco-big-bursts}/$frames-${w}x$h
    if [ ! -f "$dir/truth.json" ]; then
        echo "making $frames frames of ${w}x$h in $dir (once)" >&2
        python3 "$shared/bench/make_burst.py" --base "$shared/data/bursts/synthetic/pug-handheld/gt.png" --out "$dir" \
            --frames "$frames" --size "${w}x$h" --motion handheld --objects 4 --seed 7 --force >/dev/null
    fi
fi
frames=$(ls "$dir/frames" | wc -l)
bin=$(scripts/build-release.sh evanesco)/evanesco
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A secs rss
for r in $(seq "$rounds"); do
    for mode in $modes; do
        lim=$([ "$mode" = memory ] && echo 0 || echo "$limit")
        /usr/bin/time -f '%M %e' -o "$out/time" "$bin" stack "$dir/frames" -o "$out/$mode.jpg" --memory-limit "$lim" \
            --report "$out/$mode.json" --force --quiet >/dev/null
        read -r kb s < "$out/time"
        secs[$mode]+="$s "; rss[$mode]+="$((kb / 1024)) "
    done
done
echo "$burst: $frames frames, $rounds alternated round(s), whole command"
for mode in $modes; do
    m=$(median ${secs[$mode]}); p=$(median ${rss[$mode]})
    held=$(python3 -c "import json; d=json.load(open('$out/$mode.json')); print(d.get('frames_held'), 'file', round((d.get('spilled_bytes') or 0)/1e9, 2), 'GB;', d['times_s'])")
    echo "  $mode: median ${m} s ($(python3 -c "print(round($m / $frames, 3))") s a frame), peak RSS median ${p} MB   runs: ${secs[$mode]}/ ${rss[$mode]}MB"
    echo "    $held"
done
if [[ " $modes " == *" memory "* && " $modes " == *" file "* ]]; then
    echo "  time ratio file / memory: $(ratio "$(median ${secs[file]})" "$(median ${secs[memory]})")"
    same=$(python3 -c "
import numpy as np, cv2
a = cv2.imread('$out/memory.jpg'); b = cv2.imread('$out/file.jpg')
print('identical' if a.shape == b.shape and (a == b).all() else 'DIFFERENT')")
    echo "  outputs: $same"
fi
