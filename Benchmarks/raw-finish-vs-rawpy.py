#!/usr/bin/env python3
"""Our raw finish against LibRaw's (rawpy, AHD demosaic) on make_raw_burst.py's ground truth.

For each burst of a family (noise off, different bases, CFAs, curves and bit depths; made here
with ../shared/bench/make_raw_burst.py when absent), the reference frame f00.dng is finished
three ways into linear sRGB with the same white balance, colour matrix and exposure:
  * ours: `evanesco convert f00.dng x.tif --color-space linear-srgb --bit-depth 32`;
  * rawpy: LibRaw's postprocess, AHD, camera white balance, linear sRGB, 16 bits, the white level as
    written (adjust_maximum_thr 0: by default LibRaw takes the brightest sample as white), exposure shift
    2^BaselineExposure before the demosaic (as ours and the bench's finish apply it);
  * the bench's own finish (OpenCV bilinear, make_raw_burst.finish_mosaic) as a floor.
Each is then clipped and given gt.png's forward curve (the burst's gamma, then smoothstep) and
scored against gt.png by score.py's image metrics (8 bits, 5 % border). Prints JSON: per burst
and the worst and median difference ours - rawpy. Also times ours (whole command) and rawpy.

  Benchmarks/raw-finish-vs-rawpy.py [--family DIR] [--count 10] [--evanesco BIN] [--json FILE]
Run it with a Python that has numpy, OpenCV and rawpy (scripts/raw-venv.sh makes one).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import cv2
import numpy as np
import rawpy

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "bench"))
DATA = os.path.normpath(os.path.join(BENCH, "..", "data"))
sys.path.insert(0, BENCH)
import make_raw_burst as mrb  # noqa: E402
import score  # noqa: E402

# (base, CFA, curve, bits): ten real photos of different kinds.
FAMILY = [
    ("depth/pug-iphone13pro/pug.heic", "RGGB", "2.2", 12),
    ("stereo/aloe/aloeL.jpg", "BGGR", "srgb", 14),
    ("registration/graffiti/graf1.png", "GRBG", "2.2", 12),
    ("registration/aero/aero1.jpg", "GBRG", "srgb", 12),
    ("faces/samples/astronaut.png", "RGGB", "srgb", 14),
    ("bursts/hdrplus-tree/frame-000.jpg", "BGGR", "2.2", 12),
    ("bursts/lowlight-handheld/1.jpg", "GRBG", "srgb", 12),
    ("bursts/night-cars/in1.jpg", "GBRG", "2.2", 14),
    ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "RGGB", "2.2", 12),
    ("depth/truedepth-iphone/heic_face_data.heic", "BGGR", "srgb", 12),
]


def make(family, i, max_side):
    base, cfa, curve, bits = FAMILY[i]
    out = os.path.join(family, "b%02d" % i)
    if not os.path.isfile(os.path.join(out, "truth.json")):
        subprocess.run([sys.executable, os.path.join(BENCH, "make_raw_burst.py"), "--base", os.path.join(DATA, base),
                        "--out", out, "--frames", "2", "--seed", str(i), "--max-side", str(max_side), "--cfa", cfa,
                        "--gamma", curve, "--bits", str(bits), "--shot", "0", "--read", "0", "--objects", "0", "--force"],
                       check=True, stdout=subprocess.DEVNULL)
    return out


def to8(lin, curve):
    """Linear sRGB (RGB, float) -> gt.png's encoding, 8-bit BGR."""
    y = mrb.smoothstep(mrb.gamma_compress(np.clip(lin, 0, 1), curve))
    return np.rint(y[..., ::-1] * 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default=os.path.join(HERE, "..", ".build", "raw-finish-family"))
    ap.add_argument("--count", type=int, default=len(FAMILY))
    ap.add_argument("--max-side", type=int, default=1200)
    ap.add_argument("--evanesco", default=os.path.join(os.environ.get("EVANESCO_RELEASE_DIR", ""), "evanesco"))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for i in range(min(a.count, len(FAMILY))):
        burst = make(a.family, i, a.max_side)
        truth = json.load(open(os.path.join(burst, "truth.json")))
        curve = truth["camera"]["gamma"]
        dng = os.path.join(burst, "frames", "f00.dng")
        gt = score.read_8bit_bgr(os.path.join(burst, "gt.png"))
        ours_path = os.path.join(burst, "ours-linear.tif")
        t0 = time.perf_counter()
        subprocess.run([a.evanesco, "convert", dng, ours_path, "--color-space", "linear-srgb", "--bit-depth", "32",
                        "--force"], check=True, stdout=subprocess.DEVNULL)
        t_ours = time.perf_counter() - t0
        ours = cv2.imread(ours_path, cv2.IMREAD_UNCHANGED)[..., ::-1]
        t0 = time.perf_counter()
        with rawpy.imread(dng) as r:
            lib = r.postprocess(demosaic_algorithm=rawpy.DemosaicAlgorithm.AHD, use_camera_wb=True,
                                no_auto_bright=True, output_bps=16, gamma=(1, 1), output_color=rawpy.ColorSpace.sRGB,
                                user_flip=0, highlight_mode=rawpy.HighlightMode.Clip,
                                exp_shift=2.0 ** truth["camera"]["baseline_exposure_ev"], exp_preserve_highlights=0.0,
                                adjust_maximum_thr=0.0)
        t_rawpy = time.perf_counter() - t0
        lib = lib.astype(np.float32) / 65535
        raw = cv2.imread(os.path.join(burst, "gt_raw.tif"), cv2.IMREAD_UNCHANGED)
        cam = {k: np.asarray(v, np.float64) for k, v in truth["camera"].items() if k in ("gains_rgb", "camera_to_rgb")}
        cr = truth["camera_raw"]
        bilinear = mrb.finish_mosaic(raw, cr["black_level"], cr["white_level"], cr["cfa"], cam, curve)
        s_ours = score.score_images(to8(ours, curve), gt)
        s_lib = score.score_images(to8(lib, curve), gt)
        s_bil = score.score_images(np.rint(bilinear[..., ::-1] * 255).astype(np.uint8), gt)
        rows.append({"burst": FAMILY[i][0], "cfa": FAMILY[i][1], "curve": curve, "size": s_ours["size"],
                     "ours": {k: s_ours[k] for k in ("PSNR", "SSIM")}, "rawpy_ahd": {k: s_lib[k] for k in ("PSNR", "SSIM")},
                     "opencv_bilinear": {k: s_bil[k] for k in ("PSNR", "SSIM")},
                     "seconds": {"ours_command": round(t_ours, 3), "rawpy_read_and_postprocess": round(t_rawpy, 3)}})
        print("raw-finish: %-50s ours %.2f dB %.4f, rawpy AHD %.2f dB %.4f, bilinear %.2f dB" % (
            FAMILY[i][0], s_ours["PSNR"], s_ours["SSIM"], s_lib["PSNR"], s_lib["SSIM"], s_bil["PSNR"]), file=sys.stderr)
    d_psnr = [r["ours"]["PSNR"] - r["rawpy_ahd"]["PSNR"] for r in rows]
    d_ssim = [r["ours"]["SSIM"] - r["rawpy_ahd"]["SSIM"] for r in rows]
    out = {"bursts": rows, "psnr_ours_minus_rawpy": {"worst": round(min(d_psnr), 3), "median": round(float(np.median(d_psnr)), 3)},
           "ssim_ours_minus_rawpy": {"worst": round(min(d_ssim), 5), "median": round(float(np.median(d_ssim)), 5)}}
    text = json.dumps(out, indent=1)
    if a.json:
        open(a.json, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
