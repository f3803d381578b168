#!/usr/bin/env python3
"""Size and shape of a crate's modules: lines per module, the longest functions, and import
cycles between modules.

    scripts/module-metrics.py [SRC_DIR] [--top N]

SRC_DIR defaults to src/ (the plugin). A module is a file (`src/plan.rs` is `plan`,
`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; the first path segment after `crate::` names the
module that is depended on, so `crate::a::b::c` counts as a dependency on `a`). Only code
outside `#[cfg(test)]` items counts for functions and imports: tests may use anything. A
dependency is any `crate::NAME` path (in `use` or in code) and any `super::NAME` from a
file's top level. Cycles are the strongly connected components of that graph with more than
one module; the script exits 1 when there is one.
"""

import os
import re
import sys


def strip_code(text):
    """Replaces comments, strings and char literals with spaces (keeping newlines), so that
    braces and paths can be found by plain scanning."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'(b|c)?r#*"', text[i:i + 80]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(b|c)?r(#*)"', text[i:])
            end = '"' + m.group(2)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{1b}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def without_tests(code):
    """Blanks every item annotated `#[cfg(test)]` (a test module or function)."""
    out = list(code)
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        brace = code.find("{", m.end())
        semi = code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        end = matching_brace(code, brace)
        for k in range(m.start(), end + 1):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def module_name(src, path):
    rel = os.path.relpath(path, src)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(parts)


def functions(code, lines_of):
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        # The body starts at the first `{` after the signature, unless a `;` ends it first
        # (a trait method without a default body).
        j, depth = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "(<[":
                depth += 1
            elif ch in ")>]":
                depth -= 1
            elif ch == ";" and depth <= 0:
                break
            elif ch == "{" and depth <= 0:
                end = matching_brace(code, j)
                yield m.group(1), lines_of(m.start()), lines_of(end) - lines_of(m.start()) + 1
                break
            j += 1


def strongly_connected(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = 10
    if "--top" in sys.argv:
        top = int(sys.argv[sys.argv.index("--top") + 1])
    src = args[0] if args else "src"
    files = []
    for root, _, names in os.walk(src):
        files += [os.path.join(root, f) for f in names if f.endswith(".rs")]
    files.sort()

    modules = {}
    fns = []
    graph = {}
    names = {module_name(src, p).split("::")[0] for p in files}
    root_items = set()
    lib = os.path.join(src, "lib.rs")
    if os.path.exists(lib):
        root_code = strip_code(open(lib, encoding="utf-8").read())
        root_items = set(re.findall(
            r"^(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?(?:fn|struct|enum|const|static|type|trait)\s+([A-Za-z_][A-Za-z0-9_]*)",
            root_code, re.M))
    for path in files:
        text = open(path, encoding="utf-8").read()
        name = module_name(src, path)
        code = without_tests(strip_code(text))
        starts = [0] + [k + 1 for k, ch in enumerate(text) if ch == "\n"]

        def lines_of(pos, starts=starts):
            lo, hi = 0, len(starts) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if starts[mid] <= pos:
                    lo = mid
                else:
                    hi = mid - 1
            return lo + 1

        total = text.count("\n")
        non_test = sum(1 for line in code.split("\n") if line.strip())
        modules[name] = (total, non_test)
        for fname, line, length in functions(code, lines_of):
            fns.append((length, f"{os.path.relpath(path)}:{line}", fname))
        if name == "main":
            # The binary is its own crate; it only calls the library.
            modules[name] = (text.count("\n"), sum(1 for l in code.split("\n") if l.strip()))
            continue
        used = set(re.findall(r"\bcrate::([A-Za-z_][A-Za-z0-9_]*)", code))
        if name == "lib":
            # The crate root names its modules without `crate::`; `mod x;` declares, not uses.
            body = re.sub(r"^\s*(pub\s+)?mod\s+\w+\s*;", "", code, flags=re.M)
            used |= {m for m in re.findall(r"\b([a-z_][a-z0-9_]*)::", body) if m in names}
        deps = {("lib" if u in root_items else u) for u in used}
        if "::" not in name and name != "crate":
            # `super::x` from a top-level module's own top level is the crate root's `x`.
            deps |= set(re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?use\s+super::([a-z_][a-z0-9_]*)", code, re.M))
        top_name = name.split("::")[0]
        graph.setdefault(top_name, set()).update(d for d in deps if d != top_name)

    known = set(graph) | ({"lib"} if root_items else set())
    for k in graph:
        graph[k] = {d for d in graph[k] if d in known}

    print(f"Lines per module ({src}): total / non-blank outside tests")
    for name, (total, non_test) in sorted(modules.items(), key=lambda kv: -kv[1][0]):
        print(f"  {total:6} {non_test:6}  {name}")
    print(f"  {sum(t for t, _ in modules.values()):6} {sum(n for _, n in modules.values()):6}  (all)")
    print(f"\nThe {top} longest functions (lines, outside tests):")
    for length, where, fname in sorted(fns, reverse=True)[:top]:
        print(f"  {length:5}  {fname}  {where}")
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    print("\nImport cycles between modules:")
    if not cycles:
        print("  none")
    for c in cycles:
        print("  " + " <-> ".join(c))
    print("\nDependencies (module -> modules it uses):")
    for k in sorted(graph):
        print(f"  {k} -> {', '.join(sorted(graph[k])) or '-'}")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
