#!/usr/bin/env bash
# End-to-end throughput of the same real jobs (stacks of 8 frames of 640x480 and portrait blurs of
# 1024x768 photos with their disparity maps, made here) three ways, alternated round by round on
# this machine: `evanesco batch run` (no database), then the PostgreSQL queue with 1 worker and
# with 2 workers (submit, then workers with --exit-when-done; timed from submit to the last
# exit). Also prints what the database holds per job (row, report and indexes).
# Needs a PostgreSQL server: run it through scripts/with-postgres.sh (or set EVANESCO_QUEUE).
#   scripts/with-postgres.sh Benchmarks/batch-vs-queue.sh [JOBS=200] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh
jobs=${1:-200}; rounds=${2:-3}
url=${EVANESCO_QUEUE:-${EVANESCO_TEST_DATABASE_URL:-}}
[ -n "$url" ] || { echo "batch-vs-queue: no PostgreSQL; run through scripts/with-postgres.sh or set EVANESCO_QUEUE" >&2; exit 2; }
python3 -c "import numpy, PIL" 2>/dev/null || { echo "batch-vs-queue: needs numpy and Pillow (../shared/bench/setup.sh)" >&2; exit 2; }
bin=$(scripts/build-release.sh evanesco)/evanesco
work=$(mktemp -d /tmp/evanesco-bvq.XXXXXX); trap 'rm -rf "$work"' EXIT
python3 - "$work" "$jobs" <<'PY'
import json, os, sys
import numpy as np
from PIL import Image
work, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
lines = []
for i in range(n):
    if i % 4 != 3:
        d = f"{work}/in/b{i}"; os.makedirs(d)
        scene = (rng.random((60, 80, 3)) * 255).astype(np.uint8).repeat(8, 0).repeat(8, 1)
        for f in range(8):
            img = scene.copy(); x = 40 + f * 60
            img[200:300, x:x + 60] = (250, 40, 40)
            Image.fromarray(img).save(f"{d}/f{f}.png", compress_level=1)
        lines.append({"id": f"s{i}", "kind": "stack", "inputs": [f"in/b{i}"], "output": f"out/s{i}.jpg"})
    else:
        os.makedirs(f"{work}/in", exist_ok=True)
        y, x = np.mgrid[0:768, 0:1024]
        photo = np.stack([(x * 255 // 1024), (y * 255 // 768), ((x + y + i) % 256)], -1).astype(np.uint8)
        Image.fromarray(photo).save(f"{work}/in/p{i}.png", compress_level=1)
        Image.fromarray((255 - x * 255 // 1024).astype(np.uint8)).save(f"{work}/in/p{i}-d.png", compress_level=1)
        lines.append({"id": f"p{i}", "kind": "portrait", "inputs": [f"in/p{i}.png", f"in/p{i}-d.png"], "output": f"out/p{i}.jpg",
                      "options": {"effect": "blur", "focus": 0.7}})
os.makedirs(f"{work}/out")
open(f"{work}/jobs.jsonl", "w").write("\n".join(json.dumps(l) for l in lines) + "\n")
PY
fresh() { rm -rf "$work/out" "$work/jobs.jsonl.state"; mkdir "$work/out"; }
local1=(); local2=(); queue1=(); queue2=()
for r in $(seq 1 "$rounds"); do
    fresh; s=$(date +%s.%N); "$bin" batch run "$work/jobs.jsonl" --jobs 1 --quiet >/dev/null; local1+=("$(elapsed "$s")")
    fresh; s=$(date +%s.%N); "$bin" batch run "$work/jobs.jsonl" --jobs 2 --quiet >/dev/null; local2+=("$(elapsed "$s")")
    for w in 1 2; do
        fresh; q="$url?schema=bvq_$$_${r}_$w"
        s=$(date +%s.%N)
        "$bin" batch submit "$work/jobs.jsonl" --queue "$q" >/dev/null
        pids=()
        for _ in $(seq 1 $w); do "$bin" worker --queue "$q" --exit-when-done --quiet --poll 0.2 >/dev/null & pids+=($!); done
        wait "${pids[@]}"
        t=$(elapsed "$s")
        if [ $w = 1 ]; then queue1+=("$t"); else queue2+=("$t"); fi
        done=$("$bin" batch status --queue "$q" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['done'])")
        [ "$done" = "$jobs" ] || { echo "batch-vs-queue: only $done of $jobs jobs done through the queue" >&2; exit 1; }
    done
    echo "round $r: batch run --jobs 1 ${local1[-1]} s, --jobs 2 ${local2[-1]} s; queue 1 worker ${queue1[-1]} s, 2 workers ${queue2[-1]} s"
done
l1=$(median "${local1[@]}"); l2=$(median "${local2[@]}"); q1=$(median "${queue1[@]}"); q2=$(median "${queue2[@]}")
echo "medians over $rounds rounds, $jobs jobs ($(grep -c '"stack"' "$work/jobs.jsonl") stacks, $(grep -c '"portrait"' "$work/jobs.jsonl") portraits):"
echo "  batch run --jobs 1: $l1 s ($(python3 -c "print(round($jobs/$l1, 1))") jobs/s)"
echo "  batch run --jobs 2: $l2 s ($(python3 -c "print(round($jobs/$l2, 1))") jobs/s)"
echo "  queue, 1 worker:    $q1 s ($(python3 -c "print(round($jobs/$q1, 1))") jobs/s), ratio to batch run --jobs 1: $(ratio "$q1" "$l1")"
echo "  queue, 2 workers:   $q2 s ($(python3 -c "print(round($jobs/$q2, 1))") jobs/s), ratio to batch run --jobs 2: $(ratio "$q2" "$l2")"
bytes=$(psql "$url" -Atc "SELECT pg_total_relation_size('bvq_$$_1_1.jobs') / (SELECT count(*) FROM bvq_$$_1_1.jobs)")
report=$(psql "$url" -Atc "SELECT avg(pg_column_size(report))::int FROM bvq_$$_1_1.jobs")
echo "  the database holds $bytes bytes per job (table, TOAST and indexes; the report alone $report bytes compressed)"
