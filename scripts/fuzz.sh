#!/usr/bin/env bash
# Runs one libFuzzer target (FuzzTesting/) under AddressSanitizer for SECONDS, from a seed corpus
# of real files (../shared/data, when present) and files made here; a finding is copied into
# Tests/EvanescoFuzzRegressionTests/Regressions/TARGET/, which `swift test` replays.
#   scripts/fuzz.sh TARGET SECONDS        e.g. scripts/fuzz.sh FuzzXMP 120
#   scripts/fuzz.sh list                  the targets
# Prints the executions done and exits non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
targets="FuzzJPEG FuzzPNG FuzzTIFF FuzzPFM FuzzEXIF FuzzXMP FuzzDepthJPEG FuzzHEIF FuzzCascade FuzzRawFrames FuzzHomographies FuzzDNG"
if [ "${1:-}" = list ]; then echo "$targets"; exit 0; fi
target=${1:?usage: fuzz.sh TARGET SECONDS (fuzz.sh list)}; seconds=${2:?usage: fuzz.sh TARGET SECONDS}
case " $targets " in *" $target "*) ;; *) echo "fuzz.sh: no target $target; one of: $targets" >&2; exit 2;; esac
shared=${EVANESCO_SHARED_DATA:-$root/../shared/data}
[ -d "$shared" ] || echo "fuzz.sh: $shared is absent: seeding from self-made files only" >&2

# --sanitize=fuzzer instruments the fuzz target's own module only: the library it calls (the
# parsers under test) needs the coverage flags too, or libFuzzer mutates blind (-Xswiftc for the
# Swift modules and the C the Swift importer compiles, -Xcc for the C targets).
(cd FuzzTesting && swift build -c release --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --product "$target" >/dev/null)
bin=$root/FuzzTesting/.build/release/$target
evanesco=$(scripts/build-release.sh evanesco)/evanesco
work=$root/.build/fuzz/$target
corpus=$work/corpus; seeds=$work/seeds; findings=$work/findings
rm -rf "$findings"   # only this run's findings are reported (kept ones live in the regressions folder)
mkdir -p "$corpus" "$seeds" "$findings"

# Seeds: real files where they exist, and small files made by the release binary.
python3 - "$shared" "$seeds" "$evanesco" "$target" <<'PY'
import glob, os, shutil, struct, subprocess, sys, zlib, json
shared, seeds, evanesco, target = sys.argv[1:5]
def real(*patterns):
    out = []
    for p in patterns: out += sorted(glob.glob(os.path.join(shared, p), recursive=True))
    return out
def put(name, data): open(os.path.join(seeds, name), "wb").write(data)
def png(w, h, ch=3):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 13 + c * 50) % 256 for x in range(w) for c in range(ch)) for y in range(h))
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, {1: 0, 3: 2, 4: 6}[ch], 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
tmp = os.path.join(seeds, "small.png"); open(tmp, "wb").write(png(24, 16))
def convert(ext, *extra):
    out = os.path.join(seeds, "small-" + "-".join(extra).replace("-", "") + "." + ext)
    subprocess.run([evanesco, "convert", tmp, out, "--force", *extra], capture_output=True)
    return out
files = []
if target in ("FuzzJPEG",):
    files = real("depth/**/*.jpg", "bursts/lowlight-handheld/1.jpg"); convert("jpg"); convert("jpg", "--quality", "100")
elif target == "FuzzDepthJPEG":
    files = real("depth/**/*.jpg")
elif target == "FuzzHEIF":
    files = real("depth/**/*.heic")
elif target == "FuzzPNG":
    files = real("faces/samples/astronaut.png", "depth/**/*.png", "rgbd/**/*disparity8.png"); put("gray.png", png(9, 7, 1)); put("rgba.png", png(9, 7, 4))
elif target in ("FuzzTIFF", "FuzzEXIF"):
    convert("tif"); convert("tif", "--bit-depth", "16"); convert("tif", "--bit-depth", "32")
    files = real("depth/**/*.tif", "depth/**/*.tiff")
elif target == "FuzzPFM":
    files = real("**/*.pfm"); put("tiny.pfm", b"Pf\n3 2\n-1.0\n" + struct.pack("<6f", 1, 2, 3, 4, 5, float("inf")))
elif target == "FuzzXMP":
    for f in real("depth/**/*.jpg", "depth/**/*.heic"):
        b = open(f, "rb").read(); i = 0; k = 0
        while True:
            a = b.find(b"<x:xmpmeta", i)
            if a < 0: break
            e = b.find(b"</x:xmpmeta>", a)
            if e < 0: break
            put(f"{os.path.basename(f)}-{k}.xml", b[a:e + 12]); k += 1; i = e
elif target == "FuzzCascade":
    files = real("faces/cascades/*.xml") + sorted(glob.glob("/usr/share/opencv4/*cascades/*frontalface*.xml"))
    # Small cascades too: the real ones are ~1 MB and parse slowly, so most executions use these.
    for ft, feat, nodes in [("HAAR", "<_><rects><_>0 0 2 4 -1.</_><_>2 0 2 4 1.</_></rects><tilted>0</tilted></_>", "0 -1 0 0.01"),
                            ("LBP", "<_><rect>0 0 1 1</rect></_>", "0 -1 0 -1 -1 -1 -1 -1 -1 -1")]:
        put(f"tiny-{ft}.xml", f"""<?xml version="1.0"?><opencv_storage><cascade><stageType>BOOST</stageType><featureType>{ft}</featureType>
<height>4</height><width>4</width><stages><_><maxWeakCount>1</maxWeakCount><stageThreshold>-0.5</stageThreshold>
<weakClassifiers><_><internalNodes>{nodes}</internalNodes><leafValues>-1 1</leafValues></_></weakClassifiers></_></stages>
<features>{feat}</features></cascade></opencv_storage>""".encode())
elif target == "FuzzRawFrames":
    put("rgb.raw", bytes([3, 2, 0]) + bytes(range(256))[:36]); put("g16.raw", bytes([4, 4, 2]) + bytes(64))
elif target == "FuzzDNG":
    # Small DNGs of each CFA from the bench's raw burst maker (our writer's, rewritten by convert).
    maker = os.path.join(shared, "..", "bench", "make_raw_burst.py")
    base = os.path.join(shared, "faces", "samples", "astronaut.png")
    for i, cfa in enumerate(["RGGB", "GBRG"]):
        out = os.path.join(seeds, "burst-" + cfa)
        if os.path.exists(maker) and os.path.exists(base):
            subprocess.run([sys.executable, maker, "--base", base, "--size", "48x32", "--frames", "2", "--cfa", cfa,
                            "--out", out, "--force"], capture_output=True)
            dng = os.path.join(out, "frames", "f00.dng")
            if os.path.exists(dng):
                shutil.copy(dng, os.path.join(seeds, cfa + ".dng"))
                subprocess.run([evanesco, "convert", dng, os.path.join(seeds, cfa + "-ours.dng"), "--force"], capture_output=True)
            shutil.rmtree(out, ignore_errors=True)
    if not glob.glob(os.path.join(seeds, "*.dng")): print("fuzz.sh: no DNG seeds (../shared/bench absent)", file=sys.stderr)
elif target == "FuzzHomographies":
    files = real("bursts/synthetic/*/truth.json")
    put("report.json", json.dumps({"frames": [{"index": 0, "homography": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]},
                                              {"index": 1, "homography": [[1, 0, 2.5], [0, 1, -1], [0, 0, 1]]}]}).encode())
for f in files: shutil.copy(f, os.path.join(seeds, os.path.basename(f)))
os.remove(tmp) if target not in ("FuzzPNG",) else None
PY

case $target in FuzzDepthJPEG|FuzzHEIF|FuzzJPEG) maxlen=2000000;; *) maxlen=65536;; esac
log=$work/run.log
set +e
"$bin" "$corpus" "$seeds" -max_total_time="$seconds" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1
status=$?
set -e
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
# A binary without coverage counters in the library fuzzes blind: refuse to count such a run
# (the target's own module alone has a few hundred counters; with the library, tens of thousands).
counters=$(grep -o 'Loaded 1 modules *([0-9]* inline 8-bit counters' "$log" | grep -o '[0-9]* inline' | grep -o '[0-9]*' || echo 0)
if [ "${counters:-0}" -lt 5000 ]; then
    echo "fuzz.sh: $target ran with ${counters:-no} coverage counters, the library uninstrumented (rm -rf FuzzTesting/.build and rebuild); not counted" >&2
    exit 3
fi
echo "fuzz.sh: $target: ${runs:-?} executions in $seconds s, exit $status (log: $log)"
if ls "$findings"/* >/dev/null 2>&1; then
    keep=$root/Tests/EvanescoFuzzRegressionTests/Regressions/$target
    mkdir -p "$keep"; cp "$findings"/* "$keep"/
    echo "fuzz.sh: findings copied to $keep:" >&2; ls "$keep" >&2
    grep -m3 -E "ERROR|SUMMARY|Fatal" "$log" >&2 || true
    exit 1
fi
exit $status
