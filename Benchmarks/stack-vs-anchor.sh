#!/usr/bin/env bash
# Side by side, in one run: `evanesco stack` against ../shared/bench/anchor_stack.py on a burst
# from ../shared/data/bursts/synthetic, alternating the two ROUNDS times. Prints wall-clock
# medians, their ratio, the alignment error (score.py align) and quality (score.py image).
#   Benchmarks/stack-vs-anchor.sh [BURST=pug-handheld] [ROUNDS=3] [ANCHOR_MERGE=sigma]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
burst=${1:-pug-handheld}; rounds=${2:-3}; anchor_merge=${3:-sigma}
dir=$shared/data/bursts/synthetic/$burst
[ -d "$dir" ] || { echo "no burst at $dir" >&2; exit 2; }
bin=$(scripts/build-release.sh evanesco)/evanesco
out=$(mktemp -d)
ours=() anchor=()
for r in $(seq "$rounds"); do
    s=$(date +%s.%N); "$bin" stack "$dir/frames" -o "$out/ours.png" --report "$out/ours.json" --force --quiet >/dev/null
    ours+=("$(elapsed "$s")")
    s=$(date +%s.%N); python3 "$shared/bench/anchor_stack.py" "$dir/frames" --out "$out/anchor.png" --merge "$anchor_merge" --json "$out/anchor.json" >/dev/null 2>&1
    anchor+=("$(elapsed "$s")")
done
mo=$(median "${ours[@]}"); ma=$(median "${anchor[@]}")
echo "burst $burst, $rounds alternated rounds (wall clock, whole command)"
echo "  evanesco stack (robust):          median ${mo} s   runs: ${ours[*]}"
echo "  anchor_stack.py ($anchor_merge): median ${ma} s   runs: ${anchor[*]}"
echo "  ratio evanesco / anchor: $(ratio "$mo" "$ma")"
# Assigned first: a key that is not in the report fails the script (set -e), not just the line.
stages=$(python3 -c "import json; print(json.load(open('$out/ours.json'))['times_s'])")
echo "  evanesco stages (last run): $stages"
for who in ours anchor; do
    align=$(python3 "$shared/bench/score.py" align --truth "$dir/truth.json" --report "$out/$who.json" 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('align err mean/p90/max px', d['mean_px'], d['p90_px'], d['max_px'])")
    img=$(python3 "$shared/bench/score.py" image "$out/$who.png" --burst "$dir" 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('PSNR %.2f SSIM %.4f AGE %.3f pEPs %.4f occl.pEPs %.4f' % (d['PSNR'], d['SSIM'], d['AGE'], d['pEPs'], d['occluded']['pEPs']))")
    echo "  $who: $img; $align"
done
rm -rf "$out"
