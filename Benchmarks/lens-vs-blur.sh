#!/usr/bin/env bash
# Side by side, in one run: `evanesco portrait --effect lens` at apertures 10, 40 and 80 px against
# today's `--effect blur` and the anchor's blur (../shared/bench/anchor_depth.py, which has no lens
# effect), whole command wall clock (decode, render, encode, process start), alternating ROUNDS
# times. Prints medians, ratios and the lens stage times from --report.
#   Benchmarks/lens-vs-blur.sh [PHOTO=depth/pug-iphone13pro/pug.heic] [ROUNDS=7] [FOCUS_POINT=0.5,0.5]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
photo=$shared/data/${1:-depth/pug-iphone13pro/pug.heic}; rounds=${2:-7}; point=${3:-0.5,0.5}
[ -f "$photo" ] || { echo "no photo at $photo" >&2; exit 2; }
bin=$(scripts/build-release.sh evanesco)/evanesco
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
blur=() anchor=() l10=() l40=() l80=()
for r in $(seq "$rounds"); do
    s=$(date +%s.%N); "$bin" portrait "$photo" -o "$out/blur.jpg" --effect blur --focus-point "$point" --force 2>/dev/null; blur+=("$(elapsed "$s")")
    s=$(date +%s.%N); python3 "$shared/bench/anchor_depth.py" "$photo" --effect blur --out "$out/anchor.jpg" >/dev/null 2>&1; anchor+=("$(elapsed "$s")")
    for a in 10 40 80; do
        s=$(date +%s.%N); "$bin" portrait "$photo" -o "$out/lens$a.jpg" --effect lens --aperture "$a" --focus-point "$point" --report "$out/lens$a.json" --force 2>/dev/null
        eval "l$a+=(\"\$(elapsed \"\$s\")\")"
    done
done
mb=$(median "${blur[@]}")
echo "$(basename "$photo") --focus-point $point, $rounds alternated rounds (wall clock, whole command)"
ma=$(median "${anchor[@]}")
echo "  anchor_depth.py --effect blur:   median ${ma} s   runs: ${anchor[*]}"
echo "  portrait --effect blur:          median ${mb} s   ratio to the anchor $(ratio "$mb" "$ma")   runs: ${blur[*]}"
for a in 10 40 80; do
    eval "runs=(\"\${l$a[@]}\")"
    m=$(median "${runs[@]}")
    echo "  portrait --effect lens --aperture $a: median ${m} s   ratio to blur $(ratio "$m" "$mb"), to the anchor's blur $(ratio "$m" "$ma")   runs: ${runs[*]}"
    # Assigned first: a key that is not in the report fails the script (set -e), not just the line.
    stages=$(python3 -c "import json; d = json.load(open('$out/lens$a.json')); print({k: round(v, 3) for k, v in d['times_s'].items()}, 'layers', d['lens']['statistics']['layers'], 'grid 1/%d' % d['lens']['statistics']['grid_divisor'])")
    echo "    stages (last run): $stages"
done
