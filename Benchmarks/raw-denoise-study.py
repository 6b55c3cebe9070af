#!/usr/bin/env python3
"""What a spatial denoise after the raw merge would give, measured before building it (issue 48).

For each burst of Benchmarks/raw-stack-vs-anchor.py's family (made there): our merge with
--save-maps and without its own denoise (--raw-denoise 0; until 2026-12-01 the product's was this
filter, at 0.5 with the texture guard at 9 and a second pass at 0.35), then, in numpy, each CFA plane of the merged mosaic shrunk towards its 3 x 3 mean
where its local variance is about the noise that is left (a Lee filter): out = m + g (x - m),
g = max(0, 1 - r / v), v the 3 x 3 variance, r = c (S m + O) / kept, with S, O the reference's
DNG NoiseProfile and kept the merge's frames kept per pixel (kept-16.png). c = 0 is the merge as it
is. Each result is scored as the benchmark scores ours (score.py raw: linear PSNR against
gt_raw.tif, finished pEPs), so the figures compare with its table.

With --transform, the filter is the product's since 2026-12-01 instead (evn_raw_denoise_transform,
docs/benchmarks.md "A transform filter"): the four colours of each 2 x 2 cell decorrelated (luma,
green-magenta, red-blue, green-green), every 4 x 4 window of cells shrunk in the DCT domain in two
stages (hard threshold at --threshold deviations for a pilot; then each coefficient times
e / (e + s2), e the pilot's energy there, plus --guide times luma's pilot's for the colours), the
windows averaged (here: windows at every cell, edges reflected; the product uses the windows
inside the image). The noise is c times the line over the frames kept.

  Benchmarks/raw-denoise-study.py [--family DIR] [--c 0.25 0.5 1] [--only NAME ...] [--evanesco BIN] [--json FILE]
                                  [--transform [--guide G] [--threshold T] [--guide-all G] [--gate D] [--dark L]
                                               [--luma-window N] [--aggregate] [--differences [--difference-threshold T]]]

Prints each burst's linear PSNR and pEPs per c, then over the tuned and the held-out bursts the
change in dB (mean, median, least), the worst pEPs and the occluder bursts over 0.05 %, and the
static bursts' median gap to the averaging bound (the bound from the benchmark's --json, given
with --bounds).
"""
import argparse
import glob
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

import cv2
import numpy as np
import tifffile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("rawstack", os.path.join(HERE, "raw-stack-vs-anchor.py"))
rawstack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rawstack)
sys.path.insert(0, rawstack.BENCH)
import make_raw_burst as mrb  # noqa: E402
import score  # noqa: E402


def shrink(merged, kept, noise, c, clamp=0, texture=0, second=0):
    """The Lee filter of the module's docstring on each 2 x 2 phase of `merged` (normalised); with
    `clamp`, no sample moves by more than that many standard deviations of the noise left; with
    `texture`, samples whose 3 x 3 variance is over that many times the noise left stay as they are;
    with `second`, the filter runs again over its output, told that share of the noise left."""
    s, o = noise
    out = merged.copy()
    for oy in (0, 1):
        for ox in (0, 1):
            p, k = merged[oy::2, ox::2], np.maximum(kept[oy::2, ox::2], 1)
            m = cv2.blur(p, (3, 3))
            v = cv2.blur(p * p, (3, 3)) - m * m
            left = (s * np.maximum(m, 0) + o) / k
            y = lee(p, m, v, left, c, texture)
            if clamp > 0:
                t = clamp * np.sqrt(np.maximum(left, 0))
                y = p + np.clip(y - p, -t, t)
            if second > 0:
                m2 = cv2.blur(y, (3, 3))
                y = lee(y, m2, cv2.blur(y * y, (3, 3)) - m2 * m2, second * left, c, texture)
            out[oy::2, ox::2] = y
    return out


def lee(p, m, v, left, c, texture):
    """One pass: `p` shrunk towards its 3 x 3 mean `m` by its 3 x 3 variance `v` against c x `left`."""
    g = np.clip((v - c * left) / np.maximum(v, 1e-12), 0, 1)
    if texture > 0:
        g[v > texture * left] = 1
    return m + g * (p - m)


def dct(n):
    """The orthonormal n-point DCT-II: row u, tap k."""
    return np.array([[(np.sqrt(1 / n) if u == 0 else np.sqrt(2 / n)) * np.cos(np.pi * (2 * k + 1) * u / (2 * n))
                      for k in range(n)] for u in range(n)])


# Luma, green-magenta, red-blue, green-green from red, green, green, blue (orthonormal).
COLOURS = np.array([[0.5, 0.5, 0.5, 0.5], [0.5, -0.5, -0.5, 0.5], [np.sqrt(0.5), 0, 0, -np.sqrt(0.5)],
                    [0, np.sqrt(0.5), -np.sqrt(0.5), 0]])


def windows(p, n=4):
    """Every n x n window's DCT coefficients, the window's top-left at each cell (edges reflected)."""
    d = dct(n)
    rows = [cv2.filter2D(p, -1, d[u][None, :], anchor=(0, 0), borderType=cv2.BORDER_REFLECT) for u in range(n)]
    return {(v, u): cv2.filter2D(rows[u], -1, d[v][:, None], anchor=(0, 0), borderType=cv2.BORDER_REFLECT)
            for v in range(n) for u in range(n)}


def averaged(coeffs, n=4):
    """The windows' inverse transforms averaged at each cell (n x n windows cover every cell)."""
    d = dct(n)
    out = 0
    for v in range(n):
        acc = sum(cv2.filter2D(coeffs[(v, u)], -1, d[u][::-1][None, :], anchor=(n - 1, 0),
                               borderType=cv2.BORDER_REFLECT) for u in range(n))
        out = out + cv2.filter2D(acc, -1, d[v][::-1][:, None], anchor=(0, n - 1), borderType=cv2.BORDER_REFLECT)
    return out / (n * n)


def window_mean(p, n=4):
    """Each n x n window's mean, at its top-left cell (edges reflected)."""
    return cv2.filter2D(p, -1, np.ones((n, n)) / (n * n), anchor=(0, 0), borderType=cv2.BORDER_REFLECT)


def transform(merged, kept, noise, cfa, c, threshold, guide, variant, frames):
    """The two-stage 4 x 4 transform filter of the module's docstring on the merged mosaic, with the
    study's `variant` (main's options of the same names; all off: the product's filter)."""
    s, o = noise
    sites = [(i // 2, i % 2) for i in range(4)]
    order = [sites[cfa.index("R")], *[sites[i] for i in range(4) if cfa[i] == "G"], sites[cfa.index("B")]]
    h, w = merged.shape[0] // 2, merged.shape[1] // 2
    planes = np.stack([merged[oy::2, ox::2][:h, :w] for oy, ox in order])
    k = np.maximum(kept[0::2, 0::2][:h, :w], 1)
    var = np.stack([np.maximum(s * np.maximum(cv2.blur(pl, (3, 3)), 0) + o, 0) * c / k for pl in planes])
    comp, cvar = np.tensordot(COLOURS, planes, 1), np.tensordot(COLOURS ** 2, var, 1)
    vw = [window_mean(v) for v in cvar]
    pilots = []
    for i in range(4):
        co = windows(comp[i])
        pilots.append(averaged({key: q if key == (0, 0) else q * (q * q > threshold ** 2 * vw[i])
                                for key, q in co.items()}))
    luma = windows(pilots[0])
    # The guide per window: where every frame was kept (--guide-all), only in dark windows (--dark).
    gmap = guide
    if variant.dark is not None:
        gmap = np.where(window_mean(comp[0]) / 2 < variant.dark, guide, 0.0)
    if variant.guide_all is not None:
        gmap = np.where(window_mean((k >= frames).astype(np.float64)) >= 0.999, variant.guide_all, gmap)
    out = []
    for i in range(4):
        n = variant.luma_window if i == 0 else 4
        co, pil = windows(comp[i], n), (luma if n == 4 else windows(pilots[0], n)) if i == 0 else windows(pilots[i])
        noise_w = vw[i] if n == 4 else window_mean(cvar[i], n)
        shrunk, energy = {}, 0
        for key, q in co.items():
            gk = gmap if variant.gate is None else gmap * (q * q > variant.gate ** 2 * noise_w)
            e = pil[key] ** 2 + (gk * luma[key] ** 2 if i > 0 else 0)
            g = e / (e + noise_w + 1e-30)
            shrunk[key] = q if key == (0, 0) else q * g
            energy = energy + (0 if key == (0, 0) else g * g)
        if variant.aggregate:
            # Each window weighed by 1 / (1 + its Wiener gains' energy), as BM3D's aggregation.
            wt = 1.0 / (1.0 + energy)
            total = cv2.filter2D(wt, -1, np.ones((n, n)), anchor=(n - 1, n - 1), borderType=cv2.BORDER_REFLECT)
            out.append(averaged({key: q * wt for key, q in shrunk.items()}, n) * n * n / total)
        else:
            out.append(averaged(shrunk, n))
    back = np.tensordot(COLOURS.T, np.stack(out), 1)
    y = merged.copy()
    for j, (oy, ox) in enumerate(order):
        y[oy:2 * h:2, ox:2 * w:2] = back[j]
    return y


def differences(merged, filtered, kept, noise, cfa, c, threshold):
    """`filtered` (the transform filter's output) with its red and blue taken again as colour
    differences at their own sites: green there (the mean of its four filtered green neighbours)
    plus the merge's red or blue minus it, that difference filtered alone in two 4 x 4 stages
    (as `transform`, without the colour transform and the guide), its noise the channel's line
    at the 3 x 3 mean over the frames kept, times c."""
    s, o = noise
    greens = np.zeros(merged.shape, bool)
    for i in range(4):
        if cfa[i] == "G":
            greens[i // 2::2, i % 2::2] = True
    cross = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], float) / 4
    green = np.where(greens, filtered, cv2.filter2D(np.where(greens, filtered, 0.0), -1, cross,
                                                    borderType=cv2.BORDER_REFLECT))
    out = filtered.copy()
    for colour in "RB":
        i = cfa.index(colour)
        oy, ox = i // 2, i % 2
        plane, g = merged[oy::2, ox::2], green[oy::2, ox::2]
        var = np.maximum(s * np.maximum(cv2.blur(plane, (3, 3)), 0) + o, 0) * c / np.maximum(kept[oy::2, ox::2], 1)
        vw, co = window_mean(var), windows(plane - g)
        pilot = windows(averaged({key: q if key == (0, 0) else q * (q * q > threshold ** 2 * vw)
                                  for key, q in co.items()}))
        out[oy::2, ox::2] = g + averaged({key: q if key == (0, 0) else q * pilot[key] ** 2 / (pilot[key] ** 2 + vw + 1e-30)
                                          for key, q in co.items()})
    return out


def study(burst, evanesco, cs, work, clamp=0, texture=0, second=0, filt=None):
    frames = sorted(glob.glob(os.path.join(burst, "frames", "*.dng")))
    merged_path, maps = os.path.join(work, "merged.dng"), os.path.join(work, "maps")
    subprocess.run([evanesco, "stack", *frames, "-o", merged_path, "--save-maps", maps, "--raw-denoise", "0", "--force",
                    "--quiet"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw, meta = mrb.read_raw(merged_path)
    _, ref = mrb.read_raw(frames[0])
    black, white = float(np.asarray(meta["black"]).ravel()[0]), float(meta["white"])
    x = (raw.astype(np.float64) - black) / (white - black)
    kept = cv2.imread(os.path.join(maps, "kept-16.png"), cv2.IMREAD_UNCHANGED).astype(np.float64)
    valid = cv2.imread(os.path.join(burst, "valid.png"), 0)
    out = {}
    for c in cs:
        if c <= 0:
            y = x
        elif filt:
            y = transform(x, kept, ref["noise_profile"], meta["cfa"], c, *filt, frames=len(frames))
            if filt[2].differences:
                y = differences(x, y, kept, ref["noise_profile"], meta["cfa"], c, filt[2].difference_threshold)
        else:
            y = shrink(x, kept, ref["noise_profile"], c, clamp, texture, second)
        path = os.path.join(work, "c.tif")
        tifffile.imwrite(path, np.clip(np.round(y * (white - black) + black), 0, 65535).astype(np.uint16))
        d = score.score_raw(path, os.path.join(burst, "gt_raw.tif"), os.path.join(burst, "truth.json"), valid=valid,
                            black=black, white=white)
        out[c] = {"linear": d["linear"]["PSNR"], "pEPs": d["finished"]["pEPs"]}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default=os.path.join(HERE, "..", ".build", "raw-stack-family"))
    p.add_argument("--c", nargs="*", type=float, default=[0.25, 0.5, 1.0])
    p.add_argument("--only", nargs="*")
    p.add_argument("--evanesco", default=os.path.join(HERE, "..", ".build", "release", "evanesco"))
    p.add_argument("--bounds", help="a raw-stack-vs-anchor.py --json: its bounds, for the static bursts' gaps")
    p.add_argument("--clamp", type=float, default=0,
                   help="no sample moved by more than this many standard deviations of the noise left (0: unbounded)")
    p.add_argument("--texture", type=float, default=0,
                   help="samples whose 3 x 3 variance is over this many times the noise left stay as they are (0: none)")
    p.add_argument("--second", type=float, default=0,
                   help="a second pass told this share of the noise left (the product: 0.35; 0: one pass)")
    p.add_argument("--transform", action="store_true", help="the two-stage 4 x 4 transform filter, not the Lee filter")
    p.add_argument("--threshold", type=float, default=2.7, help="--transform's first stage, in noise deviations")
    p.add_argument("--guide", type=float, default=1.0, help="--transform: the share of luma's pilot the colours keep")
    # Variants of the transform filter studied for the tripod target (docs/benchmarks.md, 2026-12-02).
    p.add_argument("--guide-all", type=float, help="--transform: the guide where every frame was kept (window all at N)")
    p.add_argument("--gate", type=float,
                   help="--transform: the guide only for colour coefficients over this many noise deviations")
    p.add_argument("--dark", type=float, help="--transform: the guide only in windows darker than this share of white")
    p.add_argument("--luma-window", type=int, default=4, help="--transform: luma's second stage on n x n windows")
    p.add_argument("--differences", action="store_true",
                   help="--transform: red and blue again as differences from green at their own sites (`differences`)")
    p.add_argument("--difference-threshold", type=float, default=2.7,
                   help="--differences: their first stage's threshold, in noise deviations")
    p.add_argument("--aggregate", action="store_true",
                   help="--transform: windows weighed by 1 / (1 + their Wiener gains' energy) (BM3D's aggregation)")
    p.add_argument("--json")
    a = p.parse_args()
    rawstack.require_plain_build(a.evanesco)
    cs = [0.0] + [c for c in a.c if c > 0]
    names = a.only or list(rawstack.FAMILY)
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            r = study(rawstack.make(a.family, name), a.evanesco, cs, work, a.clamp, a.texture, a.second,
                      (a.threshold, a.guide, a) if a.transform else None)
            results[name] = r
            print("%-36s " % name + "  ".join("c=%.2f %6.2f dB %.3f %%" % (c, r[c]["linear"], r[c]["pEPs"]) for c in cs),
                  flush=True)
    occluders = {n for n in names if rawstack.FAMILY[n][5] > 0}
    summary = {}
    for part, tuned in (("tuned", True), ("held_out", False)):
        sel = [n for n in names if rawstack.FAMILY[n][9] == tuned]
        if not sel:
            continue
        for c in cs[1:]:
            d = [results[n][c]["linear"] - results[n][0.0]["linear"] for n in sel]
            peps = [results[n][c]["pEPs"] for n in sel if n in occluders]
            summary["%s c=%g" % (part, c)] = s = {
                "bursts": len(sel), "dB_mean": round(statistics.mean(d), 3), "dB_median": round(statistics.median(d), 3),
                "dB_least": round(min(d), 3), "pEPs_worst": max(peps) if peps else None,
                "occluder_bursts_over_0.05": sum(1 for v in peps if v > 0.05)}
            print("%-8s c=%-5g %s" % (part, c, s))
    if a.bounds:
        bounds = {k: v["bound"] for k, v in json.load(open(a.bounds))["bursts"].items()}
        static = [n for n in names if n not in occluders and n in bounds]
        for c in cs:
            gaps = [bounds[n] - results[n][c]["linear"] for n in static]
            summary["bound_gap_median c=%g" % c] = round(statistics.median(gaps), 3)
            print("static bursts (%d): bound gap median %.2f dB at c=%g" % (len(gaps), statistics.median(gaps), c))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bursts": {n: {str(c): v for c, v in r.items()} for n, r in results.items()},
                       "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
