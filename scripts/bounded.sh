#!/usr/bin/env bash
# Runs a command with a time limit, its output shown and kept in a log; if the limit passes, the
# command and everything it started are stopped and the tests that started and never finished
# are named (from swift-testing's "◇ Test ... started." lines), so a hang costs minutes and says
# where it is instead of using up CI's whole budget.
#   scripts/bounded.sh SECONDS LOG COMMAND [ARG...]
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: scripts/bounded.sh SECONDS LOG COMMAND [ARG...]" >&2; exit 64; }
limit=$1 log=$2; shift 2
mkdir -p "$(dirname "$log")"
# timeout puts the command in a process group of its own and signals the whole group: the test
# runner, the servers and browsers the tests started, and the PostgreSQL wrapper (which stops its
# cluster on SIGTERM).
timeout --kill-after=30 "$limit" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "bounded: '$*' did not finish within $limit s and was stopped" >&2
    python3 - "$log" <<'EOF' >&2
import re, sys
started, ended = [], set()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"◇ Test (.+) started\.$", line.rstrip())
    if m:
        if m.group(1) != "run" and not m.group(1).startswith("case passing"):
            started.append(m.group(1))
        continue
    m = re.search(r"[✔✘↳] Test (.+?) (?:with \d+ test cases? )?(?:passed|failed|skipped)", line)
    if m:
        ended.add(m.group(1))
unfinished = [t for t in dict.fromkeys(started) if t not in ended]
print("bounded: tests started and never finished: " + (", ".join(unfinished) if unfinished else "none (the hang is outside a test)"))
EOF
fi
exit "$status"
