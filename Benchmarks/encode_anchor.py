#!/usr/bin/env python3
"""The anchor side of `EvanescoBenchmarks encode`: cv2.imwrite on the same pixels, timed here.

A line protocol on stdin/stdout, so the Swift benchmark can alternate its own writes with
OpenCV's in one run without counting Python's start-up or the pixels' transfer:
  load RAW WIDTH HEIGHT CHANNELS BITS   -> pixels from a raw file (RGB order, host byte order)
  write OUT FORMAT [LEVEL]              -> cv2.imwrite(OUT); replies {"seconds": s, "bytes": n}
  check OUT                             -> cv2.imread(OUT) equals the loaded pixels: {"same": b}
FORMAT is png, tif or jpg; LEVEL is IMWRITE_PNG_COMPRESSION (absent: OpenCV's default) or the
JPEG quality. Needs numpy and OpenCV (../shared/bench/setup.sh installs them in its venv, which
this script re-runs itself in when the current python3 lacks them).
"""
import json
import os
import sys
import time

try:
    import cv2
    import numpy as np
except ImportError:
    venv = os.environ.get("EVANESCO_BENCH_VENV", os.path.expanduser("~/.local/share/evanesco-bench/venv"))
    python = os.path.join(venv, "bin", "python3")
    if os.path.exists(python) and os.path.realpath(sys.executable) != os.path.realpath(python):
        os.execv(python, [python] + sys.argv)
    sys.exit("encode_anchor.py: numpy and OpenCV are missing; run ../shared/bench/setup.sh")


def main():
    pixels = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "load":
            raw, width, height, channels, bits = words[1], int(words[2]), int(words[3]), int(words[4]), int(words[5])
            dtype = np.uint16 if bits == 16 else np.uint8
            pixels = np.fromfile(raw, dtype=dtype).reshape(height, width, channels)
            if channels == 3:
                pixels = np.ascontiguousarray(pixels[:, :, ::-1])  # OpenCV keeps BGR
            reply = {"loaded": list(pixels.shape)}
        elif words[0] == "write":
            out, fmt = words[1], words[2]
            params = []
            if len(words) > 3:
                key = cv2.IMWRITE_PNG_COMPRESSION if fmt == "png" else cv2.IMWRITE_JPEG_QUALITY
                params = [key, int(words[3])]
            start = time.perf_counter()
            ok = cv2.imwrite(out, pixels, params)
            seconds = time.perf_counter() - start
            reply = {"seconds": seconds, "bytes": os.path.getsize(out) if ok else -1}
        elif words[0] == "check":
            back = cv2.imread(words[1], cv2.IMREAD_UNCHANGED)
            reply = {"same": back is not None and back.shape == pixels.shape and bool((back == pixels).all())}
        else:
            reply = {"error": "unknown command " + words[0]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
