#!/usr/bin/env python3
"""List the dependencies between a Rust crate's top-level modules and print their cycles.

Usage: scripts/module-cycles.py <crate-src-dir> [--edges]

A dependency is any path in code (not in comments or string literals) that starts with
`crate::` or `super::` and names an item of another top-level module: `use crate::store::State;`,
`crate::status::not_found(..)`, `use crate::{kinds, status::FieldError};`, or `super::x` in a
top-level file (which is the crate root); in the root, also a bare `module::` path. Items defined in the crate root itself (lib.rs) count as
a dependency on the node `(root)`, so a module that uses a type declared in lib.rs while lib.rs
declares or re-exports that module shows up as a cycle.

Top-level modules are the `mod` declarations of lib.rs (or main.rs when there is no lib.rs); a
module's files are `<name>.rs` and everything under `<name>/`. A main.rs next to a lib.rs is its
own crate (it reaches the library by name, not by `crate::`) and is left out.

Prints the number of edges, every edge with `--edges`, then each elementary cycle (at most 100)
and exits 1 when there is at least one.
"""

import os
import re
import sys

ROOT = "(root)"


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals, keeping everything else."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and nxt == "*":
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            i += len(m.group(0))
            out.append("' '")
        elif c == "'" and re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:]):
            m = re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:])
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level_modules(src):
    for root_file in ("lib.rs", "main.rs"):
        path = os.path.join(src, root_file)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                code = strip_comments_and_strings(f.read())
            mods = re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", code, re.M)
            return root_file, mods
    sys.exit(f"{src}: neither lib.rs nor main.rs")


def files_of(src, mod):
    single = os.path.join(src, mod + ".rs")
    if os.path.exists(single):
        yield single, [mod]
    folder = os.path.join(src, mod)
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            yield os.path.join(dirpath, name), rel


def group_items(body):
    """The first segment of each item of a `{…}` use-group (`a::b, c, d::{e, f}` → a, c, d)."""
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        elif depth == 0:
            cur += ch
    items.append(cur)
    return [m.group(1) for m in (re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", it) for it in items) if m]


def balanced(text, start):
    """The text inside the braces opening at `start`."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : j]
    return text[start + 1 :]


def inline_modules(code):
    """(start, end, name) of every `mod name { … }` block."""
    spans = []
    for m in re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{", code):
        start = m.end() - 1
        spans.append((start, start + len(balanced(code, start)) + 2, m.group(1)))
    return spans


def targets(code, module_path, modules):
    """Top-level modules (or ROOT) that the code of a file at `module_path` refers to."""
    found = set()
    spans = inline_modules(code)
    for m in re.finditer(r"(?<![A-Za-z0-9_$])(crate|super)((?:\s*::\s*super)*)\s*::\s*", code):
        if m.group(1) == "crate":
            base = []
        else:
            ups = 1 + m.group(2).count("super")
            here = module_path + [name for (a, b, name) in spans if a < m.start() < b]
            # `super` of a module is its parent; of the crate root nothing.
            base = here[: max(len(here) - ups, 0)]
        rest = code[m.end() :]
        if rest.startswith("{"):
            heads = group_items(balanced(rest, 0))
        else:
            h = re.match(r"([A-Za-z_][A-Za-z0-9_]*)", rest)
            heads = [h.group(1)] if h else []
        for head in heads:
            path = base + [head] if head != "self" else base
            if not path:
                continue
            top = path[0]
            if len(base) == 0:
                found.add(top if top in modules else ROOT)
            else:
                found.add(top)
    return found


def elementary_cycles(graph, limit=100):
    """Johnson's algorithm, on the nodes in sorted order; at most `limit` cycles."""
    nodes = sorted(graph)
    cycles = []
    for idx, start in enumerate(nodes):
        allowed = set(nodes[idx:])
        stack, blocked, blocked_by = [start], {start}, {}

        def unblock(u):
            blocked.discard(u)
            for w in blocked_by.pop(u, set()):
                if w in blocked:
                    unblock(w)

        def circuit(v):
            closed = False
            for w in sorted(graph[v] & allowed):
                if w == start:
                    cycles.append(list(stack))
                    closed = True
                    if len(cycles) >= limit:
                        return True
                elif w not in blocked:
                    stack.append(w)
                    blocked.add(w)
                    if circuit(w):
                        closed = True
                    stack.pop()
                if len(cycles) >= limit:
                    return True
            if closed:
                unblock(v)
            else:
                for w in graph[v] & allowed:
                    blocked_by.setdefault(w, set()).add(v)
            return closed

        circuit(start)
        if len(cycles) >= limit:
            break
    return [c for c in cycles if len(c) > 1]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__.strip().splitlines()[2])
    src = args[0]
    root_file, modules = top_level_modules(src)
    graph = {m: set() for m in modules}
    # The root's `mod` declarations are not dependencies; what its code uses (`pub use`) is.
    with open(os.path.join(src, root_file), encoding="utf-8") as f:
        root_code = strip_comments_and_strings(f.read())
    graph[ROOT] = {t for t in targets(root_code, [], modules) if t != ROOT}
    # In the root, a module is also reached by its bare name (`pub use store::State;`).
    graph[ROOT] |= {m for m in modules if re.search(rf"(?<![A-Za-z0-9_:]){m}\s*::", root_code)}
    for mod in modules:
        for path, module_path in files_of(src, mod):
            with open(path, encoding="utf-8") as f:
                code = strip_comments_and_strings(f.read())
            for t in targets(code, module_path, modules):
                if t != mod:
                    graph[mod].add(t)
    print(f"{src}: {len(modules)} top-level modules, {sum(len(v) for v in graph.values())} dependencies between them and the root")
    if "--edges" in sys.argv:
        for a in sorted(graph):
            print(f"  {a} -> {', '.join(sorted(graph[a])) or '-'}")
    cycles = elementary_cycles(graph)
    if not cycles:
        print("no cycles")
        return 0
    print(f"{len(cycles)} cycle(s){' (first 100)' if len(cycles) >= 100 else ''}:")
    for c in sorted(cycles, key=lambda c: (len(c), c)):
        print("  " + " -> ".join(c + [c[0]]))
    return 1


if __name__ == "__main__":
    sys.exit(main())
