#!/usr/bin/env python3
"""Our raw burst merge against ../shared/bench/anchor_raw.py (HDR+ from the papers, and its mean) on
make_raw_burst.py bursts with exact ground truth, side by side in one run.

The family (made here with make_raw_burst.py when absent): real photos of different kinds as bases,
seeds, ISO 100 to 6400, tripod / hand-held / strong motion, 4 to 30 frames, with and without moving
occluders and parallax, all four CFAs. Bursts marked "tune" are the ones the merge's constants were
set on; the summary's worst cases are over the others only.

For each burst, three commands run one after the other, each timed whole (wall seconds):
  * ours:    evanesco stack frames/*.dng -o merged.dng           (the default: robust merge, the
             frames sampled by colour differences; --raw-sampling sites for the plain gather:
             StackOptions.rawSampling)
  * hdrplus: anchor_raw.py frames -o hdrplus.tif --method hdrplus
  * mean:    anchor_raw.py frames -o mean.tif --method mean
and the reference frame alone (anchor_raw.py --method reference). Each result is scored with
score.py raw against gt_raw.tif: linear PSNR (and on the occluded pixels), and the finished pEPs and
PSNR against gt.png. The perfect-averaging bound is the reference's linear PSNR + 10 log10 N.

Prints a table and JSON (--json): per burst, and over the held-out bursts the median and worst of
ours - max(hdrplus, mean) and of bound - ours, and the time ratios.

  Benchmarks/raw-stack-vs-anchor.py [--family DIR] [--only NAME ...] [--rounds N] [--evanesco BIN] [--json FILE]
                                    [--raw-sampling sites|colour] [--make-only]

--only pug-12mp runs the speed target's burst (12 frames of 12 MP), which the default run leaves out.
--rounds N (default 1) times ours, hdrplus and mean in turn N times (ours hdrplus mean ours ...): the
seconds are medians and each time ratio is the median of the rounds' own ratios, so a machine that
drifts during the run moves both sides of each ratio.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))
DATA = os.path.normpath(os.path.join(BENCH, "..", "data"))

# name: (base, size, frames, iso, motion, occluders, cfa, seed, parallax (disparity map, px) or None, tune)
FAMILY = {
    "pug-static": ("depth/pug-iphone13pro/pug.heic", "1600x1200", 12, 800, "handheld", 0, "RGGB", 5, None, True),
    "aloe-iso100": ("stereo/aloe/aloeL.jpg", "1280x960", 8, 100, "handheld", 0, "BGGR", 1, None, True),
    "moto-iso1600": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 1600, "handheld", 0, "GRBG", 2, None,
                     True),
    "graf-iso3200": ("registration/graffiti/graf1.png", "1280x960", 20, 3200, "strong", 0, "GBRG", 3, None, True),
    "tree-iso6400": ("bursts/hdrplus-tree/frame-000.jpg", "1280x960", 30, 6400, "handheld", 0, "RGGB", 4, None,
                     False),
    "aloe-tripod4": ("stereo/aloe/aloeL.jpg", "1280x960", 4, 200, "tripod", 0, "RGGB", 8, None, False),
    "pug-people": ("depth/pug-iphone13pro/pug.heic", "1280x960", 12, 800, "handheld", 6, "RGGB", 6, None, True),
    "moto-parallax": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 400, "handheld", 4, "BGGR", 7,
                      ("stereo/motorcycle/derived_motorcycle_disp.pfm", 6), True),
    "lens-iso1600-people": ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "1280x960", 16, 1600, "handheld",
                            5, "GRBG", 9, None, True),
    # Held out from every choice so far (added after the blend's constants were set).
    "aero-iso100": ("registration/aero/aero1.jpg", "1280x960", 8, 100, "handheld", 0, "GBRG", 11, None, True),
    # (Looked at for RawSampling.colour's kernels: tuned on since.)
    "aero-iso400": ("registration/aero/aero1.jpg", "1280x960", 10, 400, "handheld", 0, "RGGB", 12, None, True),
    "nightcars-iso3200-people": ("bursts/night-cars/in1.jpg", "1280x960", 14, 3200, "handheld", 4, "GBRG", 13,
                                 None, False),
    "lowlight-iso800-strong-people": ("bursts/lowlight-handheld/1.jpg", "1280x960", 12, 800, "strong", 3, "BGGR",
                                      14, None, False),
    # Passers-by over every kind of scene, added to choose the raw path's mismatch limit
    # (LocalAlignmentOptions.linear): tuned on.
    "pug-iso800-people-s21": ("depth/pug-iphone13pro/pug.heic", "1280x960", 12, 800, "handheld", 6, "RGGB", 21,
                              None, True),
    "aero-iso1600-people": ("registration/aero/aero1.jpg", "1280x960", 12, 1600, "handheld", 5, "GRBG", 22, None,
                            True),
    "moto-parallax-iso800-people": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 800, "handheld", 4,
                                    "RGGB", 23, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 6), True),
    "tree-iso3200-strong-people": ("bursts/hdrplus-tree/frame-000.jpg", "1280x960", 16, 3200, "strong", 6, "BGGR",
                                   24, None, True),
    # Held out from that choice (made after it); the last two were then looked at for the blend's
    # dense fill, and are tuned on for it.
    "pug-iso1600-people": ("depth/pug-iphone13pro/pug.heic", "1280x960", 14, 1600, "handheld", 6, "GBRG", 31, None,
                           False),
    "moto-parallax-strong-people": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 400, "strong", 5,
                                    "GRBG", 32, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 8), True),
    "aloe-parallax-people": ("stereo/aloe/aloeL.jpg", "1280x960", 10, 800, "handheld", 4, "BGGR", 33,
                             ("stereo/aloe/aloeGT.png", 6), True),
    "lens-iso3200-strong-people": ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "1280x960", 12, 3200,
                                   "strong", 6, "RGGB", 34, None, True),
    "nightcars-iso6400-people": ("bursts/night-cars/in1.jpg", "1280x960", 10, 6400, "handheld", 5, "RGGB", 35, None,
                                 True),
    # Held out from the blend's dense fill (RawMerge.blend.dense), which the two bursts above
    # marked tuned were looked at for (made after it).
    "graf-iso6400-people": ("registration/graffiti/graf1.png", "1280x960", 12, 6400, "handheld", 5, "GRBG", 51, None,
                            True),
    "lowlight-iso3200-people": ("bursts/lowlight-handheld/1.jpg", "1280x960", 10, 3200, "strong", 6, "BGGR", 52,
                                None, False),
    # (Looked at for RawSampling.colour's pull towards the plain gather: tuned on since.)
    "pug-iso6400-people": ("depth/pug-iphone13pro/pug.heic", "1280x960", 14, 6400, "handheld", 6, "RGGB", 53, None,
                           True),
    # (Looked at for the blend's offset guard: tuned on since.)
    "moto-parallax-iso3200-people": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 3200, "handheld", 5,
                                     "GBRG", 54, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 8), True),
    # Made after the blend's wide guard was chosen (graf-iso6400-people, tree-iso3200-strong-people
    # and, against its costs, aero-iso100 and moto-parallax-iso800-people were looked at for it);
    # lens-iso6400-people and tree-iso6400-people then showed what the next two choices fixed (the
    # coarse look's noise units, the vote's guard), and every burst above was run for them: tuned
    # on, as are the four older held-out ones those choices' numbers were read from (aero-iso100,
    # aloe-parallax-people, lens-iso3200-strong-people, graf-iso6400-people).
    "aero-iso6400-people": ("registration/aero/aero1.jpg", "1280x960", 12, 6400, "handheld", 5, "BGGR", 61, None,
                            True),
    "graf-iso3200-strong-people": ("registration/graffiti/graf1.png", "1280x960", 14, 3200, "strong", 6, "RGGB", 62,
                                   None, True),
    "lens-iso6400-people": ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "1280x960", 12, 6400, "handheld",
                            5, "GBRG", 63, None, True),
    "tree-iso6400-people": ("bursts/hdrplus-tree/frame-000.jpg", "1280x960", 20, 6400, "handheld", 6, "GRBG", 64,
                            None, True),
    "aloe-parallax-iso3200-people": ("stereo/aloe/aloeL.jpg", "1280x960", 12, 3200, "handheld", 5, "RGGB", 65,
                                     ("stereo/aloe/aloeGT.png", 6), True),
    # Made after the noise units were chosen, and run for the vote's guard: tuned on.
    "pug-iso3200-people": ("depth/pug-iphone13pro/pug.heic", "1280x960", 12, 3200, "handheld", 5, "BGGR", 71, None,
                           True),
    "moto-iso6400-people": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 6400, "handheld", 5, "GRBG", 72,
                            None, True),
    "aloe-iso6400-people": ("stereo/aloe/aloeL.jpg", "1280x960", 10, 6400, "handheld", 4, "RGGB", 73, None, True),
    "lowlight-iso6400-people": ("bursts/lowlight-handheld/1.jpg", "1280x960", 14, 6400, "strong", 5, "GBRG", 74,
                                None, True),
    "moto-parallax-iso6400-people": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 6400, "handheld", 4,
                                     "BGGR", 75, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 6), True),
    "nightcars-iso1600-people": ("bursts/night-cars/in1.jpg", "1280x960", 12, 1600, "handheld", 5, "RGGB", 76, None,
                                 True),
    # Held out from all three (made after the last of them, never looked at before the run).
    "aero-iso3200-strong-people": ("registration/aero/aero1.jpg", "1280x960", 14, 3200, "strong", 5, "RGGB", 81,
                                   None, False),
    "graf-iso1600-people": ("registration/graffiti/graf1.png", "1280x960", 10, 1600, "handheld", 4, "BGGR", 82, None,
                            False),
    "lens-iso800-people": ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "1280x960", 12, 800, "handheld", 5,
                           "GRBG", 83, None, False),
    "pug-iso6400-strong-people": ("depth/pug-iphone13pro/pug.heic", "1280x960", 12, 6400, "strong", 5, "GBRG", 84,
                                  None, False),
    # (Looked at for the blend's offset guard: tuned on since.)
    "aloe-parallax-iso6400-people": ("stereo/aloe/aloeL.jpg", "1280x960", 12, 6400, "handheld", 4, "GRBG", 85,
                                     ("stereo/aloe/aloeGT.png", 6), True),
    "tree-iso3200-people": ("bursts/hdrplus-tree/frame-000.jpg", "1280x960", 20, 3200, "handheld", 6, "RGGB", 86,
                            None, False),
    # Made after the blend's offset guard was chosen (RawMerge.blend.offset), never looked at before the run.
    # (Looked at for the burst-level parallax rule: tuned on since.)
    "moto-parallax-iso6400-people-s91": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 6400, "handheld",
                                         5, "RGGB", 91, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 8), True),
    "aloe-parallax-iso1600-people": ("stereo/aloe/aloeL.jpg", "1280x960", 14, 1600, "handheld", 4, "BGGR", 92,
                                     ("stereo/aloe/aloeGT.png", 6), False),
    "nightcars-iso3200-strong-people": ("bursts/night-cars/in1.jpg", "1280x960", 12, 3200, "strong", 5, "GRBG", 93,
                                        None, False),
    "lowlight-iso1600-people": ("bursts/lowlight-handheld/1.jpg", "1280x960", 10, 1600, "handheld", 5, "RGGB", 94,
                                None, False),
    "graf-iso6400-strong-people": ("registration/graffiti/graf1.png", "1280x960", 12, 6400, "strong", 5, "BGGR", 95,
                                   None, False),
    "tree-iso1600-people": ("bursts/hdrplus-tree/frame-000.jpg", "1280x960", 16, 1600, "handheld", 5, "GBRG", 96,
                            None, False),
    # Made after the burst-level parallax rule (LocalAlignmentOptions.burstParallaxShare), which every
    # burst above was run for (and moto-parallax-iso6400-people-s91 looked at: tuned on since); never
    # looked at before the run.
    "moto-parallax-iso1600-people-s101": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 12, 1600, "handheld",
                                          5, "GRBG", 101, ("stereo/motorcycle/derived_motorcycle_disp.pfm", 8), False),
    "aloe-parallax-iso6400-people-s102": ("stereo/aloe/aloeL.jpg", "1280x960", 12, 6400, "handheld", 5, "BGGR", 102,
                                          ("stereo/aloe/aloeGT.png", 6), False),
    # (Looked at for the transform denoise's luma guide, RawMerge.transform: tuned on since.)
    "moto-parallax-iso6400-strong-people-s103": ("stereo/motorcycle/motorcycle_left.png", "1280x960", 10, 6400,
                                                 "strong", 4, "GBRG", 103,
                                                 ("stereo/motorcycle/derived_motorcycle_disp.pfm", 6), True),
    "aloe-parallax-iso400-s104": ("stereo/aloe/aloeL.jpg", "1280x960", 8, 400, "handheld", 0, "RGGB", 104,
                                  ("stereo/aloe/aloeGT.png", 8), False),
    "pug-iso3200-people-s105": ("depth/pug-iphone13pro/pug.heic", "1280x960", 12, 3200, "handheld", 5, "GRBG", 105,
                                None, False),
    "graf-iso800-s106": ("registration/graffiti/graf1.png", "1280x960", 10, 800, "handheld", 0, "BGGR", 106, None,
                         False),
}
# The speed target's size (issue 48: 12 frames of 12 MP), run only when named with --only: its
# anchors take about 45 s a round. Not in the family's summaries of quality.
SPEED = {
    "pug-12mp": ("depth/pug-iphone13pro/pug.heic", "4000x3000", 12, 800, "handheld", 0, "RGGB", 5, None, False),
}
BURSTS = {**FAMILY, **SPEED}


def make(family, name):
    base, size, frames, iso, motion, objects, cfa, seed, parallax, _ = BURSTS[name]
    out = os.path.join(family, name)
    if os.path.isfile(os.path.join(out, "truth.json")):
        return out
    cmd = [sys.executable, os.path.join(BENCH, "make_raw_burst.py"), "--base", os.path.join(DATA, base), "--out", out,
           "--frames", str(frames), "--seed", str(seed), "--size", size, "--iso-preset", str(iso), "--motion", motion,
           "--objects", str(objects), "--cfa", cfa, "--force"]
    if parallax:
        # (with a disparity map the size is the base's, scaled to a longest side)
        i = cmd.index("--size")
        cmd[i:i + 2] = ["--max-side", str(max(int(v) for v in size.split("x")))]
        cmd += ["--disparity", os.path.join(DATA, parallax[0]), "--parallax", str(parallax[1])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def require_plain_build(binary):
    """Stops on a tool built with a sanitizer: Benchmarks/lib.sh's check, which says why."""
    check = subprocess.run(["bash", "-c", 'source "$0" && require_plain_build "$1"',
                            os.path.join(HERE, "lib.sh"), binary])
    if check.returncode != 0:
        sys.exit(check.returncode)


def timed(cmd):
    # Each command starts with the file writes of the one before on disk (both sides alike):
    # ours, timed right after anchor_raw.py, otherwise shares the machine with the writeback of
    # the anchor's output (1.47 s against 1.41 s after a sync and 1.33 s alone, farm-bench).
    os.sync()
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def scored(result, burst):
    out = subprocess.run([sys.executable, os.path.join(BENCH, "score.py"), "raw", result, "--burst", burst],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    occ = d["linear"].get("occluded")
    # pEPs: both mosaics through the same finish (no demosaic floor); PSNR: the finished result
    # against gt.png (the floor included, as a user sees it).
    return {"linear": d["linear"]["PSNR"], "occluded": occ["PSNR"] if occ else None,
            "pEPs": d["finished"]["pEPs"], "finished_PSNR": d["finished_vs_gt_png"]["PSNR"]}


def run(burst, evanesco, work, rounds=1, sampling=None):
    frames = sorted(glob.glob(os.path.join(burst, "frames", "*.dng")))
    anchor = [sys.executable, os.path.join(BENCH, "anchor_raw.py"), os.path.join(burst, "frames")]
    r = {"frames": len(frames)}
    outs = {"ours": os.path.join(work, "ours.dng"), "hdrplus": os.path.join(work, "hdrplus.tif"),
            "mean": os.path.join(work, "mean.tif"), "reference": os.path.join(work, "reference.tif")}
    ours = [evanesco, "stack", *frames, "-o", outs["ours"], "--force", "--quiet"]
    commands = {"ours": ours + (["--raw-sampling", sampling] if sampling else []),
                "hdrplus": anchor + ["-o", outs["hdrplus"], "--method", "hdrplus"],
                "mean": anchor + ["-o", outs["mean"], "--method", "mean"]}
    times = {k: [] for k in commands}
    for _ in range(max(1, rounds)):
        for k, cmd in commands.items():
            times[k].append(timed(cmd))
    r["seconds"] = {k: statistics.median(v) for k, v in times.items()}
    r["seconds"]["reference"] = timed(anchor + ["-o", outs["reference"], "--method", "reference"])
    if rounds > 1:
        r["seconds_all"] = times
    for k, path in outs.items():
        r[k] = scored(path, burst)
    r["bound"] = round(r["reference"]["linear"] + 10 * __import__("math").log10(len(frames)), 3)
    best_anchor = max(r["hdrplus"]["linear"], r["mean"]["linear"])
    r["ours_minus_anchor_dB"] = round(r["ours"]["linear"] - best_anchor, 3)
    r["bound_minus_ours_dB"] = round(r["bound"] - r["ours"]["linear"], 3)
    r["finished_gain_over_reference_dB"] = round(r["ours"]["finished_PSNR"] - r["reference"]["finished_PSNR"], 3)
    for anchor_method in ("hdrplus", "mean"):
        ratios = [o / t for o, t in zip(times["ours"], times[anchor_method])]
        r["time_ratio_vs_" + anchor_method] = round(statistics.median(ratios), 4)
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default=os.path.join(HERE, "..", ".build", "raw-stack-family"))
    p.add_argument("--only", nargs="*")
    p.add_argument("--rounds", type=int, default=1, help="times each command runs, in turn (medians)")
    p.add_argument("--evanesco", default=os.path.join(HERE, "..", ".build", "release", "evanesco"))
    p.add_argument("--json")
    p.add_argument("--raw-sampling", choices=["sites", "colour"], help="ours' --raw-sampling (default: ours' default)")
    p.add_argument("--make-only", action="store_true", help="make the family's bursts and stop")
    a = p.parse_args()
    if not a.make_only:
        require_plain_build(a.evanesco)
    os.makedirs(a.family, exist_ok=True)
    if a.make_only:
        for name in a.only or FAMILY:
            make(a.family, name)
        return
    results = {}
    unknown = [n for n in a.only or [] if n not in BURSTS]
    if unknown:
        p.error("unknown burst %s; the bursts: %s" % (", ".join(unknown), ", ".join(BURSTS)))
    for name in a.only or FAMILY:
        burst = make(a.family, name)
        work = os.path.join(a.family, name, "results")
        os.makedirs(work, exist_ok=True)
        r = results[name] = run(burst, a.evanesco, work, a.rounds, a.raw_sampling)
        r["tune"] = BURSTS[name][-1]
        print("%-20s N=%2d  ours %6.2f  hdrplus %6.2f  mean %6.2f  ref %6.2f  bound %6.2f  | pEPs ours %.3f%% "
              "hdrplus %.3f%% mean %.3f%% | s ours %.2f hdrplus %.2f mean %.2f (ours/hdrplus %.3f)" % (
                  name, r["frames"], r["ours"]["linear"], r["hdrplus"]["linear"], r["mean"]["linear"],
                  r["reference"]["linear"], r["bound"], r["ours"]["pEPs"], r["hdrplus"]["pEPs"], r["mean"]["pEPs"],
                  r["seconds"]["ours"], r["seconds"]["hdrplus"], r["seconds"]["mean"], r["time_ratio_vs_hdrplus"]),
              flush=True)
    held = [r for r in results.values() if not r["tune"]]
    # The averaging bound is the reference frame's PSNR + 10 log10 N: with occluders in the
    # reference it is no bound, so its gaps are taken over the static bursts only.
    static = {n: r for n, r in results.items() if not BURSTS[n][5]}
    summary = {}
    if static:
        gaps = [r["bound_minus_ours_dB"] for r in static.values()]
        held_gaps = [r["bound_minus_ours_dB"] for r in static.values() if not r["tune"]]
        summary["bound_minus_ours_dB_static"] = {
            "bursts": len(gaps), "median": statistics.median(gaps), "worst": max(gaps),
            "held_out_median": statistics.median(held_gaps) if held_gaps else None}
    if held:
        gains = [r["ours_minus_anchor_dB"] for r in held]
        summary.update({
            "held_out_bursts": len(held),
            "ours_minus_best_anchor_dB": {"median": statistics.median(gains), "worst": min(gains)},
            "pEPs_ours_percent_worst": max(r["ours"]["pEPs"] for r in held),
            "time_ratio_vs_hdrplus": {"median": statistics.median(r["time_ratio_vs_hdrplus"] for r in held),
                                      "worst": max(r["time_ratio_vs_hdrplus"] for r in held)},
            "time_ratio_vs_mean": {"median": statistics.median(r["time_ratio_vs_mean"] for r in held),
                                   "worst": max(r["time_ratio_vs_mean"] for r in held)},
        })
    if summary:
        print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"raw_sampling": a.raw_sampling or "default", "bursts": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
