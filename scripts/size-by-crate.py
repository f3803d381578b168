#!/usr/bin/env python3
"""Size of a binary's code per crate, from its symbol table (like `cargo bloat --crates`).

    scripts/size-by-crate.py BINARY [N]

BINARY must still have its symbols (build with CARGO_PROFILE_RELEASE_STRIP=false). Each
function symbol's size is attributed to the crate that its demangled path starts with; for
trait implementations, `<a::T as b::Tr>::f`, the crate of the implementing type `a` (or of the
trait, for a generic type). C and assembly symbols (ring's, the C library's) count as `[C]`.
Prints the N largest (20).
"""
import re
import subprocess
import sys
from collections import Counter


def crate_of(name: str) -> str:
    name = name.lstrip("<&*")
    name = re.sub(r"^(mut |const |dyn |unsafe |extern \"C\" )+", "", name)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name) or re.search(
        r"([A-Za-z_][A-Za-z0-9_]*)::", name
    )
    if not m:
        return "[C]"
    crate = m.group(1)
    return {"core": "std", "alloc": "std", "std": "std"}.get(crate, crate)


def main() -> None:
    binary = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    out = subprocess.run(
        ["nm", "-S", "-C", "--defined-only", binary],
        check=True, capture_output=True, text=True,
    ).stdout
    sizes: Counter = Counter()
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2].lower() not in ("t", "w"):
            continue
        sizes[crate_of(parts[3])] += int(parts[1], 16)
    total = sum(sizes.values())
    print(f"{'KiB':>8} {'share':>6}  crate   (functions: {total / 1024:.0f} KiB)")
    for crate, size in sizes.most_common(top):
        print(f"{size / 1024:8.0f} {100 * size / total:5.1f}%  {crate}")


if __name__ == "__main__":
    main()
