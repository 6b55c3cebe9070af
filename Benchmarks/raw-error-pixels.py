#!/usr/bin/env python3
"""Where a raw merge's error pixels are, and what lies under them (issue 48's pEPs target).

For a burst of Benchmarks/raw-stack-vs-anchor.py's family: our merge (with --save-maps), the
reference frame and the plain mean (../shared/bench/anchor_raw.py), each finished as score.py
raw finishes them. An error pixel is one whose grey lies more than 20 levels from the finished
gt_raw.tif, inside the valid mask and the 5 % border (score.py's pEPs). Over our error pixels it
prints:
  * the frames the vote kept there (kept-16.png);
  * the signed error, and the reference's and the mean's errors there;
  * how many frames a passer-by crossed there (coverage.png), against its share over all pixels;
  * the truth's grey and |Laplacian| there, against all pixels.
With --vs OTHER (another burst of the same size, such as the same seed made without passers-by),
how many of the error pixels the other burst's merge has too, and within 2 px.

  Benchmarks/raw-error-pixels.py BURST [--vs OTHER] [--evanesco BIN] [-- EXTRA STACK OPTIONS]
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))
sys.path.insert(0, BENCH)
import make_raw_burst as mrb  # noqa: E402
import score  # noqa: E402


def finished_grey(path, truth):
    raw, meta = mrb.read_raw(path)
    cfa, black, white, cam, gamma, _ = mrb.mosaic_setup(meta, truth)
    rgb = score._to_8bit(mrb.to16(mrb.finish_mosaic(raw, black, white, cfa, cam, gamma, "bilinear")))
    return cv2.cvtColor(rgb, cv2.COLOR_BGR2GRAY).astype(np.float64)


def scored_pixels(burst, shape):
    h, w = shape
    sel = np.zeros((h, w), bool)
    sel[round(0.05 * h):h - round(0.05 * h), round(0.05 * w):w - round(0.05 * w)] = True
    return sel & (cv2.imread(os.path.join(burst, "valid.png"), 0) > 127)


def ours(burst, evanesco, work, extra):
    """Our merge's finished grey, its error pixels and its kept counts."""
    frames = sorted(glob.glob(os.path.join(burst, "frames", "*.dng")))
    merged, maps = os.path.join(work, "ours.dng"), os.path.join(work, "maps")
    subprocess.run([evanesco, "stack", *frames, "-o", merged, "--save-maps", maps, "--force", "--quiet", *extra],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    truth = mrb.load_truth(truth=os.path.join(burst, "truth.json"))
    gt = finished_grey(os.path.join(burst, "gt_raw.tif"), truth)
    grey = finished_grey(merged, truth)
    errors = (np.abs(grey - gt) > 20) & scored_pixels(burst, gt.shape)
    kept = os.path.join(maps, "kept-16.png")
    return truth, gt, grey, errors, cv2.imread(kept, cv2.IMREAD_UNCHANGED) if os.path.exists(kept) else None


def percentiles(v, q=(10, 50, 90)):
    return " / ".join("%.1f" % x for x in np.percentile(v, q)) if v.size else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("burst")
    p.add_argument("--vs", help="another burst of the same size: which error pixels its merge shares")
    p.add_argument("--evanesco", default=os.path.join(HERE, "..", ".build", "release", "evanesco"))
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = p.parse_args(argv[:cut])
    a.extra = argv[cut + 1:]
    with tempfile.TemporaryDirectory() as work:
        truth, gt, grey, errors, kept = ours(a.burst, a.evanesco, work, a.extra)
        sel = scored_pixels(a.burst, gt.shape)
        n = int(errors.sum())
        print("error pixels: %d of %d (%.4f %%)" % (n, sel.sum(), 100.0 * n / sel.sum()))
        if n == 0:
            return
        frames = os.path.join(a.burst, "frames")
        anchors = {}
        for method in ("reference", "mean"):
            out = os.path.join(work, method + ".tif")
            subprocess.run([sys.executable, os.path.join(BENCH, "anchor_raw.py"), frames, "-o", out, "--method", method],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            anchors[method] = finished_grey(out, truth)
        if kept is not None:
            print("frames kept there: %s (count of error pixels at 0, 1, 2, ... frames)"
                  % np.bincount(kept[errors]).tolist())
        print("signed error (ours - truth), 10th / 50th / 90th percentile: %s" % percentiles((grey - gt)[errors]))
        for method, g in anchors.items():
            print("%s's |error| there: %s" % (method, percentiles(np.abs(g - gt)[errors])))
        coverage = cv2.imread(os.path.join(a.burst, "coverage.png"), cv2.IMREAD_UNCHANGED)
        print("crossed by a passer-by: %d of %d (frames crossed: %s); over all scored pixels %.1f %%"
              % ((coverage[errors] > 0).sum(), n, np.bincount(coverage[errors]).tolist(),
                 100.0 * (coverage[sel] > 0).mean()))
        lap = np.abs(cv2.Laplacian(gt, cv2.CV_64F, ksize=3))
        print("truth's grey there: %s (all: %s)" % (percentiles(gt[errors]), percentiles(gt[sel])))
        print("truth's |Laplacian| there: %s (all: %s)" % (percentiles(lap[errors]), percentiles(lap[sel])))
        if a.vs:
            os.makedirs(os.path.join(work, "vs"))
            other = ours(a.vs, a.evanesco, os.path.join(work, "vs"), a.extra)[3]
            near = cv2.dilate(other.astype(np.uint8), np.ones((5, 5))) > 0
            print("%s: %d error pixels; %d of ours at the same pixels, %d within 2 px"
                  % (os.path.basename(os.path.normpath(a.vs)), other.sum(), (errors & other).sum(),
                     (errors & near).sum()))


if __name__ == "__main__":
    main()
