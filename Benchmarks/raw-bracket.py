#!/usr/bin/env python3
"""A raw bracket against a burst of one exposure, on one scene, with exact ground truth.

From a make_raw_burst.py burst (its clean mosaic gt_raw.tif, its camera and noise in truth.json)
this makes static frames at the exposures --stops gives (0 is the clean mosaic's, 1 twice as
long, ...; frame 0 is the reference, and need not be the shortest): the clean signal times 2^stop, the burst's shot and read noise, quantised and clipped at
white, written as DNGs with make_raw_burst.py's writer (ExposureTime 2^stop times its own). Then
`evanesco stack` merges
  * the bracket (merged at its shortest exposure, whichever frame is the reference),
  * the same number of frames all at the shortest stop (a burst of the short exposure),
  * the same number all at the longest stop (a burst of the long exposure; scored after scaling
    back to the reference's exposure: what it clipped stays clipped),
  * the shortest frame alone,
and each result, divided by its exposure (2^stop), is scored against gt_raw in linear units
(PSNR, 5 % border left out) over all sites, over the shadows (signal under 5 % of white at the reference's exposure) and over the
highlights (sites where the longest frame clipped: what only the short frames saw). Needs ../shared/bench (make_raw_burst.py) and rawpy, tifffile (scripts/raw-venv.sh).

    Benchmarks/raw-bracket.py --burst .build/raw-stack-family/aloe-iso100 --stops 0 1 2 1 \\
        --bin .build/release/evanesco --out .build/raw-bracket
"""
import argparse
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "bench"))
import make_raw_burst as mrb  # noqa: E402  (the bench's DNG writer and noise model)

try:
    import rawpy
    import tifffile
except ImportError:
    sys.exit("raw-bracket.py: needs rawpy and tifffile (run it with .build/raw-venv/bin/python)")


def frames(burst, stops, seed):
    """(DNG bytes per frame, clean signal x in reference units, clip mask of the longest frame)."""
    t = json.load(open(os.path.join(burst, "truth.json")))
    cam_raw = t["camera_raw"]
    black, white, cfa = cam_raw["black_level"], cam_raw["white_level"], cam_raw["cfa"]
    shot, read = t["noise"]["shot"], t["noise"]["read"]
    cam, _ = mrb.camera_from_truth(t)
    gt = tifffile.imread(os.path.join(burst, "gt_raw.tif"))
    x = mrb.normalise(gt, black, white)
    rng = np.random.default_rng(seed)
    blobs = []
    base = mrb.EXPOSURE_TIME
    for k, s in enumerate(stops):
        mrb.EXPOSURE_TIME = base * Fraction(2) ** s
        noisy = mrb.add_noise(x * np.float32(2.0 ** s), shot, read, rng)
        blobs.append(mrb.dng_bytes(mrb.quantise(noisy, black, white), cfa, black, white, cam, shot, read,
                                   "raw-bracket.py frame %d, %+g stops" % (k, s)))
    mrb.EXPOSURE_TIME = base
    clipped = x * 2.0 ** max(stops) >= 0.98
    return blobs, x, clipped


def write(directory, blobs):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for k, b in enumerate(blobs):
        p = os.path.join(directory, "f%02d.dng" % k)
        mrb.write_atomic(p, b)
        paths.append(p)
    return paths


def merged_signal(path):
    r = rawpy.imread(path)
    v = r.raw_image_visible.astype(np.float64)
    b = float(np.mean(r.black_level_per_channel))
    return (v - b) / (float(r.white_level) - b)


def psnr(a, b, mask):
    e = ((a - b) ** 2)[mask]
    return float(-10 * np.log10(max(e.mean(), 1e-20))) if e.size else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--burst", required=True, help="a make_raw_burst.py burst directory")
    p.add_argument("--stops", type=float, nargs="+", default=[0, 1, 2, 1], help="each frame's stops over frame 0")
    p.add_argument("--bin", default=os.path.join(HERE, "..", ".build", "release", "evanesco"))
    p.add_argument("--out", default=os.path.join(HERE, "..", ".build", "raw-bracket"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args()
    name = os.path.basename(os.path.normpath(a.burst))
    blobs, x, clipped = frames(a.burst, a.stops, a.seed)
    lo, hi = min(a.stops), max(a.stops)
    same, _, _ = frames(a.burst, [lo] * len(a.stops), a.seed)
    long, _, _ = frames(a.burst, [hi] * len(a.stops), a.seed)
    H, W = x.shape
    inner = np.zeros_like(clipped)
    inner[int(.05 * H):int(.95 * H), int(.05 * W):int(.95 * W)] = True
    results = {"burst": name, "stops": a.stops, "highlight_sites": int((clipped & inner).sum())}
    runs = {"bracket": write(os.path.join(a.out, name, "bracket"), blobs),
            "one exposure": write(os.path.join(a.out, name, "same"), same),
            "longest": write(os.path.join(a.out, name, "long"), long)}
    runs["shortest alone"] = runs["one exposure"][:1]
    scale = {"bracket": lo, "one exposure": lo, "longest": hi, "shortest alone": lo}
    for label, files in runs.items():
        out = os.path.join(a.out, name, label.replace(" ", "-") + ".dng")
        if len(files) == 1:
            m = merged_signal(files[0])
        else:
            subprocess.run([a.bin, "stack", *files, "-o", out, "--force", "--quiet"], check=True,
                           stdout=subprocess.DEVNULL)
            m = merged_signal(out)
        m = m / 2.0 ** scale[label]
        shadows = inner & (x < 0.05)
        results[label] = {"psnr": psnr(m, x, inner), "psnr_shadows": psnr(m, x, shadows),
                          "psnr_highlights": psnr(m, x, clipped & inner)}
        print("%-14s %-16s linear PSNR %6.2f dB, shadows %6.2f dB, highlights %6.2f dB" % (
            name, label, results[label]["psnr"], results[label]["psnr_shadows"], results[label]["psnr_highlights"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
