#!/usr/bin/env python3
"""The longest functions of the plugin's code (src/ and crates/appupdate-*/src, tests left
out): lines from the `fn` line to its closing brace, comments and blank lines included.

    python3 scripts/longest-functions.py [N]      (default 5)
"""
import os, re, sys

ROOTS = ["src", "crates/appupdate-shell/src", "crates/appupdate-model/src", "crates/appupdate-plan/src",
         "crates/appupdate-render/src", "crates/appupdate-kube/src"]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)")

def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    in_tests = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\s*#\[cfg\(test\)\]", line):
            return  # the tests module ends the file's production code here
        m = FN.match(line)
        if m:
            depth = 0; opened = False; j = i
            while j < len(lines):
                code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
                depth += code.count("{") - code.count("}")
                if "{" in code:
                    opened = True
                if opened and depth <= 0:
                    break
                if not opened and code.rstrip().endswith(";"):
                    break
                j += 1
            if opened:
                yield (j - i + 1, f"{path}:{i + 1}", m.group(6))
            i = j + 1
            continue
        i += 1

def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    found = []
    for r in ROOTS:
        for d, _, files in os.walk(r):
            for f in files:
                if f.endswith(".rs") and f != "tests.rs" and "/tests" not in d:
                    found.extend(functions(os.path.join(d, f)))
    for length, where, name in sorted(found, reverse=True)[:n]:
        print(f"{length:5d}  {name:32s} {where}")

if __name__ == "__main__":
    main()
