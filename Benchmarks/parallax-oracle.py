#!/usr/bin/env python3
"""What perfect alignment would give on a parallax burst of ../shared/bench/make_burst.py: each
frame is aligned with its true parallax field (rebuilt from the burst's seed and disparity map by
make_burst's own parallax_fields) and its true homography (truth.json), optionally with that field
reduced to a grid of CELL-pixel cells (bilinear between cell centres, as Evanesco's displacement
field is), and the aligned frames' per-pixel median is scored by score.py. The gap between this and
the twin burst is what the merge cannot avoid; the gap between this and `evanesco stack` is what
the field's estimation costs.
   Benchmarks/parallax-oracle.py BURST BASE DISPARITY PARALLAX SEED [CELL=0] [--save-aligned DIR]
e.g. a burst of Benchmarks/parallax-family.sh: BURST made with --base BASE --disparity DISPARITY
--parallax PARALLAX --seed SEED. Prints PSNR dB and pEPs %. --save-aligned writes the truly
aligned frames (frame 0 first, uncovered pixels as the reference's), so that `evanesco stack DIR
--align none` gives the bound with Evanesco's own merge instead of the median."""
import json, os, subprocess, sys
import numpy as np, cv2

here = os.path.dirname(os.path.abspath(__file__))
bench = os.environ.get("EVANESCO_SHARED_BENCH", os.path.join(here, "..", "..", "shared", "bench"))
sys.path.insert(0, bench)
import make_burst  # noqa: E402  (the generator's own field, so the truth is the truth)

save = None
if "--save-aligned" in sys.argv:
    i = sys.argv.index("--save-aligned")
    save = sys.argv[i + 1]
    del sys.argv[i:i + 2]
if len(sys.argv) < 6:
    sys.exit(__doc__)
burst, base, disparity, parallax, seed = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
cell = int(sys.argv[6]) if len(sys.argv) > 6 else 0
truth = json.load(open(os.path.join(burst, "truth.json")))
W, H, n = truth["width"], truth["height"], truth["n_frames"]
b0 = cv2.imread(base, cv2.IMREAD_UNCHANGED)
disp = make_burst.read_disparity(disparity, W, H, (b0.shape[1], b0.shape[0]))
fields = make_burst.parallax_fields(np.random.default_rng([seed, 1]), n, disp, parallax)[0]
gx, gy = np.meshgrid(np.arange(W, dtype=np.float32), np.arange(H, dtype=np.float32))
aligned, covered = [], []
for k, frame in enumerate(truth["frames"]):
    image = cv2.imread(os.path.join(burst, frame["file"])).astype(np.float32)
    if k == 0:
        aligned.append(image)
        covered.append(np.ones((H, W), bool))
        continue
    # Frame k shows base(y + s(y)) at reference point y: invert y + s(y) = q by fixed-point steps.
    sx, sy = fields[k]
    yx, yy = gx - sx, gy - sy
    for _ in range(5):
        yx = gx - cv2.remap(sx, yx, yy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        yy = gy - cv2.remap(sy, yx, yy, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    if cell > 0:
        size = ((W + cell - 1) // cell, (H + cell - 1) // cell)
        coarse = lambda f: cv2.resize(cv2.resize(f, size, interpolation=cv2.INTER_AREA), (W, H), interpolation=cv2.INTER_LINEAR)
        yx, yy = gx + coarse(yx - gx), gy + coarse(yy - gy)
    h = np.linalg.inv(np.array(frame["homography"]))  # reference -> frame k
    den = h[2, 0] * yx + h[2, 1] * yy + h[2, 2]
    px = ((h[0, 0] * yx + h[0, 1] * yy + h[0, 2]) / den).astype(np.float32)
    py = ((h[1, 0] * yx + h[1, 1] * yy + h[1, 2]) / den).astype(np.float32)
    aligned.append(cv2.remap(image, px, py, cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT_101))
    covered.append((px >= 0) & (px <= W - 1) & (py >= 0) & (py <= H - 1))
if save:
    os.makedirs(save, exist_ok=True)
    for k, (a, c) in enumerate(zip(aligned, covered)):
        # Where a frame saw nothing, the reference's pixel: no frame outvotes it there.
        a = np.where(c[..., None], a, aligned[0])
        cv2.imwrite(os.path.join(save, "f%03d.png" % k), np.clip(np.rint(a), 0, 255).astype(np.uint8))
stack = np.where(np.stack(covered)[..., None], np.stack(aligned), np.nan)
merged = np.nan_to_num(np.nanmedian(stack, axis=0))
out = os.path.join(burst, "oracle.png")
cv2.imwrite(out, np.clip(np.rint(merged), 0, 255).astype(np.uint8))
score = subprocess.run([sys.executable, os.path.join(bench, "score.py"), "image", out, "--burst", burst],
                       capture_output=True, text=True, check=True).stdout
s = json.loads(score)
print("parallax-oracle %s cell %d: PSNR %.3f dB, pEPs %.4f %%" % (os.path.basename(burst.rstrip("/")), cell, s["PSNR"], s["pEPs"]))
