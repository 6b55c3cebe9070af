#!/usr/bin/env python3
"""Hostile and odd inputs against the release binary, one class per row of docs/reliability.md's
bad-input table. Each case must end with exit status 0 (handled) or 1/64 (a clear one-line
error), within its time limit, under 2 GB of memory, leaving no stray file and losing nothing.
   scripts/bad-inputs.py [--binary PATH] [--shared DIR] [--markdown]
Cases that need ../shared/data (real photos) are skipped, and said so, when it is absent."""
import argparse, base64, hashlib, os, random, shutil, signal, struct, subprocess, sys, tempfile, time, zlib

ap = argparse.ArgumentParser()
ap.add_argument("--binary", help="the binary to test (default: the release build, built when missing)")
ap.add_argument("--shared", default=os.environ.get("EVANESCO_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")))
ap.add_argument("--markdown", action="store_true")
ap.add_argument("--only", help="run only the batch classes whose name holds this text (e.g. Batch, 'erase masks')")
args = ap.parse_args()
if args.binary is None:  # scripts/build-release.sh builds it (unless EVANESCO_RELEASE_DIR) and says where
    release = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "build-release.sh"), "evanesco"],
                             stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    args.binary = os.path.join(release, "evanesco")
EVANESCO = os.path.abspath(args.binary)
SHARED = os.path.abspath(args.shared)
work = tempfile.mkdtemp(prefix="evanesco-bad-")
os.chdir(work)
results = {}   # class -> [tried, clean, failures]

def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)

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
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    if path: open(path, "wb").write(data)
    return data

def run(cls, argv, timeout=60, expect=(0, 1, 64), must_exist=(), must_not_exist=(), unchanged=(), stdin=None, stdout_to=None,
        clean_dirs=(), binary=None):
    """Runs one case and records whether it was handled cleanly. STDOUT_TO: a path the command's
    stdout is written to (/dev/full, a file on a full disk); CLEAN_DIRS: folders besides "."
    where no temporary file may be left; ARGV may hold bytes (names that are not UTF-8)."""
    if args.only and args.only not in cls: return None, ""
    digests = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in unchanged if os.path.exists(p)}
    before = set(os.listdir("."))
    start = time.time()
    out_file = open(stdout_to, "wb") if stdout_to else None
    p = subprocess.Popen([binary or EVANESCO] + argv, stdout=out_file or subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, start_new_session=True)
    problem = None
    try:
        out, err = p.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL); out, err = p.communicate(); problem = f"hang (> {timeout} s)"
    if out_file: out_file.close()
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
    for d in clean_dirs:
        if os.path.isdir(d): stray += [os.path.join(d, f) for f in os.listdir(d) if f.startswith(".evn-") or f.endswith(".tmp")]
    if problem is None and stray: problem = f"left temporary files {stray}"
    r = results.setdefault(cls, [0, 0, []])
    r[0] += 1
    if problem: r[2].append(f"{' '.join(a if isinstance(a, str) else a.decode(errors='replace') for a in argv)[:120]}: {problem}")
    else: r[1] += 1
    return rc, err.decode(errors="replace")

def maxrss_run(cls, argv, limit_mb=512, timeout=60, expect=(0, 1, 64, 65)):
    """Runs a case and records it as failed when the process's peak memory passes limit_mb."""
    if args.only and args.only not in cls: return
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
    if problem is None and rc not in expect: problem = f"exit {rc}"
    if problem is None and peak > limit_mb: problem = f"peak memory {peak} MB"
    r = results.setdefault(cls, [0, 0, []]); r[0] += 1
    if problem: r[2].append(f"{' '.join(argv)[:100]}: {problem}")
    else: r[1] += 1

have_shared = os.path.isdir(SHARED)
def shared(rel): return os.path.join(SHARED, rel)

def finish():
    """Unmounts, removes the work folder, prints each class's count and exits (1 if any case failed)."""
    for m in mounts: subprocess.run(["umount", os.path.join(work, m)], capture_output=True)
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

mounts = []
# --- Batch: outputs that are inputs, manifests or receipts, through links and --force ---------------
# (issue 45: a batch never overwrites what it did not make, never calls a job done without its output.)
def manifest(path, lines, crlf=False):
    import json as _j
    text = "".join((l if isinstance(l, str) else _j.dumps(l)) + ("\r\n" if crlf else "\n") for l in lines)
    open(path, "w", newline="").write(text)

def frames(folder, n=3, w=40, h=32):
    os.makedirs(folder, exist_ok=True)
    for k in range(n): png(os.path.join(folder, f"f{k:02d}.png"), w, h, fill=None)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder))

def flag(cls, problem):
    """Records a problem found after a case was run (and counted clean): it is no longer clean."""
    r = results.setdefault(cls, [0, 0, []])
    if len(r[2]) < r[0] and r[1] > 0: r[1] -= 1
    r[2].append(problem)

def batch_dir(name):
    d = os.path.join(work, name); shutil.rmtree(d, ignore_errors=True); os.makedirs(d); return d

def stack_line(i, inputs, output, **extra):
    return dict(id=i, kind="stack", inputs=inputs, output=output, options={"align": "none", "merge": "median"}, **extra)

d = batch_dir("b-inputs"); os.chdir(d)
fr = frames("frames"); os.makedirs("out")
os.symlink("frames", "outlink")
hostile = {
    "own input frame": [stack_line("j", ["frames/"], "frames/f00.png")],
    "new file inside the input folder": [stack_line("j", ["frames/"], "frames/new.png")],
    "output through a link to the input folder": [stack_line("j", ["frames/"], "outlink/f01.png")],
    "output through .. into the input folder": [stack_line("j", ["frames/"], "out/../frames/f02.png")],
    "output is another job's input": [stack_line("a", ["frames/"], "out/a.png"), stack_line("b", ["out/a.png", "frames/f00.png"], "out/b.png")],
}
for label, lines in hostile.items():
    manifest("jobs.jsonl", lines)
    if "another job" in label: png("out/a.png", 40, 32)
    for force in ([], ["--force"]):
        run("Batch: outputs that are inputs (even with --force)", ["batch", "run", "jobs.jsonl", "--quiet", *force],
            expect=(65,), unchanged=fr + ["jobs.jsonl"] + (["out/a.png"] if "another job" in label else []), must_not_exist=["frames/new.png"])
# The manifest itself, named like an image, as the output.
manifest("jobs.png", [stack_line("j", ["frames/"], "jobs.png")])
run("Batch: outputs that are inputs (even with --force)", ["batch", "run", "jobs.png", "--quiet", "--force"], expect=(65,), unchanged=["jobs.png"])
# The state folder (receipts) as the output.
manifest("jobs.jsonl", [stack_line("j", ["frames/"], "out/r.png")])
run("Batch: outputs that are inputs (even with --force)", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(0,))
manifest("jobs2.jsonl", [stack_line("k", ["frames/"], "jobs.jsonl.state/done/j.png")])
os.makedirs("jobs.jsonl.state/done", exist_ok=True)
# --report naming an input, the manifest, a receipt or a job's output.
for report in ["frames/f01.png", "jobs.jsonl", "outlink/f02.png", "jobs.jsonl.state/done/j.json", "out/r.png"]:
    run("Batch: --report never replaces an input, the manifest, a receipt or an output", ["batch", "run", "jobs.jsonl", "--quiet", "--force", "--report", report],
        expect=(1, 64), unchanged=fr + ["jobs.jsonl", "jobs.jsonl.state/done/j.json", "out/r.png"])

# Two jobs writing one file through a linked folder.
d = batch_dir("b-twice"); os.chdir(d)
frames("frames"); os.makedirs("out"); os.symlink("out", "out2")
manifest("jobs.jsonl", [stack_line("j1", ["frames/"], "out/j1.png"), stack_line("j2", ["frames/"], "out2/j1.png")])
run("Batch: two jobs, one file through a link", ["batch", "run", "jobs.jsonl", "--quiet", "--force"], expect=(65,), must_not_exist=["out/j1.png"])

# A run killed between placing an output and writing its receipt resumes: the receipt it left
# as placing is recovered (the state such a kill leaves: the done receipt under placing/).
d = batch_dir("b-resume"); os.chdir(d)
frames("frames"); os.makedirs("out")
manifest("jobs.jsonl", [stack_line("j", ["frames/"], "out/j.png")])
subprocess.run([EVANESCO, "batch", "run", "jobs.jsonl", "--quiet"], capture_output=True)
import json as _json
if os.path.exists("jobs.jsonl.state/done/j.json"):
    rec = _json.load(open("jobs.jsonl.state/done/j.json")); rec["state"] = "placing"
    os.makedirs("jobs.jsonl.state/placing", exist_ok=True)
    _json.dump(rec, open("jobs.jsonl.state/placing/j.json", "w")); os.remove("jobs.jsonl.state/done/j.json")
rc, err = run("Batch: a run killed between the rename and the receipt resumes", ["batch", "run", "jobs.jsonl"], expect=(0,), must_exist=["jobs.jsonl.state/done/j.json"], unchanged=["out/j.png"])
# Corrupt receipts and truncated outputs are not done; cancelled work is not lost.
d = batch_dir("b-corrupt"); os.chdir(d)
frames("frames"); os.makedirs("out")
manifest("jobs.jsonl", [stack_line(f"j{k}", ["frames/"], f"out/j{k}.png") for k in range(3)])
subprocess.run([EVANESCO, "batch", "run", "jobs.jsonl", "--quiet"], capture_output=True)
if os.path.exists("jobs.jsonl.state/done/j0.json"):
    open("jobs.jsonl.state/done/j0.json", "w").write("{garbage")
    data = open("out/j1.png", "rb").read(); open("out/j1.png", "wb").write(data[:len(data) // 2])
if not args.only or "Batch" in args.only:
    st = subprocess.run([EVANESCO, "batch", "status", "jobs.jsonl", "--json"], capture_output=True, text=True)
    r = results.setdefault("Batch: corrupt receipts and truncated outputs are not done", [0, 0, []]); r[0] += 1
    try: ok = _json.loads(st.stdout)["done"] == 1
    except Exception: ok = False
    if ok: r[1] += 1
    else: r[2].append(f"status counts them done: {st.stdout.strip()[:200]}")
# The truncated output is made again (it is the batch's own); the one with an unreadable receipt is refused, said so.
rc, err = run("Batch: corrupt receipts and truncated outputs are not done", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(1,), unchanged=["out/j0.png"])
if rc is not None and "unreadable" not in err: flag("Batch: corrupt receipts and truncated outputs are not done", "no word of the unreadable receipt: " + err[-200:])

# Two unsharded runs of one manifest at once: both succeed, no job failed, each done once.
d = batch_dir("b-two-runs"); os.chdir(d)
for k in range(8): frames(f"burst{k}", n=4, w=160, h=120)
os.makedirs("out")
manifest("jobs.jsonl", [stack_line(f"j{k}", [f"burst{k}/"], f"out/j{k}.png") for k in range(8)])
if not args.only or "Batch" in args.only:
    ps = [subprocess.Popen([EVANESCO, "batch", "run", "jobs.jsonl", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in ps]
    st = subprocess.run([EVANESCO, "batch", "status", "jobs.jsonl", "--json"], capture_output=True, text=True)
    r = results.setdefault("Batch: two runs of one manifest at once", [0, 0, []]); r[0] += 1
    failed_receipts = os.listdir("jobs.jsonl.state/failed") if os.path.isdir("jobs.jsonl.state/failed") else []
    try: status = _json.loads(st.stdout)
    except Exception: status = {}
    if all(p.returncode == 0 for p in ps) and not failed_receipts and status.get("done") == 8: r[1] += 1
    else: r[2].append(f"exits {[p.returncode for p in ps]}, failed receipts {failed_receipts[:3]}, status {st.stdout.strip()[:120]}, {outs[0][1][-150:]!r}")

# Scheduler variables: overflow, garbage and both schedulers at once are usage errors (64).
d = batch_dir("b-misc"); os.chdir(d)
frames("frames"); os.makedirs("out")
manifest("jobs.jsonl", [stack_line("j", ["frames/"], "out/s.png")])
for env in [dict(SLURM_ARRAY_TASK_ID="9223372036854775807", SLURM_ARRAY_TASK_MIN="-1", SLURM_ARRAY_TASK_COUNT="2"),
            dict(SLURM_ARRAY_TASK_ID="-9223372036854775808", SLURM_ARRAY_TASK_MIN="1", SLURM_ARRAY_TASK_COUNT="2"),
            dict(SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="99999999999999999999"),
            dict(SLURM_ARRAY_TASK_ID="3", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_COUNT="2"),
            dict(SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_TASK_COUNT="2", JOB_COMPLETION_INDEX="garbage"),
            dict(JOB_COMPLETION_INDEX="1", EVANESCO_SHARD_COUNT="0"), dict(JOB_COMPLETION_INDEX="x\ny", EVANESCO_SHARD_COUNT="2")]:
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    run("Batch: scheduler variables", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(64,), must_not_exist=["out/s.png"])
    for k, v in old.items():
        if v is None: os.environ.pop(k, None)
        else: os.environ[k] = v

# Integer settings far out of range, from a manifest and from flags: refused before any allocation.
png("ph.png", 64, 48); png("dm.png", 64, 48, ch=1)
manifest("jobs.jsonl", [dict(id="p", kind="portrait", inputs=["ph.png", "dm.png"], output="out/p.png", options={"effect": "lens", "blades": 8900000000000000})])
run("Batch: huge integer settings", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(65,))
for v in ["9223372036854775807", "-9223372036854775808", "100000000"]:
    maxrss_run("Batch: huge integer settings", ["portrait", "ph.png", "--depth-map", "dm.png", "-o", "out/l.jpg", "--force", "--effect", "lens", "--blades", v], limit_mb=200, timeout=10)
for opt in ["--levels", "--quality"]:
    maxrss_run("Batch: huge integer settings", ["portrait", "ph.png", "--depth-map", "dm.png", "-o", "out/l.jpg", "--force", opt, "9223372036854775807"], limit_mb=200, timeout=10)
for opt, v in [("--reference", "9223372036854775807"), ("--frames", "9223372036854775807"), ("--align-level", "9223372036854775807"), ("--memory-limit", "9223372036854775807"),
               ("--bit-depth", "9223372036854775807"), ("--quality", "-9223372036854775808")]:
    maxrss_run("Batch: huge integer settings", ["stack", "frames/", "-o", "out/h.png", "--force", "--quiet", opt, v], limit_mb=200, timeout=10)
for opt in ["--working-size", "--min-size", "--min-neighbors"]:
    maxrss_run("Batch: huge integer settings", ["faces", "ph.png", opt, "9223372036854775807"], limit_mb=200, timeout=10)
for argv in (["batch", "run", "jobs.jsonl", "--jobs", "9223372036854775807"], ["worker", "--queue", "postgres://u@127.0.0.1/d", "--jobs", "9223372036854775807"],
             ["batch", "submit", "jobs.jsonl", "--queue", "postgres://u@127.0.0.1/d", "--max-attempts", "9223372036854775807"],
             ["studio", "--port", "9223372036854775807"], ["studio", "--max-upload-mb", "9223372036854775807"]):
    maxrss_run("Batch: huge integer settings", argv, limit_mb=200, timeout=10, expect=(64,))
# Options of every job kind in a manifest, far out of range.
for opts in [{"detectEvery": 9223372036854775807}, {"faceWorkingSize": 8900000000000000}, {"faceMinSize": -8900000000000000}]:
    manifest("jobs.jsonl", [dict(id="b", kind="backdrop", inputs=["ph.png", "dm.png"], output="out/b", options=opts)])
    run("Batch: huge integer settings", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(65,))
for opts in [{"levels": 8900000000000000}, {"radius": 1e300}, {"reference": 8900000000000000}]:
    kind = "stack" if "reference" in opts else "portrait"
    inputs = ["frames/"] if kind == "stack" else ["ph.png", "dm.png"]
    manifest("jobs.jsonl", [dict(id="o", kind=kind, inputs=inputs, output="out/o.png", options=opts)])
    run("Batch: huge integer settings", ["batch", "run", "jobs.jsonl", "--quiet"], expect=(65,))

# An erase mask whose header declares 20000x20000: refused from its header, in little memory.
def lying_png(path, w, h, ch):
    """A whole, valid PNG of zeros: 20000x20000 decodes to gigabytes from a file of about a megabyte."""
    color = {1: 0, 3: 2}[ch]
    row = b"\0" + b"\0" * (w * ch)
    comp = zlib.compressobj(9); body = b"".join(comp.compress(row) for _ in range(h)) + comp.flush()
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
for ch in (3, 1):
    lying_png(f"mask{ch}.png", 20000, 20000, ch)
    maxrss_run("Batch: erase masks that lie about their size", ["stack", "frames/", "-o", "out/e.png", "--force", "--quiet", "--align", "none", "--erase", f"mask{ch}.png"], limit_mb=300, timeout=20)
    manifest("jobs.jsonl", [stack_line("e", ["frames/"], "out/e.png", erase=f"mask{ch}.png")])
    maxrss_run("Batch: erase masks that lie about their size", ["batch", "run", "jobs.jsonl", "--quiet"], limit_mb=300, timeout=20)
# An empty input folder says it is empty, not a permissions problem.
os.makedirs("empty", exist_ok=True)
rc, err = run("Batch: clear words", ["stack", "empty/", "-o", "out/x.png", "--quiet"], expect=(1,))
if rc is not None and "permission" in err: flag("Batch: clear words", "an empty folder is said to be a permissions problem: " + err[-200:])
# Settings with one unit and versioned job lines (issue 46): a byte count where MB are read, a size
# that is not one, a spec from the future, the blur under both its names: refused, nothing written.
cls = "Batch: settings in the wrong unit or spec"
for label, line, needle in [
        ("bytes for MB", dict(stack_line("m", ["frames/"], "out/m.png"), options={"memoryLimit": 1073741824}), '"1073741824B"'),
        ("not a size", dict(stack_line("m", ["frames/"], "out/m.png"), options={"memoryLimit": "12X"}), "512M or 2G"),
        ("negative size", dict(stack_line("m", ["frames/"], "out/m.png"), options={"memoryLimit": -5}), "is in MB"),
        ("a newer spec", dict(stack_line("m", ["frames/"], "out/m.png"), spec=3), "newer evanesco"),
        ("a spec that is a string", dict(stack_line("m", ["frames/"], "out/m.png"), spec="2"), "not a job spec"),
        ("blur twice", dict(id="b", kind="backdrop", inputs=["frames/", "frames/"], output="out/b",
                            options={"blur": 8, "blurRadius": 3}), "not both")]:
    manifest("units.jsonl", [line])
    rc, err = run(cls, ["batch", "run", "units.jsonl", "--quiet"], expect=(65,), must_not_exist=["out/m.png", "out/b"])
    if rc is not None and needle not in err: flag(cls, f"{label}: the error does not say {needle}: {err[-300:]}")
# Manifest text: CRLF works; trailing commas, duplicate keys, huge keys and ids are refused fast and quoted.
# (Last of the batch cases: a child's peak memory counts its parent's, and these make the most.)
manifest("crlf.jsonl", [stack_line("j", ["frames/"], "out/j.png"), stack_line("k", ["frames/"], "out/k.png")], crlf=True)
run("Batch: manifest text (CRLF, strict JSON, bounds)", ["batch", "run", "crlf.jsonl", "--quiet"], expect=(0,), must_exist=["out/j.png", "out/k.png"])
BIG = "\x00BIG\x00"   # stands for 50 MB of "x", written in pieces (the parent's memory counts in a child's peak)
for label, text in [("trailing comma", '{"id": "a", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png",}'),
                    ("trailing comma in an array", '{"id": "a", "kind": "stack", "inputs": ["frames/",], "output": "out/a.png"}'),
                    ("duplicate key", '{"id": "a", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png", "options": {"merge": "mean", "merge": "median"}}'),
                    ("50 MB unknown key", '{"id": "a", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png", "' + BIG + '": 1}'),
                    ("50 MB id", '{"id": "' + BIG + '", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png"}'),
                    ("id with a newline", '{"id": "a\\nline 9: job x: forged", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png"}'),
                    ("id with a NUL", '{"id": "a\\u0000b", "kind": "stack", "inputs": ["frames/"], "output": "out/a.png"}')]:
    with open("bad.jsonl", "w") as f:
        for k, piece in enumerate(text.split(BIG)):
            for _ in range(50 if k else 0): f.write("x" * (1 << 20))
            f.write(piece)
        f.write("\n")
    t0 = time.time()
    rc, err = run("Batch: manifest text (CRLF, strict JSON, bounds)", ["batch", "run", "bad.jsonl", "--quiet"], expect=(65,), timeout=20, must_not_exist=["out/a.png"])
    if rc is None: continue
    cls = "Batch: manifest text (CRLF, strict JSON, bounds)"
    if len(err) > 4000: flag(cls, f"{label}: {len(err)} bytes on stderr")
    elif time.time() - t0 > 5: flag(cls, f"{label}: {time.time() - t0:.0f} s to refuse")
    elif "forged" in err and "\nline 9" in err: flag(cls, f"{label}: the id's newline was echoed raw")
    elif "\0" in err: flag(cls, f"{label}: a NUL on stderr")

os.chdir(work)
if args.only: finish()  # the batch classes come first; the rest index their results unconditionally

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
for v in ["-1", "nan", "99999999999", "16777217", "2X", "1.5.5G", "17T", "G", "0x10M"]:
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

# --- Camera raws: truncated, lying tags, decompression bombs, a raw among JPEGs --------------------
def dng(w=64, h=48, black=256, white=4095, neutral=((1, 2), (1, 1), (2, 3)), matrix=None, cfa_dim=(2, 2),
        cfa=(0, 1, 1, 2), strip_bytes=None, big=False):
    """A small uncompressed CFA DNG (IFD0 holds the mosaic), every tag given plainly so that one
    can lie: sizes, levels, white balance, the colour matrix's rationals, the CFA's repeat."""
    e = ">" if big else "<"
    px = struct.pack(e + f"{w * h}H", *[(black + (x * 37 + y * 11) % 3000) % 65536 for y in range(h) for x in range(w)])
    matrix = matrix or [(7, 10), (-2, 10), (-1, 10), (-45, 100), (125, 100), (15, 100), (-8, 100), (16, 100), (53, 100)]
    extra = b""
    def blob(data):
        nonlocal extra
        at = 8 + len(extra); extra += data + (b"\0" if len(data) % 2 else b""); return at
    def rationals(pairs, signed=False): return b"".join(struct.pack(e + ("ii" if signed else "II"), *p) for p in pairs)
    entries = []
    def tag(t, typ, count, value_bytes):
        if len(value_bytes) <= 4: entries.append((t, typ, count, value_bytes.ljust(4, b"\0"), None))
        else: entries.append((t, typ, count, None, value_bytes))
    tag(254, 4, 1, struct.pack(e + "I", 0)); tag(256, 4, 1, struct.pack(e + "I", w)); tag(257, 4, 1, struct.pack(e + "I", h))
    tag(258, 3, 1, struct.pack(e + "H", 16)); tag(259, 3, 1, struct.pack(e + "H", 1)); tag(262, 3, 1, struct.pack(e + "H", 32803))
    tag(273, 4, 1, b"PXPX"); tag(274, 3, 1, struct.pack(e + "H", 1)); tag(277, 3, 1, struct.pack(e + "H", 1))
    tag(278, 4, 1, struct.pack(e + "I", h)); tag(279, 4, 1, struct.pack(e + "I", strip_bytes if strip_bytes is not None else len(px)))
    tag(33421, 3, 2, struct.pack(e + "HH", *cfa_dim)); tag(33422, 1, len(cfa), bytes(cfa))
    tag(50706, 1, 4, bytes([1, 4, 0, 0])); tag(50708, 2, 5, b"Bad\0\0")
    tag(50714, 4, 1, struct.pack(e + "I", black)); tag(50717, 4, 1, struct.pack(e + "I", white))
    tag(50721, 10, 9, rationals(matrix, True)); tag(50728, 5, 3, rationals(neutral)); tag(50778, 3, 1, struct.pack(e + "H", 21))
    entries.sort()
    body = b""
    for t, typ, count, inline, data in entries:
        if data is not None: inline = struct.pack(e + "I", blob(data))
        body += struct.pack(e + "HHI", t, typ, count) + inline
    ifd_at = 8 + len(extra); px_at = ifd_at + 2 + 12 * len(entries) + 4
    body = body.replace(b"PXPX", struct.pack(e + "I", px_at))
    head = (b"MM\0*" if big else b"II*\0") + struct.pack(e + "I", ifd_at)
    return head + extra + struct.pack(e + "H", len(entries)) + body + struct.pack(e + "I", 0) + px

RAW = "Camera raws (DNG truncated, tags that lie, bombs, mutated, a raw among JPEGs, raw to DNG onto itself)"
good_dng = dng(); open("good.dng", "wb").write(good_dng); open("good-be.dng", "wb").write(dng(big=True))
for name in ("good.dng", "good-be.dng"):
    run(RAW, ["info", name], expect=(0,)); run(RAW, ["convert", name, name + ".jpg", "--force"], expect=(0,), must_exist=(name + ".jpg",))
    run(RAW, ["convert", name, name + "-copy.dng", "--force"], expect=(0,), must_exist=(name + "-copy.dng",))
for cut in (8, 100, 400, len(good_dng) // 2, len(good_dng) - 10):
    open("cut.dng", "wb").write(good_dng[:cut])
    for cmd in (["info", "cut.dng"], ["convert", "cut.dng", "cut-dng-out.png", "--force"]):
        run(RAW, cmd, expect=(1,), must_not_exist=("cut-dng-out.png",))
liars = {"black-above-white.dng": dng(black=5000), "zero-neutral.dng": dng(neutral=((0, 1), (1, 1), (1, 1))),
         "nan-matrix.dng": dng(matrix=[(7, 0)] + [(0, 1)] * 8), "singular-matrix.dng": dng(matrix=[(1, 1)] * 9),
         "cfa-3x3.dng": dng(cfa_dim=(3, 3), cfa=(0, 1, 2, 1, 2, 0, 2, 0, 1)), "cfa-rrgb.dng": dng(cfa=(0, 0, 1, 2)),
         "short-strip.dng": dng(strip_bytes=100), "wide-lie.dng": dng(w=64, h=48)[:-2000]}
for name, data in liars.items():
    open(name, "wb").write(data)
    run(RAW, ["convert", name, name + ".png", "--force"], expect=(1,), must_not_exist=(name + ".png",))
    run(RAW, ["info", name], expect=(0, 1))
# Decompression bombs: 60000 x 60000 and 1 x 400 million declared over a few KB.
for w, h in ((60000, 60000), (1, 400_000_001), (65535, 2)):
    b = bytearray(good_dng); ifd = struct.unpack_from("<I", b, 4)[0]; n = struct.unpack_from("<H", b, ifd)[0]
    for k in range(n):
        at = ifd + 2 + 12 * k; t = struct.unpack_from("<H", b, at)[0]
        if t in (256, 257): struct.pack_into("<I", b, at + 8, w if t == 256 else h)
    open("bomb.dng", "wb").write(bytes(b))
    maxrss_run(RAW, ["convert", "bomb.dng", "bomb.png", "--force"])
    maxrss_run(RAW, ["info", "bomb.dng"])
# A raw in a burst of JPEGs: refused before anything is decoded or written.
open("burst-jpg.jpg", "wb").write(good_jpg)
run(RAW, ["stack", "good.dng", "g.jpg", "burst-jpg.jpg", "-o", "mixed.jpg"], expect=(1,), must_not_exist=("mixed.jpg",))
run(RAW, ["stack", "g.jpg", "good.dng", "-o", "mixed2.jpg", "--memory-limit", "1"], expect=(1,), must_not_exist=("mixed2.jpg",))
# The input is never the output, not with --force, not through a link.
os.symlink("good.dng", "link.dng")
run(RAW, ["convert", "good.dng", "link.dng", "--force"], expect=(1,), unchanged=("good.dng",))
run(RAW, ["convert", "link.dng", "good.dng", "--force"], expect=(1,), unchanged=("good.dng",))
rng_raw = random.Random(11)
for k in range(40):
    b = bytearray(good_dng)
    for _ in range(rng_raw.randint(1, 12)):
        at = rng_raw.randrange(min(len(b), 700)) if rng_raw.random() < 0.8 else rng_raw.randrange(len(b))
        b[at] = rng_raw.randrange(256)
    open("mut.dng", "wb").write(bytes(b))
    run(RAW, ["info", "mut.dng"], timeout=30)
    run(RAW, ["convert", "mut.dng", "mut.png", "--force"], timeout=60)

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
# --- Full disks, /dev/full, read-only folders (small tmpfs mounts made here, as root) -------------
def mount_tmpfs(path, size, readonly=False):
    os.makedirs(path, exist_ok=True)
    opts = f"size={size}" + (",ro" if readonly else "")
    return subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", path], capture_output=True).returncode == 0
mounts = []
def noise_png(path, w, h):
    """An RGB PNG of noise: it does not compress, so its size is known (w * h * 3 bytes and a little)."""
    raw = b"".join(b"\0" + os.urandom(w * 3) for _ in range(h))
    def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))
noise_png("wide-in.png", 500, 400)                  # 600 KB of noise: more than the 300 KB left below
for k in range(3): png(f"fb{k}.png", 120, 90)
if have_shared: shutil.copy(shared("depth/truedepth-iphone/jpeg_depth_data.jpg"), "td.jpg")
for cmd in (["info", "photo.png", "--json"], ["info", "photo.png"], ["faces", "photo.png", "--json"], ["depth", "info", "photo.png", "--json"],
            ["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "sdf.png", "--quiet", "--force"]):
    run("Full disks and /dev/full", cmd, expect=(1,), stdout_to="/dev/full", must_not_exist=["sdf.png"])
if have_shared:
    run("Full disks and /dev/full", ["depth", "info", "td.jpg", "--json"], expect=(1,), stdout_to="/dev/full")
if os.geteuid() == 0 and mount_tmpfs("full", "1m") and mount_tmpfs("nearly", "1m") and mount_tmpfs("ro", "1m", readonly=True):
    mounts += ["full", "nearly", "ro"]
    try:
        with open("full/fill", "wb") as f:
            while True: f.write(b"\0" * 4096)
    except OSError: pass
    open("nearly/fill", "wb").write(b"\0" * 700_000)   # about 300 KB left
    # Nothing fits: refused before any work, with the cause.
    for cmd, out in ((["convert", "photo.png", "full/c.png"], "full/c.png"), (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "full/s.png", "--quiet"], "full/s.png"),
                     (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "fs.png", "--report", "full/r.json", "--quiet"], "fs.png"),
                     (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "fs.png", "--save-maps", "full/maps", "--quiet"], "fs.png"),
                     (["demo", "--out", "full/demo", "--video", "clip.mp4", "--frames", "3"], "full/demo")):
        rc, err = run("Full disks and /dev/full", cmd, expect=(1, 64), must_not_exist=[out, "fs.png"], clean_dirs=["full"])
        if "no space" not in err: results["Full disks and /dev/full"][2].append(f"{' '.join(cmd)}: message without the cause: {err.strip()[:160]}")
    run("Full disks and /dev/full", ["info", "photo.png", "--json"], expect=(1,), stdout_to="full/info.json")
    # Room for the check but not for the output: the write fails, cleanly, and nothing is left.
    for out in ["nearly/w.png", "nearly/w.tif", "nearly/w.jpg"]:
        rc, err = run("Full disks and /dev/full", ["convert", "wide-in.png", out, "--quality", "100"], expect=(1,) if not out.endswith(".jpg") else (0, 1),
                      must_not_exist=[out] if not out.endswith(".jpg") else [], clean_dirs=["nearly"])
        if rc == 1 and "no space" not in err: results["Full disks and /dev/full"][2].append(f"{out}: message without the cause: {err.strip()[:160]}")
        if os.path.exists(out): os.remove(out)
    # The main output first, then a side output that no longer fits: the run fails and takes its main output back.
    rc, err = run("Full disks and /dev/full", ["stack", "wide-in.png", "wide-in.png", "-o", "keepnot.png", "--save-frames", "nearly", "--align", "none", "--quiet"],
                  expect=(1,), must_not_exist=["keepnot.png"], clean_dirs=["nearly"])
    if os.listdir("nearly") != ["fill"]: results["Full disks and /dev/full"][2].append(f"save-frames left {os.listdir('nearly')}")
    # Read-only folders: refused before any work, nothing written anywhere.
    for cmd, gone in ((["convert", "photo.png", "ro/c.png"], []), (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "ro.png", "--save-frames", "ro", "--quiet"], ["ro.png"]),
                      (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "ro.png", "--save-maps", "ro/maps", "--quiet"], ["ro.png"]),
                      (["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "ro.png", "--report", "ro/r.json", "--quiet"], ["ro.png"]),
                      (["demo", "--out", "ro/demo", "--video", "clip.mp4", "--frames", "3"], []),
                      (["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", "disparity8:0,2", "--subject", "nearest", "-o", "ro/frames/"], []),
                      (["portrait", "photo.png", "--depth-map", "photo.png", "-o", "ro.jpg", "--save-mask", "ro/m.png"], ["ro.jpg"])):
        rc, err = run("Read-only folders", cmd, expect=(1, 64), must_not_exist=gone)
        if "read-only" not in err: results["Read-only folders"][2].append(f"{' '.join(cmd)}: message without the cause: {err.strip()[:160]}")
        if "NSCocoaErrorDomain" in err or "Error Domain" in err: results["Read-only folders"][2].append(f"{' '.join(cmd)}: raw Foundation error: {err.strip()[:160]}")
else:
    print("bad-inputs: not root or tmpfs cannot be mounted here: the full-disk and read-only cases were skipped", file=sys.stderr)

# --- Side outputs checked before the main one is written ---------------------------------------
run("Side outputs checked first", ["portrait", "photo.png", "--depth-map", "photo.png", "-o", "side.jpg", "--save-mask", "m.txt"], expect=(1, 64), must_not_exist=["side.jpg"])
run("Side outputs checked first", ["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "side.png", "--save-maps", "photo.png", "--quiet"], expect=(1, 64), must_not_exist=["side.png"])
run("Side outputs checked first", ["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "side.png", "--save-frames", "no/such/dir/x", "--quiet"], expect=(1, 64), must_not_exist=["side.png"])

# --- Long and odd names: every writer takes a 255-byte name; longer, and not UTF-8, are refused --------
def long_name(ext, total=255): return "n" * (total - len(ext) - 1) + "." + ext
cases = [(["convert", "photo.png"], ext) for ext in ("png", "jpg", "tif")] + \
        [(["stack", "fb0.png", "fb1.png", "fb2.png", "--quiet", "-o"], "png"), (["portrait", "photo.png", "--depth-map", "photo.png", "-o"], "jpg"),
         (["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", "disparity8:0,2", "--subject", "nearest", "-o"], "mp4")]
for pre, ext in cases:
    name = long_name(ext)
    run("Long and non-UTF-8 names", pre + [name], expect=(0,), must_exist=[name])
    if os.path.exists(name): os.remove(name)
    too = long_name(ext, 256)
    rc, err = run("Long and non-UTF-8 names", pre + [too], expect=(1,), must_not_exist=[too])
    if "name" not in err: results["Long and non-UTF-8 names"][2].append(f"{too[:20]}...: message does not say the name is too long: {err.strip()[:120]}")
rep = long_name("json")
run("Long and non-UTF-8 names", ["stack", "fb0.png", "fb1.png", "fb2.png", "-o", "lr.png", "--report", rep, "--quiet", "--force"], expect=(0,), must_exist=[rep, "lr.png"])
shutil.copy("photo.png", b"in-\xff.png".decode("latin-1"))
for argv in ([b"convert", b"photo.png", b"out-\xff.png"], [b"convert", b"in-\xff.png", b"ok.png"], [b"stack", b"fb0.png", b"fb1.png", b"-o", b"s\xfe.png"]):
    before = set(os.listdir("."))
    rc, err = run("Long and non-UTF-8 names", argv, expect=(64,))
    made = [f for f in set(os.listdir(".")) - before]
    if made: results["Long and non-UTF-8 names"][2].append(f"{argv}: wrote {made}")

# --- Inputs that are not regular files: FIFOs and devices never block -----------------------------
for f in ("fifo.mp4", "fifo.png", "fifo.jpg", "fifo.xml", "fifo.json"):
    if not os.path.exists(f): os.mkfifo(f)
for cmd in (["stack", "fifo.mp4", "-o", "ff.jpg"], ["stack", "fifo.png", "photo.png", "photo.png", "-o", "ff.jpg", "--force"],
            ["backdrop", "--color", "fifo.mp4", "--depth", "photo.png", "-o", "ff.mp4"], ["backdrop", "--color", "photo.png", "--depth", "fifo.mp4", "-o", "ff2.mp4"],
            ["info", "fifo.mp4"], ["info", "fifo.jpg"], ["convert", "fifo.png", "ff.png"], ["depth", "info", "fifo.jpg"],
            ["portrait", "fifo.jpg", "-o", "ff.jpg", "--force"], ["portrait", "photo.png", "--depth-map", "fifo.png", "-o", "ff.jpg", "--force"],
            ["faces", "photo.png", "--cascade", "fifo.xml"], ["stack", "fb0.png", "fb1.png", "-o", "ff.png", "--homographies", "fifo.json", "--force"],
            ["info", "/dev/zero"], ["stack", "/dev/zero", "-o", "fz.jpg"], ["convert", "/dev/urandom", "fz.png"], ["stack", "/dev/null", "-o", "fz.jpg"]):
    run("FIFOs and devices as inputs", cmd, timeout=20, expect=(0, 1, 64), must_not_exist=["ff.mp4", "ff2.mp4", "ff.png", "fz.jpg", "fz.png"])

# --- Numbers that trap a float-to-integer conversion ------------------------------------------------
for v in ["1e308,1", "9.3e18,0", "1e19,1e19", "1,1e300", "18446744073709551616,2"]:
    run("CLI values (NaN, infinity, out of range)", ["portrait", "photo.png", "--depth-map", "photo.png", "-o", "fp.jpg", "--force", "--focus-point", v], expect=(1, 64))
for opt in ["--focus-distance", "--aperture", "--f-number"]:
    for v in ["1e308", "-1e308", "9.3e18", "3.5e38"]:
        run("CLI values (NaN, infinity, out of range)", ["portrait", "photo.png", "--depth-map", "photo.png", "-o", "fp.jpg", "--force", opt, v], expect=(0, 1, 64))
for opt, v in [("--cutoff-offset", "1e308"), ("--blur-radius", "1e308"), ("--gamma", "1e308"), ("--blur-radius", "9.3e18"),
               ("--blur", "1e308"), ("--blur", "-1"), ("--quality", "0"), ("--quality", "101"), ("--quality", "9223372036854775808")]:
    run("CLI values (NaN, infinity, out of range)", ["backdrop", "--color", "photo.png", "--depth", "photo.png", "--depth-format", "disparity8:0,2",
                                                     "-o", "bv.jpg", "--force", opt, v], expect=(0, 1, 64))

# --- The studio: cross-port requests, slow clients, a killed studio's folder -------------------------
import http.client, socket as _socket, re as _re
def start_studio(tmpdir, extra=()):
    env = dict(os.environ, TMPDIR=tmpdir)
    p = subprocess.Popen([EVANESCO, "studio", ".", "--no-open", "--port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    line = p.stdout.readline().decode()
    m = _re.match(r"studio: http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)", line)
    return p, (int(m.group(1)), m.group(2)) if m else (None, None)
def request(port, method, path, headers, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse(); data = r.read(); c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
os.makedirs("studio-tmp", exist_ok=True)
os.makedirs("sb", exist_ok=True)
for k in range(3): shutil.copy(f"fb{k}.png", f"sb/f{k}.png")
p, (port, token) = start_studio(os.path.abspath("studio-tmp"))
def studio_case(name, ok):
    r = results.setdefault("Studio: other pages, slow clients, killed servers", [0, 0, []]); r[0] += 1
    if ok: r[1] += 1
    else: r[2].append(name)
if port:
    body = b'{"root":0,"path":"sb"}'
    cookie = f"evanesco-token={token}"
    for origin in [f"http://127.0.0.1:3000", "http://localhost:8888", f"http://127.0.0.1:{port + 1}", f"http://localhost:{port}", "null"]:
        for hdrs in ({"Origin": origin, "Cookie": cookie, "Content-Type": "text/plain"},
                     {"Origin": origin, "Cookie": cookie, "Content-Type": "text/plain", "X-Evanesco-Request": "1"},
                     {"Origin": origin, "Cookie": cookie, "Content-Type": "text/plain", "Sec-Fetch-Site": "same-site"}):
            for path in ["/api/burst/open", "/api/upload?name=forged.png", "/api/jobs/job1/cancel"]:
                st, h, data = request(port, "POST", path, hdrs, body if "open" in path else open("fb0.png", "rb").read())
                studio_case(f"POST {path} from {origin} {sorted(hdrs)}: {st}", st == 403)
    st, h, _ = request(port, "POST", "/api/burst/open", {"Origin": f"http://127.0.0.1:{port}", "Cookie": cookie, "Content-Type": "text/plain"}, body)
    studio_case(f"own origin without X-Evanesco-Request: {st}", st == 403)
    st, h, _ = request(port, "OPTIONS", "/api/burst/open", {"Origin": "http://127.0.0.1:3000", "Access-Control-Request-Method": "POST",
                                                             "Access-Control-Request-Headers": "x-evanesco-request"})
    studio_case(f"preflight: {st} {h}", st == 403 and not any(k.startswith("access-control-allow") for k in h))
    st, h, _ = request(port, "GET", "/api/files", {"Cookie": cookie, "Sec-Fetch-Site": "same-site"})
    studio_case(f"same-site GET: {st}", st == 403)
    st, h, data = request(port, "GET", "/api/files", {"Cookie": cookie})
    studio_case(f"nothing forged was stored: {data[:200]!r}", st == 200 and b"forged" not in data)
    st, h, _ = request(port, "POST", "/api/burst/open", {"Origin": f"http://127.0.0.1:{port}", "Cookie": cookie, "X-Evanesco-Request": "1",
                                                          "Content-Type": "application/json"}, body)
    studio_case(f"the page itself: {st}", st == 200)
    # 100 clients that send half a header and stop: the studio still answers others at once.
    slow = []
    for k in range(100):
        s_ = _socket.create_connection(("127.0.0.1", port)); s_.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Ev"); slow.append(s_)
    t0 = time.time(); st, _, _ = request(port, "GET", "/api/health", {"Cookie": cookie})
    studio_case(f"answer with 100 slow clients: {st} after {time.time() - t0:.2f} s", st == 200 and time.time() - t0 < 2)
    for s_ in slow: s_.close()
    # SIGKILL: the folder stays; the next studio to start removes it.
    folders = [f for f in os.listdir("studio-tmp") if f.startswith("evanesco-studio-")]
    os.killpg(p.pid, signal.SIGKILL); p.wait()
    p2, (port2, _) = start_studio(os.path.abspath("studio-tmp"))
    after = [f for f in os.listdir("studio-tmp") if f.startswith("evanesco-studio-")]
    studio_case(f"killed studio's folder {folders} removed at the next start: {after}", len(folders) == 1 and folders[0] not in after and len(after) == 1)
    p2.send_signal(signal.SIGINT); p2.wait(timeout=20)
    studio_case(f"clean stop leaves nothing: {os.listdir('studio-tmp')}", os.listdir("studio-tmp") == [])
else:
    studio_case("the studio did not start", False)
    p.kill()

# A signal in the middle of writing: no temporary file and no child process may survive.
def interrupt(argv, sig, delay, label, is_new, children, running=False):
    """Runs evanesco ARGV, sends SIG after DELAY s and checks that no hidden file IS_NEW (a
    predicate on names) is left and no process matching CHILDREN (pgrep -f) survives. RUNNING:
    the command must still be at work when the signal comes (else the case tested nothing)."""
    p = subprocess.Popen([EVANESCO] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    ended = p.poll() is not None
    p.send_signal(sig); _, err = p.communicate()
    if running and ended:
        r = results.setdefault("Signals during output", [0, 0, []]); r[0] += 1
        r[2].append(f"{label}: ended before the signal at {delay} s (exit {p.returncode}): {err.decode()[-300:]}")
        return
    time.sleep(0.2)
    left = [f for f in os.listdir(".") if f.startswith(".") and is_new(f)]
    # Only processes working in this folder are ours: the test suite may run ffmpeg on staging
    # files of its own at the same time (CI runs it beside these checks).
    def ours(pid):
        try: return os.readlink(f"/proc/{pid}/cwd") == os.getcwd()
        except OSError: return False
    kids = [k for k in subprocess.run(["pgrep", "-f", children], capture_output=True, text=True).stdout.split() if ours(k)]
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
            interrupt(argv, sig, delay, out, lambda f: f.startswith(".evn-"), r"ffmpeg.*\.evn-")
# A signal while a video is read through the temporary file of frames: ffmpeg must not survive,
# nor any file (the temporary file of frames never had a name).
subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=25", "-t", "20",
                "-pix_fmt", "yuv420p", "sigclip.mp4"], check=True)
for sig in (signal.SIGINT, signal.SIGTERM):
    for delay in (0.3, 0.8):
        before = set(os.listdir("."))
        interrupt(["stack", "sigclip.mp4", "-o", "sigv.png", "--frames", "300", "--memory-limit", "1", "--spill-dir", ".",
                   "--force", "--quiet"], sig, delay, "spilled video", lambda f: f not in before, "ffmpeg.*sigclip",
                  running=True)

finish()
