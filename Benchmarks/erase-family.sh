#!/usr/bin/env bash
# The erase brush on bursts it was never tuned on: a family made with ../shared/bench/make_burst.py
# (two lingering occluders that stand still for --linger-fraction of the frames, so that no
# per-pixel vote removes them), each stacked plainly and with --erase over the mask the issue
# names (every pixel an occluder covered in more than half the frames, dilated 8 px). Scores
# against gt.png: PSNR over the whole picture, PSNR inside the mask and outside it, pEPs (% of
# pixels off by more than 20 grey levels), and the erase pass's time against the whole command.
#   Benchmarks/erase-family.sh [BASES="motorcycle aloe graffiti night"] [SEEDS="1 2 3"] [FRACTIONS="0.6 0.8"]
# Prints one row per burst, then the worst and the median of each column.
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
bases=${1:-motorcycle aloe graffiti night}; seeds=${2:-1 2 3}; fractions=${3:-0.6 0.8}
declare -A base_file=([motorcycle]=stereo/motorcycle/motorcycle_left.png [aloe]=stereo/aloe/aloeL.jpg
                      [graffiti]=registration/graffiti/graf1.png [night]=bursts/night-cars/in1.jpg)
bin=$(scripts/build-release.sh evanesco)/evanesco
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=$work/rows.jsonl
for base in $bases; do
    for seed in $seeds; do
        for fraction in $fractions; do
            b=$work/$base-$seed-$fraction
            python3 "$shared/bench/make_burst.py" --base "$shared/data/${base_file[$base]}" --out "$b" --frames 20 --seed "$seed" \
                --lingering 2 --linger-fraction "$fraction" --max-side 1600 --json /dev/null >/dev/null 2>&1
            python3 - "$b" <<'EOF'
import sys, cv2, numpy as np
b = sys.argv[1]
coverage = cv2.imread(b + "/coverage.png", cv2.IMREAD_UNCHANGED)
mask = ((coverage > 10) * 255).astype(np.uint8)          # covered in more than half of the 20 frames
mask = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (17, 17)))
cv2.imwrite(b + "/mask.png", mask)
EOF
            "$bin" stack "$b/frames" -o "$b/plain.png" --quiet >/dev/null
            s=$(date +%s.%N)
            "$bin" stack "$b/frames" -o "$b/erased.png" --erase "$b/mask.png" --report "$b/erased.json" --quiet >/dev/null
            t=$(elapsed "$s")
            python3 - "$b" "$base-$seed-$fraction" "$t" "$shared/bench" >>"$rows" <<'EOF'
import sys, json, subprocess, cv2, numpy as np
b, name, seconds, bench = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
gt = cv2.imread(b + "/gt.png").astype(np.float64)
valid = cv2.imread(b + "/valid.png", 0) > 127
mask = cv2.imread(b + "/mask.png", 0) > 127
H, W = valid.shape
scored = np.zeros_like(valid); by, bx = int(0.05 * H), int(0.05 * W); scored[by:H - by, bx:W - bx] = True
scored &= valid
def psnr(img, sel):
    e = ((img - gt) ** 2)[sel].mean()
    return 10 * np.log10(255 ** 2 / max(e, 1e-12))
row = {"burst": name}
for who in ("plain", "erased"):
    img = cv2.imread(b + "/" + who + ".png").astype(np.float64)
    s = json.loads(subprocess.run([sys.executable, bench + "/score.py", "image", b + "/" + who + ".png", "--burst", b],
                                  capture_output=True, text=True, check=True).stdout)
    row[who] = {"psnr": s["PSNR"], "pEPs": s["pEPs"], "mask_psnr": round(psnr(img, scored & mask), 2),
                "outside_psnr": round(psnr(img, scored & ~mask), 2)}
report = json.load(open(b + "/erased.json"))
row["erase_s"] = report["times_s"].get("erase")
row["whole_s"] = seconds
row["changed"] = report["erase"]["remerged_pixels"] / report["erase"]["masked_pixels"]
print(json.dumps(row))
EOF
        done
    done
done
python3 - "$rows" <<'EOF'
import sys, json, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-22s %28s   %38s   %s" % ("burst", "plain: PSNR / in mask / pEPs", "erased: PSNR / in mask / outside / pEPs", "erase s / whole s"))
for r in rows:
    p, e = r["plain"], r["erased"]
    print("%-22s %8.2f %8.2f %8.3f%%   %8.2f %8.2f %8.2f %8.3f%%   %.3f / %.2f" % (
        r["burst"], p["psnr"], p["mask_psnr"], p["pEPs"], e["psnr"], e["mask_psnr"], e["outside_psnr"], e["pEPs"], r["erase_s"], r["whole_s"]))
def col(f): return [f(r) for r in rows]
for label, f, worst in [("erased PSNR in mask", lambda r: r["erased"]["mask_psnr"], min),
                        ("erased PSNR, whole", lambda r: r["erased"]["psnr"], min),
                        ("erased pEPs %", lambda r: r["erased"]["pEPs"], max),
                        ("plain pEPs %", lambda r: r["plain"]["pEPs"], max),
                        ("in-mask PSNR - outside PSNR", lambda r: r["erased"]["mask_psnr"] - r["erased"]["outside_psnr"], min),
                        ("erase share of the command", lambda r: r["erase_s"] / r["whole_s"], max)]:
    v = col(f)
    print("%-30s worst %8.3f   median %8.3f   (%d bursts)" % (label, worst(v), statistics.median(v), len(v)))
EOF
