#!/usr/bin/env bash
# Side by side, in one run: the backdrop per-frame pipeline (EvanescoBenchmarks backdrop) against
# ../shared/bench/anchor_backdrop.py, in the anchor's set-up (3 TrueDepth shots x 3 resolutions,
# 3 warm-up + 100 timed frames each; per resolution the median over shots of each shot's median).
# The two alternate ROUNDS times; medians over rounds and the ratio are printed.
#   Benchmarks/backdrop-vs-anchor.sh [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
rounds=${1:-3}
release=$(scripts/build-release.sh EvanescoBenchmarks)
out=$(mktemp -d)
for r in $(seq "$rounds"); do
    python3 "$shared/bench/anchor_backdrop.py" --iterations 100 --runs 1 --json "$out/anchor$r.json" 2>/dev/null
    "$release/EvanescoBenchmarks" backdrop --shared "$shared" > "$out/ours$r.txt"
done
python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
anchor, ours = {}, {}
def norm(key):
    # "720x1280 (depth 480x640)" and "1280x720 (depth 640x480)" are the same set-up (portrait shots).
    a, b, c, d = map(int, re.findall(r"\d+", key))
    return f"{max(a, b)}x{min(a, b)} (depth {max(c, d)}x{min(c, d)})"
for r in range(1, rounds + 1):
    for s in json.load(open(f"{out}/anchor{r}.json"))["summary"]:
        anchor.setdefault(norm(s["resolution"]), []).append(s["ms_per_frame"])
    for line in open(f"{out}/ours{r}.txt"):
        m = re.match(r"backdrop (\d+x\d+) \(depth (\d+x\d+)\): ([\d.]+) ms/frame", line)
        if m:
            ours.setdefault(f"{m[1]} (depth {m[2]})", []).append(float(m[3]))
print(f"backdrop per-frame pipeline, {rounds} alternated rounds (median over rounds of the median over shots)")
for key in ours:
    a = statistics.median(anchor.get(key, [float("nan")])); o = statistics.median(ours[key])
    print(f"  {key:28s} evanesco {o:7.3f} ms ({1000/o:6.0f} fps)   anchor {a:7.3f} ms ({1000/a:6.0f} fps)   ratio {o/a:.3f}")
    print(f"  {'':28s} runs: evanesco {ours[key]}  anchor {anchor.get(key)}")
PY
rm -rf "$out"
