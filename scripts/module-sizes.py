#!/usr/bin/env python3
"""Lines per top-level module and the longest functions of a Rust crate.

Usage: scripts/module-sizes.py <crate-src-dir> [N]

Lines are physical lines of every file of a module (`<name>.rs` and `<name>/**`), tests included;
a function's length runs from its `fn` line to its closing brace. Prints the N (default 10)
longest functions with file:line.
"""

import importlib.util
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cycles", os.path.join(here, "module-cycles.py"))
cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cycles)


def functions(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    code = cycles.strip_comments_and_strings(text)
    # Stripping keeps line structure except inside literals; map by counting newlines in code.
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration without a body
        body = cycles.balanced(code, brace)
        start = code.count("\n", 0, m.start()) + 1
        end = code.count("\n", 0, brace + len(body) + 1) + 1
        yield m.group(1), start, end - start + 1


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2])
    src = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    root_file, modules = cycles.top_level_modules(src)
    rows, funcs = [], []
    for mod in modules:
        total = 0
        for path, _ in cycles.files_of(src, mod):
            with open(path, encoding="utf-8") as f:
                total += sum(1 for _ in f)
            funcs += [(length, os.path.relpath(path, src), line, name) for name, line, length in functions(path)]
        rows.append((total, mod))
    with open(os.path.join(src, root_file), encoding="utf-8") as f:
        rows.append((sum(1 for _ in f), f"({root_file})"))
    funcs += [(length, root_file, line, name) for name, line, length in functions(os.path.join(src, root_file))]
    print(f"{'lines':>6}  module")
    for total, mod in sorted(rows, reverse=True):
        print(f"{total:>6}  {mod}")
    print(f"{sum(t for t, _ in rows):>6}  total")
    print(f"\n{n} longest functions (lines):")
    for length, path, line, name in sorted(funcs, reverse=True)[:n]:
        print(f"{length:>6}  {name}  ({path}:{line})")


if __name__ == "__main__":
    main()
