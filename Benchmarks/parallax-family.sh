#!/usr/bin/env bash
# Parallax on bursts the local alignment was never tuned on: a family made with
# ../shared/bench/make_burst.py --disparity MAP --parallax PX from both disparity maps in
# ../shared/data/stereo (the motorcycle's and the Middlebury aloe's), and each burst's twin made
# with the same seed and no parallax, scored on the parallax burst's valid pixels. For each pair: `evanesco stack` (default, align auto) scored
# with score.py image against gt.png, the gap (twin PSNR - parallax PSNR, what parallax costs), what
# auto costs a burst without parallax (twin stacked with --align homography minus auto), and the
# whole command's time against anchor_stack.py on the parallax burst (one alternated round each).
#   Benchmarks/parallax-family.sh [MAPS="motorcycle aloe"] [PARALLAX="4 8 12"] [SEEDS="1 2 3 4 5"]
# Frame counts cycle through 12, 16 and 20 with the seed. Prints one row per pair, then the
# median and the worst of each column.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
maps=${1:-motorcycle aloe}; parallaxes=${2:-4 8 12}; seeds=${3:-1 2 3 4 5}
declare -A base=([motorcycle]=stereo/motorcycle/motorcycle_left.png [aloe]=stereo/aloe/aloeL.jpg)
declare -A disparity=([motorcycle]=stereo/motorcycle/derived_motorcycle_disp.pfm [aloe]=stereo/aloe/aloeGT.png)
counts=(12 16 20)
bin=$(scripts/build-release.sh evanesco)/evanesco
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=$work/rows.jsonl
score() { python3 "$shared/bench/score.py" image "$1" --burst "$2" 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['PSNR'], d['pEPs'])"; }
for map in $maps; do
    for px in $parallaxes; do
        for seed in $seeds; do
            n=${counts[$(( seed % 3 ))]}
            p=$work/$map-$px-$seed twin=$work/$map-$px-$seed-twin
            common=(--base "$shared/data/${base[$map]}" --frames "$n" --seed "$seed" --lingering 1 --json /dev/null)
            python3 "$shared/bench/make_burst.py" "${common[@]}" --out "$p" --disparity "$shared/data/${disparity[$map]}" --parallax "$px" >/dev/null 2>&1
            python3 "$shared/bench/make_burst.py" "${common[@]}" --out "$twin" >/dev/null 2>&1
            # The twin scores on the parallax burst's pixels (as ../shared/bench/README.md makes its twin).
            cp "$p/valid.png" "$twin/valid.png"
            s=$(date +%s.%N); "$bin" stack "$p/frames" -o "$p/ours.png" --quiet >/dev/null 2>&1; ours=$(elapsed "$s")
            s=$(date +%s.%N); python3 "$shared/bench/anchor_stack.py" "$p/frames" --out "$p/anchor.png" >/dev/null 2>&1; anchor=$(elapsed "$s")
            "$bin" stack "$twin/frames" -o "$twin/ours.png" --quiet >/dev/null 2>&1
            "$bin" stack "$twin/frames" -o "$twin/homography.png" --align homography --quiet >/dev/null 2>&1
            read -r pp pe < <(score "$p/ours.png" "$p")
            read -r tp te < <(score "$twin/ours.png" "$twin")
            read -r hp he < <(score "$twin/homography.png" "$twin")
            read -r ap ae < <(score "$p/anchor.png" "$p")
            echo "{\"burst\": \"$map-$px-$seed\", \"frames\": $n, \"psnr\": $pp, \"peps\": $pe, \"twin\": $tp, \"twin_peps\": $te, \"twin_homography\": $hp, \"anchor_psnr\": $ap, \"ours_s\": $ours, \"anchor_s\": $anchor}" >>"$rows"
        done
    done
done
python3 - "$rows" <<'EOF'
import sys, json, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-18s %6s %22s %8s %7s %16s %16s %8s" % ("burst", "frames", "parallax PSNR / pEPs", "twin", "gap", "auto cost (twin)", "s ours / anchor", "ratio"))
for r in rows:
    r["gap"] = r["twin"] - r["psnr"]; r["cost"] = r["twin_homography"] - r["twin"]; r["ratio"] = r["ours_s"] / r["anchor_s"]
    print("%-18s %6d %13.2f / %6.4f %8.2f %7.2f %16.3f %8.2f / %5.2f %8.3f" % (
        r["burst"], r["frames"], r["psnr"], r["peps"], r["twin"], r["gap"], r["cost"], r["ours_s"], r["anchor_s"], r["ratio"]))
for label, key, worst in [("gap dB (twin - parallax)", "gap", max), ("pEPs % (parallax)", "peps", max),
                          ("auto's cost on the twin, dB", "cost", max), ("time ratio evanesco / anchor", "ratio", max)]:
    v = [r[key] for r in rows]
    print("%-30s median %8.3f   worst %8.3f   (%d bursts)" % (label, statistics.median(v), worst(v), len(v)))
EOF
