#!/usr/bin/env bash
# Side by side, in one run: `evanesco portrait` against ../shared/bench/anchor_depth.py, whole
# command wall clock (decode, mask, effect, encode, process start), alternating ROUNDS times.
# Prints medians, the ratio, and our stage times from --report.
#   Benchmarks/portrait-vs-anchor.sh [PHOTO=depth/pug-iphone13pro/pug.heic] [EFFECT=blur] [ROUNDS=5] [FOCUS=0.5]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
photo=$shared/data/${1:-depth/pug-iphone13pro/pug.heic}; effect=${2:-blur}; rounds=${3:-5}; focus=${4:-0.5}
[ -f "$photo" ] || { echo "no photo at $photo" >&2; exit 2; }
bin=$(scripts/build-release.sh evanesco)/evanesco
out=$(mktemp -d)
ours=() anchor=()
for r in $(seq "$rounds"); do
    s=$(date +%s.%N); "$bin" portrait "$photo" -o "$out/ours.jpg" --effect "$effect" --focus "$focus" --quality 95 --report "$out/ours.json" --force 2>/dev/null
    ours+=("$(elapsed "$s")")
    s=$(date +%s.%N); python3 "$shared/bench/anchor_depth.py" "$photo" --effect "$effect" --focus "$focus" --out "$out/anchor.jpg" --json "$out/anchor.json" >/dev/null 2>&1
    anchor+=("$(elapsed "$s")")
done
mo=$(median "${ours[@]}"); ma=$(median "${anchor[@]}")
echo "$(basename "$photo") --effect $effect --focus $focus, $rounds alternated rounds (wall clock, whole command)"
echo "  evanesco portrait: median ${mo} s   runs: ${ours[*]}"
echo "  anchor_depth.py:   median ${ma} s   runs: ${anchor[*]}"
echo "  ratio evanesco / anchor: $(ratio "$mo" "$ma")"
# Assigned first: a key that is not in the report fails the script (set -e), not just the line.
stages=$(python3 -c "import json; print({k: round(v, 3) for k, v in json.load(open('$out/ours.json'))['times_s'].items()})")
anchor_stages=$(python3 -c "import json; print(json.load(open('$out/anchor.json'))['times_s'])")
echo "  evanesco stages (last run): $stages"
echo "  anchor stages (last run):   $anchor_stages"
rm -rf "$out"
