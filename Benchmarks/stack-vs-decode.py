#!/usr/bin/env python3
"""`evanesco stack` against the floor of any stacker: OpenCV decoding the same JPEGs on 2 threads
(issue 50's measure: 20 frames of pug-handheld at 12 MP within 1.6x of it). The two are
alternated ROUNDS times in one run; prints the medians and the ratio as JSON.

  Benchmarks/stack-vs-decode.py [--burst DIR] [--rounds 5] [--threads 2] [--evanesco BIN] [-- STACK OPTIONS...]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import cv2

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data"))


def decode_all(paths, threads=2):
    cv2.setNumThreads(1)  # one decode per thread, as a stacker's decode pool would
    with ThreadPoolExecutor(threads) as pool:
        for image in pool.map(lambda p: cv2.imread(p, cv2.IMREAD_COLOR), paths):
            assert image is not None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", default=os.path.join(SHARED, "bursts", "synthetic", "pug-handheld", "frames"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--evanesco")
    parser.add_argument("--threads", type=int, default=2, help="decode threads (default 2)")
    parser.add_argument("stack_options", nargs="*")
    args = parser.parse_args()
    binary = args.evanesco or os.path.join(
        subprocess.run([os.path.join(HERE, "..", "scripts", "build-release.sh"), "evanesco"], check=True,
                       capture_output=True, text=True).stdout.strip(), "evanesco")
    paths = sorted(glob.glob(os.path.join(args.burst, "*.jp*g")))
    if not paths:
        sys.exit(f"stack-vs-decode: no JPEG in {args.burst}")
    ours, decode = [], []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.rounds):
            start = time.perf_counter()
            decode_all(paths, args.threads)
            decode.append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run([binary, "stack", *paths, "-o", os.path.join(out, "x.jpg"), "--force", "--quiet",
                            *args.stack_options], check=True, capture_output=True)
            ours.append(time.perf_counter() - start)
    result = {"burst": args.burst, "frames": len(paths), "rounds": args.rounds, "decode_threads": args.threads,
              "ours_s": statistics.median(ours), "opencv_decode_s": statistics.median(decode)}
    result["ratio"] = result["ours_s"] / result["opencv_decode_s"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
