#!/usr/bin/env python3
"""Checks the layout rules the formatters cannot: no line over 120 columns in Swift, C or
JavaScript (nor the page's HTML and CSS), no Swift file over 600 lines, no Swift function over 80
lines, and every script of the page parses (node --check). The C sources are checked by
clang-format against .clang-format when it is installed (scripts/install-deps.sh installs it).

What breaks a rule today is listed in scripts/layout-debt.txt, one line each, with its size: a
listed item may shrink but not grow, a new item fails, and an item that no longer breaks its rule
must be removed from the list, so the list only gets shorter.
    scripts/check-layout.py            check (exit 1 on a new or grown item)
    scripts/check-layout.py --write    rewrite the list from today's tree (after paying debt)
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEBT = os.path.join(ROOT, "scripts", "layout-debt.txt")
COLUMNS, FILE_LINES, FUNCTION_LINES = 120, 600, 80
SOURCES = (".swift", ".c", ".h", ".js", ".html", ".css")
FUNCTION = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|internal|fileprivate|package|static|final|override|"
    r"mutating|nonisolated|convenience|required|class|open)\s+)*(func\s+[^\s(<]+|init[?!]?|deinit|subscript)\s*[(<]")


def tracked():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p.endswith(SOURCES) and not p.startswith(".build")]


def code(line):
    """The line without string literals and // comments, for counting braces."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    i = line.find("//")
    return line[:i] if i >= 0 else line


def functions(lines):
    """(name, first line, length) of each Swift function, by its braces."""
    found = []
    for i, line in enumerate(lines):
        m = FUNCTION.match(line)
        if not m:
            continue
        depth, started, in_text = 0, False, False
        for j in range(i, len(lines)):
            if lines[j].count('"""') % 2:
                in_text = not in_text
                continue
            if not in_text:
                for ch in code(lines[j]):
                    if ch == "{":
                        depth, started = depth + 1, True
                    elif ch == "}":
                        depth -= 1
            if started and depth <= 0:
                found.append((m.group(1), i + 1, j - i + 1))
                break
    return found


def measure():
    """Every item over its limit: {(rule, where): size}."""
    items = {}
    for path in tracked():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
        long_lines = sum(1 for l in lines if len(l) > COLUMNS)
        if long_lines:
            items[("lines-over-120", path)] = long_lines
        if path.endswith(".swift"):
            if len(lines) > FILE_LINES:
                items[("file-lines", path)] = len(lines)
            for name, _, size in functions(lines):
                if size > FUNCTION_LINES:
                    key = ("function-lines", f"{path}:{name.replace('func ', '')}")
                    items[key] = max(items.get(key, 0), size)
    return items


def read_debt():
    debt = {}
    if os.path.exists(DEBT):
        for line in open(DEBT, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                rule, where, size = line.rsplit(" ", 2)[0], line.rsplit(" ", 2)[1], int(line.rsplit(" ", 2)[2])
                debt[(rule, where)] = size
    return debt


def main():
    items = measure()
    if "--write" in sys.argv:
        with open(DEBT, "w", encoding="utf-8") as f:
            f.write("# Layout debt (scripts/check-layout.py): rule, where, size today. Shrink it, never grow it.\n")
            for (rule, where), size in sorted(items.items()):
                f.write(f"{rule} {where} {size}\n")
        print(f"check-layout: {len(items)} items written to {os.path.relpath(DEBT, ROOT)}")
        return 0
    debt, problems = read_debt(), []
    for key, size in sorted(items.items()):
        allowed = debt.get(key)
        if allowed is None:
            problems.append(f"{key[1]}: {key[0]} {size} (limits: {COLUMNS} columns, {FILE_LINES} lines a file, "
                            f"{FUNCTION_LINES} a function)")
        elif size > allowed:
            problems.append(f"{key[1]}: {key[0]} grew from {allowed} to {size}")
    for key in sorted(set(debt) - set(items)):
        problems.append(f"{key[1]}: {key[0]} is within its limit now: remove it from scripts/layout-debt.txt")
    for path in tracked():
        if path.endswith(".js") and shutil.which("node"):
            r = subprocess.run(["node", "--check", os.path.join(ROOT, path)], capture_output=True, text=True)
            if r.returncode:
                problems.append(f"{path}: does not parse: {r.stderr.strip().splitlines()[-1]}")
    if shutil.which("clang-format"):
        c_files = [os.path.join(ROOT, p) for p in tracked() if p.endswith((".c", ".h"))]
        r = subprocess.run(["clang-format", "--dry-run", "-Werror", *c_files], capture_output=True, text=True)
        if r.returncode:
            first = r.stderr.strip().splitlines()[:3]
            problems.append("C sources differ from .clang-format (clang-format -i fixes them): " + " / ".join(first))
    else:
        print("check-layout: clang-format is not installed: the C sources' format was not checked", file=sys.stderr)
    for p in problems:
        print("check-layout: " + p, file=sys.stderr)
    total = sum(debt.values())
    print(f"check-layout: {len(problems)} problems; debt: {len(debt)} items listed", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
