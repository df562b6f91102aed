#!/usr/bin/env python3
"""Set imp's upstream packetdrill results beside Linux's, by directory.

    tests/packetdrill/side-by-side.py LINUX.txt IMP.txt

Each file is the output of `run-upstream.sh` (with `linux` or a shim in place of the
shim argument) on the same machine. Prints a Markdown table of passes per directory,
then the scripts Linux passes and imp fails, with imp's first failing line.
"""
import re
import sys
from collections import defaultdict


def load(path):
    results = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^(PASS|FAIL) (\S+?\.pkt)(?::\s*(.*))?$", line.strip())
            if m:
                results[m.group(2)] = (m.group(1) == "PASS", m.group(3) or "")
    return results


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    linux, imp = load(sys.argv[1]), load(sys.argv[2])
    if set(linux) != set(imp):
        sys.exit("the two runs ran different scripts")
    rows = defaultdict(lambda: [0, 0, 0, 0])
    for script in linux:
        row = rows[script.split("/")[0]]
        row[0] += linux[script][0]
        row[1] += imp[script][0]
        row[2] += linux[script][0] and imp[script][0]
        row[3] += 1
    print("| directory | Linux | imp | both | scripts |")
    print("|---|---|---|---|---|")
    total = [0, 0, 0, 0]
    for name in sorted(rows):
        print("| %s | %d | %d | %d | %d |" % (name, *rows[name]))
        total = [a + b for a, b in zip(total, rows[name])]
    print("| **all** | **%d** | **%d** | **%d** | **%d** |" % tuple(total))
    print()
    print("Linux passes, imp fails:")
    for script in sorted(linux):
        if linux[script][0] and not imp[script][0]:
            print("- %s: %s" % (script, imp[script][1][:160]))


main()
