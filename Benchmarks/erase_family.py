#!/usr/bin/env python3
"""The masks, scores and summary of Benchmarks/erase-family.sh.

  erase_family.py mask BURST --kind painted|coverage --dilation PX   writes BURST/mask.png
  erase_family.py score BURST --name NAME --seconds S --bench DIR     prints one JSON row
  erase_family.py summary ROWS.jsonl                                  prints the table
"""
import argparse
import glob
import json
import statistics
import subprocess
import sys

import cv2
import numpy as np

SEAM_BAND = 12  # Eraser.seamBand: beyond it the erased output must be the plain merge's, to the bit


def disk(r):
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def footprints(burst):
    """The lingering occluders' pixels, as a user would paint them: where every frame of an
    occluder's stay, warped back to the reference, differs from the clean scene (a passer-by
    differs in a few of them only), closed, its holes filled."""
    truth = json.load(open(burst + "/truth.json"))
    gt = cv2.imread(burst + "/gt.png").astype(np.float32)
    h, w = gt.shape[:2]
    files = sorted(glob.glob(burst + "/frames/*"))
    mask = np.zeros((h, w), np.uint8)
    for o in truth["occluders"]:
        if o["kind"] != "lingering":
            continue
        first, last = o["frames_present"]
        seen = np.ones((h, w), bool)
        for k in range(first, last + 1):
            hk = np.array(truth["frames"][k]["homography"], np.float64)
            back = cv2.warpPerspective(cv2.imread(files[k]).astype(np.float32), hk, (w, h), flags=cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_REPLICATE)
            seen &= np.abs(back - gt).max(axis=2) > 30
        one = cv2.morphologyEx(seen.astype(np.uint8) * 255, cv2.MORPH_CLOSE, disk(4))
        contours, _ = cv2.findContours(one, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(mask, [c for c in contours if cv2.contourArea(c) > 200], -1, 255, cv2.FILLED)
    return mask


def make_mask(a):
    if a.kind == "coverage":
        coverage = cv2.imread(a.burst + "/coverage.png", cv2.IMREAD_UNCHANGED)
        mask = ((coverage > 10) * 255).astype(np.uint8)  # covered in more than half of the 20 frames
    else:
        mask = footprints(a.burst)
    cv2.imwrite(a.burst + "/mask.png", cv2.dilate(mask, disk(a.dilation)))


def ceiling(burst, gt):
    """What the frames allow: every frame warped back by its true homography (Lanczos), divided by
    its exposure gain, and averaged; no merge of these frames does better where nothing ever
    passed, short of undoing their resampling and compression."""
    truth = json.load(open(burst + "/truth.json"))
    h, w = gt.shape[:2]
    total = np.zeros_like(gt)
    for f in truth["frames"]:
        frame = cv2.imread(burst + "/" + f["file"]).astype(np.float64) / f.get("gain", 1.0)
        total += cv2.warpPerspective(frame, np.array(f["homography"], np.float64), (w, h), flags=cv2.INTER_LANCZOS4,
                                     borderMode=cv2.BORDER_REFLECT)
    return total / len(truth["frames"])


def score(a):
    b = a.burst
    gt = cv2.imread(b + "/gt.png").astype(np.float64)
    valid = cv2.imread(b + "/valid.png", 0) > 127
    mask = cv2.imread(b + "/mask.png", 0) > 127
    h, w = valid.shape
    scored = np.zeros_like(valid)
    by, bx = int(0.05 * h), int(0.05 * w)
    scored[by:h - by, bx:w - bx] = True  # score.py's border
    scored &= valid

    def psnr(img, sel):
        e = ((img - gt) ** 2)[sel].mean()
        return round(10 * np.log10(255 ** 2 / max(e, 1e-12)), 2)

    row = {"burst": a.name}
    images = {}
    for who in ("plain", "erased"):
        img = images[who] = cv2.imread(b + "/" + who + ".png").astype(np.float64)
        s = json.loads(subprocess.run([sys.executable, a.bench + "/score.py", "image", b + "/" + who + ".png",
                                       "--burst", b], capture_output=True, text=True, check=True).stdout)
        # score.py's error pixels: |grey difference| > 20, grey = OpenCV's BGR2GRAY rounded to 8 bits
        grey = lambda im: cv2.cvtColor(im.astype(np.uint8), cv2.COLOR_BGR2GRAY).astype(np.float32)
        off = np.abs(grey(img) - grey(gt)) > 20
        row[who] = {"psnr": s["PSNR"], "pEPs": s["pEPs"], "mask_psnr": psnr(img, scored & mask),
                    "outside_psnr": psnr(img, scored & ~mask),
                    "mask_pEPs": round(100 * off[scored & mask].mean(), 4)}
    never = scored & (cv2.imread(b + "/coverage.png", cv2.IMREAD_UNCHANGED) == 0)
    row["never_covered"] = {"ceiling_psnr": psnr(ceiling(b, gt), never), "plain_psnr": psnr(images["plain"], never)}
    beyond = cv2.dilate(mask.astype(np.uint8), disk(SEAM_BAND)) == 0
    row["changed_beyond_seam"] = int((np.abs(images["erased"] - images["plain"]).max(axis=2)[beyond] > 0).sum())
    row["mask_share"] = round(float(mask.mean()), 4)
    report = json.load(open(b + "/erased.json"))
    row["erase_s"] = report["times_s"].get("erase")
    row["whole_s"] = a.seconds
    print(json.dumps(row))


def summary(a):
    rows = [json.loads(line) for line in open(a.rows)]
    print("%-28s %22s   %45s   %s   %s" % ("burst-seed-fraction-mask", "plain: PSNR / pEPs",
                                            "erased: PSNR / in mask / outside / pEPs / in mask",
                                            "beyond seam, erase s / whole s", "never covered: ceiling / plain"))
    for r in rows:
        p, e, n = r["plain"], r["erased"], r["never_covered"]
        print("%-28s %8.2f %8.3f%%   %8.2f %8.2f %8.2f %8.3f%% %8.3f%%   %d, %.3f / %.2f   %8.2f %8.2f" % (
            r["burst"], p["psnr"], p["pEPs"], e["psnr"], e["mask_psnr"], e["outside_psnr"], e["pEPs"], e["mask_pEPs"],
            r["changed_beyond_seam"], r["erase_s"], r["whole_s"], n["ceiling_psnr"], n["plain_psnr"]))
    for label, f, worst in [("erased PSNR in mask", lambda r: r["erased"]["mask_psnr"], min),
                            ("erased PSNR, whole", lambda r: r["erased"]["psnr"], min),
                            ("erased PSNR in mask - outside", lambda r: r["erased"]["mask_psnr"] - r["erased"]["outside_psnr"], min),
                            ("erased pEPs %", lambda r: r["erased"]["pEPs"], max),
                            ("erased pEPs in mask %", lambda r: r["erased"]["mask_pEPs"], max),
                            ("plain pEPs %", lambda r: r["plain"]["pEPs"], max),
                            ("pixels changed beyond the seam", lambda r: r["changed_beyond_seam"], max),
                            ("ceiling where never covered", lambda r: r["never_covered"]["ceiling_psnr"], min),
                            ("plain - ceiling, never covered",
                             lambda r: r["never_covered"]["plain_psnr"] - r["never_covered"]["ceiling_psnr"], min),
                            ("erase share of the command", lambda r: r["erase_s"] / r["whole_s"], max)]:
        v = [f(r) for r in rows]
        print("%-32s worst %8.3f   median %8.3f   (%d)" % (label, worst(v), statistics.median(v), len(v)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("mask")
    m.add_argument("burst")
    m.add_argument("--kind", choices=("painted", "coverage"), default="painted")
    m.add_argument("--dilation", type=int, default=8)
    s = sub.add_parser("score")
    s.add_argument("burst")
    s.add_argument("--name", required=True)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--bench", required=True)
    t = sub.add_parser("summary")
    t.add_argument("rows")
    a = p.parse_args()
    {"mask": make_mask, "score": score, "summary": summary}[a.what](a)


if __name__ == "__main__":
    main()
