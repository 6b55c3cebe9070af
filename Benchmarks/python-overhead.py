#!/usr/bin/env python3
"""What calling Evanesco from Python costs over the library's own time, on a 12 MP portrait blur
(the issue's measure) and a 12 MP lens blur, a 20-frame 1 MP stack for scale.

Each call is timed in Python (wall) and split by the C interface itself (the report's
`interface_s`): `copy_in` (the caller's arrays read into the library's images: the one copy in),
`work` (the library's own time, what the same call from Swift costs), `copy_out` (the result
copied into memory handed to Python: the one copy out). What is left, wall - (copy_in + work +
copy_out), is ctypes and the numpy wrapping. Python's own allocations during the call are
measured with tracemalloc: no copy of an image is made on the Python side.

  Benchmarks/python-overhead.py [--repeat 9] [--scale 1] [--json FILE]
(--scale 0.1 runs it on 0.1 of each side: scripts/python-tests.sh does, so a renamed key fails CI)
Run it where `import evanesco` finds the package (scripts/python-tests.sh's venv, or
EVANESCO_LIBRARY=.build/release/libEvanescoC.so PYTHONPATH=python).
"""
import argparse
import json
import statistics
import time
import tracemalloc

import numpy as np

import evanesco


def photo_and_depth(width=4032, height=3024):
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    rgb = np.stack([128 + 100 * np.sin(x / 37), 128 + 100 * np.cos(y / 29), 128 + 90 * np.sin((x + y) / 53)], -1)
    photo = rgb.astype(np.uint8)
    dy, dx = np.mgrid[0:height // 4, 0:width // 4].astype(np.float32)
    metres = np.where((dx - width / 8) ** 2 + (dy - height / 8) ** 2 < (height / 10) ** 2, 1.0, 3.0 + dx / width)
    return photo, metres.astype(np.float32)


def measure(name, call, repeat):
    call()  # warm: first-use costs (thread pools, tables) are not the interface's
    rows = []
    for _ in range(repeat):
        start = time.perf_counter()
        image, report = call()
        wall = time.perf_counter() - start
        i = report["interface_s"]
        binding = wall - i["copy_in"] - i["work"] - i["copy_out"]
        rows.append({"wall": wall, **i, "binding": binding, "over_work_pct": 100 * (wall - i["work"]) / i["work"],
                     "copies_pct": 100 * (i["copy_in"] + i["copy_out"]) / i["work"],
                     "binding_pct": 100 * binding / i["work"], "result_mb": image.nbytes / 2**20})
        del image
    # Python's own allocations during one more call (tracemalloc slows allocation: not timed).
    tracemalloc.start()
    image, _ = call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del image
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    med["python_peak_mb"] = peak / 2**20
    med["calls"] = repeat
    print(f"{name}: wall {med['wall']:.3f} s, library {med['work']:.3f} s, copy in {med['copy_in'] * 1e3:.1f} ms, "
          f"copy out {med['copy_out'] * 1e3:.1f} ms, ctypes+numpy {med['binding'] * 1e3:.2f} ms (medians of "
          f"{repeat}): {med['over_work_pct']:+.2f} % over the library ({med['copies_pct']:.2f} % copies, "
          f"{med['binding_pct']:.2f} % binding); Python allocated {med['python_peak_mb']:.2f} MB "
          f"for a {med['result_mb']:.0f} MB result")
    return med


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    photo, metres = photo_and_depth(int(4032 * args.scale) // 4 * 4, int(3024 * args.scale) // 4 * 4)
    rng = np.random.default_rng(1)
    base = rng.integers(0, 255, size=(int(768 * args.scale), int(1024 * args.scale), 3), dtype=np.uint8)
    frames = [np.roll(base, (k % 3, k % 2), axis=(0, 1)) for k in range(20)]
    results = {
        "portrait_blur_12mp": measure(
            "portrait blur 12 MP", lambda: evanesco.portrait(photo, metres, depth_kind="depth", effect="blur",
                                                             focus_distance=1), args.repeat),
        "portrait_lens_12mp": measure(
            "portrait lens 12 MP", lambda: evanesco.portrait(photo, metres, depth_kind="depth", effect="lens",
                                                             focus_distance=1), args.repeat),
        "stack_20x1mp": measure("stack 20 x 0.8 MP", lambda: evanesco.stack(frames), args.repeat),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
