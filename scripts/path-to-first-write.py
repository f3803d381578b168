#!/usr/bin/env python3
"""The path a reader follows from main() to the first writing request of a run.

Runs the debug build of the plugin under gdb with a breakpoint on every function of the
workspace's own crates (kubectl_appupdate, appupdate_*), in the order they are first entered,
until the first request that writes (appupdate_kube::cluster::Cluster::patch, create or delete:
a dry run or a real write). Each function is listed once, at its first entry (a reader reads a
function once), and the file switches are counted: how many times the next function read lives
in another file than the one before it. The spine is the call stack at that first write,
from main() down: the chain a reader follows to get from the entry point to the request,
without the helpers each step calls on the way.

    python3 scripts/path-to-first-write.py [--list] -- ARGS…     (the plugin's arguments)

e.g. against any cluster that has the application:
    python3 scripts/path-to-first-write.py -- web -n shop --image registry.example.com/web:9 --yes

Needs gdb and `cargo build` (the debug binary target/debug/kubectl-appupdate).
Trait plumbing that is not part of the path (Display/Debug/serde/Drop/Clone impls, closures
and async state machines re-entered on every poll) is left out.
"""
import json, os, re, subprocess, sys, tempfile

GDB_SCRIPT = r'''
import gdb, json, re
gdb.execute("set pagination off")
gdb.execute("set confirm off")
funcs = json.load(open(FUNCS))
# A position-independent executable: the addresses nm gives are offsets from where it loads.
gdb.execute("starti", to_string=True)
base = None
for line in gdb.execute("info proc mappings", to_string=True).splitlines():
    cols = line.split()
    if len(cols) >= 5 and cols[-1].endswith("kubectl-appupdate") and cols[0].startswith("0x"):
        base = int(cols[0], 16) - int(cols[3], 16)
        break
by_addr = {}
for addr, name in funcs:
    at = int(addr, 16) + (base or 0)
    gdb.execute("break *" + hex(at), to_string=True)
    by_addr[at] = name
seen = set(); order = []; spine = []
OURS = r"^(kubectl_appupdate|appupdate_(shell|model|plan|render|kube))::"
def norm(fname):
    # gdb names an async function's poll `f::{async_fn#0}`, its closures `{closure#N}` and
    # `{async_block#N}`, impl blocks `{impl#N}`: the function is what a reader reads.
    fname = re.sub(r"::\{(async_fn|closure|async_block)#\d+\}", "", fname or "")
    fname = re.sub(r"::\{impl#\d+\}", "", fname)
    return re.sub(r"<.*>$", "", fname)
def caller_of(frame):
    me = norm(frame.name())
    fr = frame.older()
    while fr is not None:
        n = norm(fr.name())
        if re.match(OURS, n) and n != me:
            return n
        fr = fr.older()
    return ""
gdb.execute("continue", to_string=True)
while True:
    try:
        f = gdb.selected_frame()
        pc = f.pc()
    except gdb.error:
        break
    name = by_addr.get(pc)
    if name is not None and name not in seen:
        seen.add(name)
        sal = f.find_sal()
        path = sal.symtab.filename if sal and sal.symtab else ""
        order.append((name, path, caller_of(f)))
    if name and re.search(r"appupdate_kube::cluster::Cluster::(patch|create|delete)$", name):
        # The spine: the workspace's frames on the stack at the first write, outermost first
        # (an async function's frames are its poll closures: named after the function).
        spine = []
        fr = gdb.newest_frame()
        while fr is not None:
            fname = norm(fr.name())
            if re.match(OURS, fname):
                sal = fr.find_sal()
                fpath = sal.symtab.filename if sal and sal.symtab else ""
                if "/.cargo/registry/" not in fpath and (not spine or spine[-1][0] != fname):
                    spine.append((fname, fpath))
            fr = fr.older()
        spine.reverse()
        break
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error:
        break
with open(OUT, "w") as fh:
    json.dump({"order": order, "spine": spine}, fh)
gdb.execute("kill")
'''

def main():
    args = sys.argv[1:]
    listing = "--list" in args
    if "--" in args:
        args = args[args.index("--") + 1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # Full debug information for the workspace's own crates (the dev profile keeps line tables
    # only, which do not name functions by their paths).
    env = dict(os.environ, CARGO_PROFILE_DEV_DEBUG="2")
    subprocess.run(["cargo", "build", "-q", "--locked", "--bin", "kubectl-appupdate"], cwd=root, check=True, env=env)
    binary = os.path.join(root, "target", "debug", "kubectl-appupdate")
    # Every function of the workspace's crates (demangled, generic instances and all), less
    # trait plumbing and async state machines (their constructors stay: where a reader goes).
    skip = re.compile(r"\{\{closure\}\}|::fmt$|Serialize|Deserialize|serialize|deserialize|"
                      r"drop_in_place|Visitor|<impl (core::|alloc::|std::)")
    ours = re.compile(r"^(kubectl_appupdate|appupdate_(shell|model|plan|render|kube))::")
    funcs = []
    for line in subprocess.run(["nm", "-C", binary], capture_output=True, text=True).stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in ("t", "T") and ours.search(parts[2]) and not skip.search(parts[2]):
            funcs.append(("0x" + parts[0], parts[2]))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "order.json")
        script = os.path.join(d, "trace.py")
        fpath = os.path.join(d, "funcs.json")
        json.dump(funcs, open(fpath, "w"))
        with open(script, "w") as fh:
            fh.write("OUT = %r\nFUNCS = %r\n" % (out, fpath) + GDB_SCRIPT)
        gdb = subprocess.run(["gdb", "-q", "-batch", "-x", script, "--args", binary] + args,
                             capture_output=True, text=True)
        if not os.path.exists(out):
            sys.exit("gdb did not finish the trace:\n" + gdb.stderr[-3000:])
        traced = json.load(open(out))
    order, spine = traced["order"], traced["spine"]
    rel = lambda path: os.path.relpath(path, root) if os.path.isabs(path) else path
    files = [rel(path) for _, path, _ in order]
    spine_files = [rel(path) for _, path in spine]
    switches = sum(1 for a, b in zip(files, files[1:]) if a != b)
    # The steps: each function the spine's functions call directly, at its first entry, in
    # order, with the spine itself: what a reader reads who reads each function on the way
    # from main() to the request, and not what the functions it calls call in turn.
    on_spine = {name for name, _ in spine}
    steps = []
    for (name, path, caller) in order:
        short = re.sub(r"<.*?>", "", name)
        if caller in on_spine or short in on_spine:
            steps.append((name, rel(path)))
    step_files = [f for _, f in steps]
    step_switches = sum(1 for a, b in zip(step_files, step_files[1:]) if a != b)
    spine_switches = sum(1 for a, b in zip(spine_files, spine_files[1:]) if a != b)
    if listing:
        for (name, _, _), f in zip(order, files):
            print(f"{f}\t{name}")
        print("--- the steps: the spine and what each of its functions calls, in order")
        for name, f in steps:
            print(f"{f}\t{name}")
        print("--- the spine: the call stack at the first write, outermost first")
        for (name, _), f in zip(spine, spine_files):
            print(f"{f}\t{name}")
    print(f"every function entered: {len(order)} functions, {len(set(files))} files, {switches} file switches")
    print(f"the steps (the spine and its direct calls): {len(steps)} functions, {len(set(step_files))} files, {step_switches} file switches")
    print(f"the spine (main to the first write): {len(spine)} functions, {len(set(spine_files))} files, {spine_switches} file switches")
    entered = {}
    prev = None
    for f in files:
        if f != prev:
            entered[f] = entered.get(f, 0) + 1
        prev = f
    top = sorted(entered.items(), key=lambda kv: -kv[1])[:5]
    print("entered most often: " + ", ".join(f"{f} {n}×" for f, n in top))

if __name__ == "__main__":
    main()
