#!/usr/bin/env python3
"""Hostile and odd inputs against the release binary, one class per row of the README's
bad-input table. Each case must end with exit status 0 (handled) or 1/64 (a clear one-line
error), within its time limit, under 2 GB of memory, leaving no stray file and losing nothing.
   scripts/bad-inputs.py [--binary PATH] [--shared DIR] [--markdown]
Cases that need ../shared/data (real photos) are skipped, and said so, when it is absent."""
import argparse, base64, hashlib, os, random, shutil, signal, struct, subprocess, sys, tempfile, time, zlib

ap = argparse.ArgumentParser()
ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "evanesco"))
ap.add_argument("--shared", default=os.environ.get("EVANESCO_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")))
ap.add_argument("--markdown", action="store_true")
args = ap.parse_args()
EVANESCO = os.path.abspath(args.binary)
SHARED = os.path.abspath(args.shared)
work = tempfile.mkdtemp(prefix="evanesco-bad-")
os.chdir(work)
results = {}   # class -> [tried, clean, failures]

def png(path, w, h, ch=3, fill=None, bits=8):
    rows = []
    for y in range(h):
        if fill is None:
            row = bytes((x * 7 + y * 13 + c * 50) % 256 for x in range(w) for c in range(ch))
        else:
            row = bytes([fill]) * (w * ch * (bits // 8))
        rows.append(b"\0" + row)
    raw = b"".join(rows)
    color = {1: 0, 3: 2, 4: 6}[ch]
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    if path: open(path, "wb").write(data)
    return data

def run(cls, argv, timeout=60, expect=(0, 1, 64), must_exist=(), must_not_exist=(), unchanged=(), stdin=None):
    """Runs one case and records whether it was handled cleanly."""
    digests = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in unchanged if os.path.exists(p)}
    before = set(os.listdir("."))
    start = time.time()
    p = subprocess.Popen([EVANESCO] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, start_new_session=True)
    problem = None
    try:
        out, err = p.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL); out, err = p.communicate(); problem = f"hang (> {timeout} s)"
    rusage = os.wait4(p.pid, os.WNOHANG)[2] if False else None
    rc = p.returncode
    lines = [l for l in err.decode(errors="replace").splitlines() if "error" in l.lower()]
    if problem is None and rc not in expect: problem = f"exit {rc}: {err.decode(errors='replace')[-300:]!r}"
    if problem is None and rc != 0 and not lines: problem = f"exit {rc} without an error line"
    if problem is None and len(lines) > 1: problem = f"{len(lines)} error lines: {lines[:2]}"
    for f in must_exist:
        if problem is None and not os.path.exists(f): problem = f"{f} missing"
    for f in must_not_exist:
        if problem is None and os.path.exists(f): problem = f"{f} left behind"
    for f, d in digests.items():
        if problem is None and hashlib.sha256(open(f, "rb").read()).hexdigest() != d: problem = f"{f} was modified"
    stray = [f for f in set(os.listdir(".")) - before if f.startswith(".") or f.endswith(".tmp")]
    if problem is None and stray: problem = f"left temporary files {stray}"
    r = results.setdefault(cls, [0, 0, []])
    r[0] += 1
    if problem: r[2].append(f"{' '.join(argv)[:120]}: {problem}")
    else: r[1] += 1
    return rc, err.decode(errors="replace")

def maxrss_run(cls, argv, limit_mb=512, timeout=60):
    """Runs a case and records it as failed when the process's peak memory passes limit_mb."""
    p = subprocess.Popen([EVANESCO] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    t0 = time.time(); problem = None
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid: break
        if time.time() - t0 > timeout:
            os.killpg(p.pid, signal.SIGKILL); pid, status, ru = os.wait4(p.pid, 0); problem = "hang"; break
        time.sleep(0.02)
    rc = os.waitstatus_to_exitcode(status)
    peak = ru.ru_maxrss // 1024
    if problem is None and rc not in (0, 1): problem = f"exit {rc}"
    if problem is None and peak > limit_mb: problem = f"peak memory {peak} MB"
    r = results.setdefault(cls, [0, 0, []]); r[0] += 1
    if problem: r[2].append(f"{' '.join(argv)[:100]}: {problem}")
    else: r[1] += 1

have_shared = os.path.isdir(SHARED)
def shared(rel): return os.path.join(SHARED, rel)

# --- Numbers from flags: NaN, infinity, out of range -------------------------------------------
png("photo.png", 64, 48)
for opt in ["--quality", "--bit-depth"]:
    for v in ["nan", "inf", "0", "1000", "-5", "1e309"]:
        run("CLI values (NaN, infinity, out of range)", ["convert", "photo.png", f"o-{opt[2:]}-{v}.jpg", opt, v], must_not_exist=[f"o-{opt[2:]}-{v}.jpg"] if v not in ("0",) else [])
for opt in ["--slope", "--width", "--radius", "--focus", "--levels"]:
    for v in ["nan", "inf", "1e40", "-1"]:
        if have_shared:
            run("CLI values (NaN, infinity, out of range)", ["portrait", shared("depth/pug-iphone13pro/pug.heic"), "-o", "p.jpg", "--force", opt, v])
for opt in ["--aperture", "--f-number", "--highlights", "--blade-rotation", "--blades"]:
    for v in ["nan", "inf", "1e40", "-1", "0", "2"]:
        if have_shared:
            run("CLI values (NaN, infinity, out of range)", ["portrait", shared("depth/pug-iphone13pro/pug.heic"), "-o", "p.jpg", "--force", "--effect", "lens", opt, v])
for v in ["nan", "1.0001", "0", "inf", "5"]:
    run("CLI values (NaN, infinity, out of range)", ["faces", "photo.png", "--scale-factor", v], timeout=20)
for v in ["nan,1", "99999999,99999999", "-1,-1", "1e300,0", "inf,inf"]:
    run("CLI values (NaN, infinity, out of range)", ["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", "disparity8:0,2", "--subject", v, "-o", "bd.jpg", "--force"])
for v in ["disparity8:nan,2", "disparity8:2,1", "disparity8:0,inf", "mm17"]:
    run("CLI values (NaN, infinity, out of range)", ["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", v, "-o", "bd.jpg", "--force"])

# --- Normal commands on every sample photo ---------------------------------------------------------
if have_shared:
    import glob as _g
    photos = sorted(_g.glob(shared("depth/**/*.heic"), recursive=True) + _g.glob(shared("depth/**/*.jpg"), recursive=True))
    for ph in photos:
        for cmd in (["depth", "extract", ph, "-o", "x.png", "--normalize", "--force"], ["depth", "extract", ph, "-o", "x.pfm", "--force"],
                    ["depth", "extract", ph, "-o", "x.tif", "--as", "depth", "--force"], ["depth", "info", ph, "--json"],
                    ["portrait", ph, "-o", "x.jpg", "--effect", "blur", "--force"], ["portrait", ph, "-o", "x.jpg", "--effect", "mask", "--focus-point", "0.5,0.5", "--force"],
                    ["portrait", ph, "-o", "x.jpg", "--effect", "lens", "--focus-point", "0.5,0.5", "--blades", "7", "--cat-eye", "--force"],
                    ["portrait", ph, "-o", "x.jpg", "--effect", "lens", "--f-number", "4", "--force"]):
            run("Normal commands on every sample photo", cmd, timeout=120)

# --- Tiny and odd frames -----------------------------------------------------------------------
for (w, h) in [(1, 1), (2, 1), (1, 2), (3, 3), (15, 15), (16, 16), (4000, 1), (1, 4000)]:
    names = []
    for k in range(3):
        n = f"t{w}x{h}_{k}.png"; png(n, w, h, fill=None if w * h > 4 else 40 * k); names.append(n)
    for align in ["auto", "homography", "translation", "none", "local"]:
        run("Tiny and degenerate frames", ["stack", *names, "-o", f"s{w}x{h}.png", "--force", "--align", align, "--quiet"], timeout=60)
    # Through the temporary file of decoded frames (a one-megabyte limit), kept here: nothing may be left in ".".
    for align in ["auto", "none"]:
        run("Tiny and degenerate frames", ["stack", *names, "-o", f"s{w}x{h}.png", "--force", "--align", align, "--quiet",
                                           "--memory-limit", "1", "--spill-dir", "."], timeout=60)
open("junk-frame.png", "wb").write(b"\x89PNG\r\n\x1a\n" + os.urandom(200))
run("Tiny and degenerate frames", ["stack", "t16x16_0.png", "junk-frame.png", "t16x16_1.png", "t16x16_2.png", "-o", "sj.png", "--force",
                                   "--memory-limit", "1", "--spill-dir", "."], expect=(0,), must_exist=["sj.png"], unchanged=["junk-frame.png"])
for v in ["-1", "nan", "99999999999", "16777217"]:
    run("CLI values (NaN, infinity, out of range)", ["stack", "t16x16_0.png", "t16x16_1.png", "-o", "sm.png", "--memory-limit", v], expect=(64,), must_not_exist=["sm.png"])
run("CLI values (NaN, infinity, out of range)", ["stack", "t16x16_0.png", "t16x16_1.png", "-o", "sm.png", "--spill-dir", "no-such-dir"], expect=(64,), must_not_exist=["sm.png"])

# --- Streams that do not match ----------------------------------------------------------------------
png("tall.png", 16, 200); png("wide.png", 300, 20)
for depth in ["tall.png", "wide.png"]:
    run("Streams that do not match", ["backdrop", "--color", "photo.png", "--depth", depth, "--depth-format", "disparity8:0,2",
                                      "--subject", "nearest", "-o", "mm.jpg", "--force"], expect=(1,), must_not_exist=["mm.jpg"])
open("raw.bin", "wb").write(os.urandom(1000))
run("Streams that do not match", ["backdrop", "--color", "-", "--size", "64x48", "--depth", "photo.png", "--depth-format",
                                  "disparity8:0,2", "--subject", "nearest", "-o", "mm-dir"], stdin=open("raw.bin", "rb").read(), expect=(1,))
open("fake.mp4", "wb").write(os.urandom(100))
run("Streams that do not match", ["stack", "fake.mp4", "-o", "fs.png"], expect=(1,), must_not_exist=["fs.png"])
# A real clip through the temporary file of frames (a one-megabyte limit, the file kept here:
# nothing may be left in "."), asking for more frames than it has; and a clip cut short, whose
# header counts frames that are not there.
subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "3",
                "-pix_fmt", "yuv420p", "clip.mp4"], check=True)
for frames in ["8", "500"]:
    run("Streams that do not match", ["stack", "clip.mp4", "-o", f"sv{frames}.png", "--frames", frames, "--memory-limit", "1",
                                      "--spill-dir", ".", "--quiet"], expect=(0,), must_exist=[f"sv{frames}.png"], unchanged=["clip.mp4"])
clip = open("clip.mp4", "rb").read()
open("cut.mp4", "wb").write(clip[: len(clip) * 2 // 3])
run("Streams that do not match", ["stack", "cut.mp4", "-o", "sc.png", "--frames", "20", "--memory-limit", "1", "--spill-dir", ".", "--quiet"],
    unchanged=["cut.mp4"])
run("Streams that do not match", ["backdrop", "--color", "fake.mp4", "--depth", "fake.mp4", "-o", "fo.mp4"], expect=(1,), must_not_exist=["fo.mp4"])

# --- Truncated, damaged and lying headers -------------------------------------------------------
good_png = png("g.png", 200, 150)
subprocess.run([EVANESCO, "convert", "g.png", "g.jpg", "--force"], capture_output=True)
subprocess.run([EVANESCO, "convert", "g.png", "g.tif", "--force"], capture_output=True)
good_jpg = open("g.jpg", "rb").read(); good_tif = open("g.tif", "rb").read()
for name, data in [("png", good_png), ("jpg", good_jpg), ("tif", good_tif)]:
    for cut in [0, 1, 8, 16, 24, 33, 100, len(data) // 2, len(data) - 1]:
        open(f"cut.{name}", "wb").write(data[:cut])
        run("Truncated files", ["convert", f"cut.{name}", "cut-out.png", "--force"], must_not_exist=[])
        if os.path.exists("cut-out.png"): os.remove("cut-out.png")
# Lying sizes: a JPEG whose SOF claims 20000x20000, a PNG IHDR, a TIFF IFD.
def patch_sof(data, w, h):
    b = bytearray(data); i = 2
    while i < len(b):
        m = b[i + 1]; L = b[i + 2] << 8 | b[i + 3]
        if m in (0xC0, 0xC1, 0xC2): struct.pack_into(">HH", b, i + 5, h, w); break
        i += 2 + L
    return bytes(b)
open("liar.jpg", "wb").write(patch_sof(good_jpg, 20000, 20000)[:3000])
maxrss_run("Sizes that lie (memory)", ["convert", "liar.jpg", "liar-out.png", "--force"])
b = bytearray(good_png); struct.pack_into(">II", b, 16, 20000, 20000); b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])) & 0xffffffff)
open("liar.png", "wb").write(bytes(b))
maxrss_run("Sizes that lie (memory)", ["convert", "liar.png", "liar-out2.png", "--force"])
def patch_tiff(data, w, h):
    b = bytearray(data); le = b[:2] == b"II"; e = "<" if le else ">"
    ifd = struct.unpack_from(e + "I", b, 4)[0]; n = struct.unpack_from(e + "H", b, ifd)[0]
    for k in range(n):
        at = ifd + 2 + 12 * k; tag, typ = struct.unpack_from(e + "HH", b, at)
        if tag in (256, 257):
            v = w if tag == 256 else h
            if typ == 3: struct.pack_into(e + "H", b, at + 8, v)
            else: struct.pack_into(e + "I", b, at + 8, v)
    return bytes(b)
open("liar.tif", "wb").write(patch_tiff(good_tif, 20000, 20000)[:20000])
# A TIFF whose first IFD (at the start) declares 20000x20000 uncompressed RGB, strips past the end.
ifd = [(256, 4, 1, 20000), (257, 4, 1, 20000), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 2), (273, 4, 1, 4096),
       (277, 3, 1, 3), (278, 4, 1, 20000), (279, 4, 1, 20000 * 20000 * 3)]
t = b"II*\0" + struct.pack("<I", 8) + struct.pack("<H", len(ifd)) + b"".join(struct.pack("<HHII", *e) for e in ifd) + struct.pack("<I", 0)
open("liar2.tif", "wb").write(t + bytes(20000 - len(t)))
maxrss_run("Sizes that lie (memory)", ["convert", "liar2.tif", "liar-out4.png", "--force"])
maxrss_run("Sizes that lie (memory)", ["convert", "liar.tif", "liar-out3.png", "--force"])
for size in [(65535, 65535), (1, 400_000_001), (0, 10)]:
    b = bytearray(good_png); struct.pack_into(">II", b, 16, *size); b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])) & 0xffffffff)
    open("big.png", "wb").write(bytes(b))
    maxrss_run("Sizes that lie (memory)", ["info", "big.png"])
    maxrss_run("Sizes that lie (memory)", ["convert", "big.png", "big-out.png", "--force"])

if have_shared:
    # HEIC items whose ispe boxes claim 200000x200000 (libheif's own limits refuse them).
    d = bytearray(open(shared("depth/pug-iphone13pro/pug.heic"), "rb").read()); i = 0
    while (i := d.find(b"ispe", i)) >= 0: struct.pack_into(">II", d, i + 8, 200000, 200000); i += 4
    open("huge.heic", "wb").write(bytes(d))
    for cmd in (["info", "huge.heic"], ["convert", "huge.heic", "h.png", "--force"], ["depth", "info", "huge.heic"]):
        run("Sizes that lie (memory)", cmd)
        maxrss_run("Sizes that lie (memory)", cmd)

# --- Random mutation of real and self-made files -------------------------------------------------
rng = random.Random(7)
seeds = [("g.png", good_png), ("g.jpg", good_jpg), ("g.tif", good_tif)]
if have_shared:
    for rel in ["depth/truedepth-iphone/jpeg_depth_data.jpg", "depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", "depth/pug-iphone13pro/pug.heic"]:
        seeds.append((os.path.basename(rel), open(shared(rel), "rb").read()))
for name, data in seeds:
    for k in range(25):
        b = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            at = rng.randrange(min(len(b), 4096)) if rng.random() < 0.7 else rng.randrange(len(b))
            b[at] = rng.randrange(256)
        ext = os.path.splitext(name)[1]
        open("m" + ext, "wb").write(bytes(b))
        run("Mutated files (info, depth info, convert)", ["info", "m" + ext], timeout=30)
        run("Mutated files (info, depth info, convert)", ["depth", "info", "m" + ext], timeout=30)
        run("Mutated files (info, depth info, convert)", ["convert", "m" + ext, "m-out.png", "--force"], timeout=60)

# --- Hostile XMP numbers and containers (self-made GDepth and Dynamic Depth JPEGs) -----------------
def app1_xmp(xml):
    payload = b"http://ns.adobe.com/xap/1.0/\0" + xml.encode()
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
def with_xmp(jpeg, xml):
    return jpeg[:2] + app1_xmp(xml) + jpeg[2:]
depth_png = png(None, 50, 37, ch=1)
def gdepth(fx="0.5", fy="0.5", fd="10", near="1", far="10", data=None):
    d = base64.b64encode(depth_png if data is None else data).decode()
    return ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            '<rdf:Description xmlns:GDepth="http://ns.google.com/photos/1.0/depthmap/" xmlns:GFocus="http://ns.google.com/photos/1.0/focus/" '
            f'GDepth:Format="RangeInverse" GDepth:Near="{near}" GDepth:Far="{far}" GDepth:Mime="image/png" GFocus:FocalPointX="{fx}" '
            f'GFocus:FocalPointY="{fy}" GFocus:FocalDistance="{fd}" GDepth:Data="{d}"/></rdf:RDF></x:xmpmeta>')
for kw in [dict(fx="-1.0e+300"), dict(fx="nan"), dict(fy="inf"), dict(fd="nan"), dict(fd="-0"), dict(near="nan"), dict(far="inf"),
           dict(near="0"), dict(near="10", far="1"), dict(near="1e308", far="1e-308"), dict(data=b"not a png")]:
    open("gd.jpg", "wb").write(with_xmp(good_jpg, gdepth(**kw)))
    for cmd in (["depth", "info", "gd.jpg"], ["depth", "extract", "gd.jpg", "-o", "gd.png", "--force"],
                ["portrait", "gd.jpg", "-o", "gdp.jpg", "--force", "--effect", "blur"], ["portrait", "gd.jpg", "-o", "gdp.jpg", "--force", "--effect", "lens"]):
        run("Numbers from files (XMP, GFocus, ranges)", cmd)
def dd(lengths):
    items = "".join(f'<rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic="{s}" Item:Mime="image/jpeg" Item:Length="{n}"/></rdf:li>'
                    for s, n in zip(["Primary", "Depth", "Depth"], ["0"] + lengths))
    return ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            '<rdf:Description xmlns:Container="http://ns.google.com/photos/dd/1.0/container/" xmlns:Item="http://ns.google.com/photos/dd/1.0/item/">'
            f'<Container:Directory><rdf:Seq>{items}</rdf:Seq></Container:Directory></rdf:Description></rdf:RDF></x:xmpmeta>')
for lengths in [["9223372036854775807", "9223372036854775807"], ["-5", "10"], ["nan", "1"], ["1e30", "1"], ["99999999999", "1"], ["10", "abc"]]:
    open("dd.jpg", "wb").write(with_xmp(good_jpg, dd(lengths)) + b"\0" * 64)
    run("Numbers from files (XMP, GFocus, ranges)", ["depth", "info", "dd.jpg"])
# A GDepth map far larger than its photo (a 20000x20000 PNG of zeros is ~400 KB compressed).
huge = zlib.compress(b"\0" * (20001 * 1000), 9)
big_map = b"\x89PNG\r\n\x1a\n"
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
big_map += chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)) + chunk(b"IDAT", huge) + chunk(b"IEND", b"")
open("gdbig.jpg", "wb").write(with_xmp(good_jpg, gdepth(data=big_map[:40000])))
maxrss_run("Sizes that lie (memory)", ["portrait", "gdbig.jpg", "-o", "gdbig-out.jpg", "--force"])

# --- Hostile cascades --------------------------------------------------------------------------
def cascade(nodes="0 -1 0 0.01", leaves="-1 1", rect="0 0 2 4 -1.", rect2="2 0 2 4 1.", w="4", h="4", thr="-0.5"):
    return f"""<?xml version="1.0"?><opencv_storage><cascade><stageType>BOOST</stageType><featureType>HAAR</featureType>
<height>{h}</height><width>{w}</width><stages><_><maxWeakCount>1</maxWeakCount><stageThreshold>{thr}</stageThreshold>
<weakClassifiers><_><internalNodes>{nodes}</internalNodes><leafValues>{leaves}</leafValues></_></weakClassifiers></_></stages>
<features><_><rects><_>{rect}</_><_>{rect2}</_></rects><tilted>0</tilted></_></features></cascade></opencv_storage>"""
variants = [dict(nodes="0 -1 5 0.01"), dict(nodes="0 -7 0 0.01"), dict(nodes="1 -1 0 0.01"), dict(nodes="0 -1 0 nan"),
            dict(nodes="0 -1 -3 0.01"), dict(nodes="0 -1 1e20 0.01"), dict(leaves="nan inf"), dict(rect="0 0 99999 4 -1."),
            dict(rect="-5 0 2 4 -1."), dict(rect="0 0 2 4 nan"), dict(w="0"), dict(h="1e9"), dict(thr="nan"),
            dict(nodes="1 -1 0 0.01 0 -1 0 0.01"), dict(rect="0 0 2147483647 2147483647 1.")]
for v in variants:
    open("c.xml", "w").write(cascade(**v))
    run("Hostile cascades", ["faces", "photo.png", "--cascade", "c.xml"], timeout=20)
    run("Hostile cascades", ["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", "disparity8:0,2",
                             "--cascade", "c.xml", "-o", "cb.jpg", "--force"], timeout=20)

# --- Outputs: nothing overwritten without --force, nothing left behind -------------------------------
shutil.copy("photo.png", "keep.png")
run("Outputs (no overwrite, nothing left)", ["convert", "photo.png", "keep.png"], unchanged=["keep.png"])
run("Outputs (no overwrite, nothing left)", ["stack", "t16x16_0.png", "t16x16_1.png", "t16x16_2.png", "-o", "st.png", "--report", "keep.png"],
    unchanged=["keep.png"], must_not_exist=["st.png"])
run("Outputs (no overwrite, nothing left)", ["stack", "t16x16_0.png", "t16x16_1.png", "t16x16_2.png", "-o", "st.png", "--save-frames", "keep.png"],
    unchanged=["keep.png"], must_not_exist=["st.png"])
run("Outputs (no overwrite, nothing left)", ["stack", "t16x16_0.png", "t16x16_1.png", "t16x16_2.png", "-o", "st.png", "--save-maps", "keep.png"],
    unchanged=["keep.png"], must_not_exist=["st.png"])
os.makedirs("maps-taken", exist_ok=True); open("maps-taken/kept.png", "w").write("mine")
run("Outputs (no overwrite, nothing left)", ["stack", "t16x16_0.png", "t16x16_1.png", "t16x16_2.png", "-o", "st.png", "--save-maps", "maps-taken"],
    unchanged=["maps-taken/kept.png"], must_not_exist=["st.png"])
if have_shared:
    shutil.copy(shared("depth/truedepth-iphone/jpeg_depth_data.jpg"), "v.jpg")
    run("Outputs (no overwrite, nothing left)", ["depth", "extract", "v.jpg", "-o", "d.pfm", "--report", "v.jpg"], unchanged=["v.jpg"], must_not_exist=["d.pfm"])
    run("Outputs (no overwrite, nothing left)", ["portrait", "v.jpg", "-o", "pp.jpg", "--report", "v.jpg"], unchanged=["v.jpg"], must_not_exist=["pp.jpg"])
    run("Outputs (no overwrite, nothing left)", ["portrait", "v.jpg", "-o", "pp.jpg", "--save-mask", "v.jpg"], unchanged=["v.jpg"], must_not_exist=["pp.jpg"])
    run("Outputs (no overwrite, nothing left)", ["backdrop", "--portrait", "v.jpg", "-o", "bb.jpg", "--report", "v.jpg"], unchanged=["v.jpg"], must_not_exist=["bb.jpg"])
    run("Outputs (no overwrite, nothing left)", ["portrait", "v.jpg", "-o", "v.jpg", "--force"], expect=(1, 64), unchanged=["v.jpg"])
os.makedirs("demo-out", exist_ok=True); open("demo-out/clean.jpg", "w").write("mine")
run("Outputs (no overwrite, nothing left)", ["demo", "--out", "demo-out", "--video", "nonexistent.avi"], unchanged=["demo-out/clean.jpg"])
# A signal in the middle of writing: no temporary file and no child process may survive.
def interrupt(argv, sig, delay, label, is_new, children):
    """Runs evanesco ARGV, sends SIG after DELAY s and checks that no hidden file IS_NEW (a
    predicate on names) is left and no process matching CHILDREN (pgrep -f) survives."""
    p = subprocess.Popen([EVANESCO] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay); p.send_signal(sig); p.wait()
    time.sleep(0.2)
    left = [f for f in os.listdir(".") if f.startswith(".") and is_new(f)]
    kids = subprocess.run(["pgrep", "-f", children], capture_output=True, text=True).stdout.split()
    r = results.setdefault("Signals during output", [0, 0, []]); r[0] += 1
    if left or kids: r[2].append(f"{label} after signal {sig} at {delay} s: left {left} children {kids}")
    else: r[1] += 1
    for f in left: os.remove(f)
    for k in kids: os.kill(int(k), signal.SIGKILL)

png("big-in.png", 4000, 3000)
for sig in (signal.SIGINT, signal.SIGTERM):
    for out in ["sig.tif", "sig.png", "sig.mp4"]:
        for delay in (0.3, 0.6, 0.9, 1.2):
            argv = ["convert", "big-in.png", out, "--force"] if not out.endswith(".mp4") else \
                   ["backdrop", "--color", "big-in.png", "--depth", "big-in.png", "--depth-format", "disparity8:0,2", "--subject", "nearest", "-o", out, "--force"]
            interrupt(argv, sig, delay, out, lambda f: "sig" in f, "evanesco-.*sig")
# A signal while a video is read through the temporary file of frames: ffmpeg must not survive,
# nor any file (the temporary file of frames never had a name).
subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=25", "-t", "20",
                "-pix_fmt", "yuv420p", "sigclip.mp4"], check=True)
for sig in (signal.SIGINT, signal.SIGTERM):
    for delay in (0.3, 0.8):
        before = set(os.listdir("."))
        interrupt(["stack", "sigclip.mp4", "-o", "sigv.png", "--frames", "300", "--memory-limit", "1", "--spill-dir", ".",
                   "--force", "--quiet"], sig, delay, "spilled video", lambda f: f not in before, "ffmpeg.*sigclip")

shutil.rmtree(work, ignore_errors=True)
total = sum(r[0] for r in results.values()); clean = sum(r[1] for r in results.values())
if args.markdown:
    print("| class | inputs tried | handled cleanly |\n|---|---|---|")
    for cls, (t, c, _) in results.items(): print(f"| {cls} | {t} | {c} |")
for cls, (t, c, fails) in results.items():
    print(f"{cls}: {c}/{t}" + ("" if c == t else " FAILED"), file=sys.stderr)
    for f in fails[:8]: print("   " + f, file=sys.stderr)
if not have_shared: print("bad-inputs: ../shared/data is absent: the real-photo cases were skipped", file=sys.stderr)
print(f"bad-inputs: {clean}/{total} handled cleanly", file=sys.stderr)
sys.exit(0 if clean == total else 1)
