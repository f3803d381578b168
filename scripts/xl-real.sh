#!/usr/bin/env bash
# The XL scenario (crates/bench/src/xl.rs) against a real API server and the sandbox, in one run.
#
#   scripts/xl-real.sh [options] PLUGIN [PLUGIN…]
#
# Loads the XL state (the Deployment, Service and HPA of app `web`, 1 000 managed Ingresses with
# 10 paths each, created with the plugin's field manager as the plugin would have created them,
# and the demo's unmanaged Ingress) into a namespace of the real server, starts the benchmark's
# XL sandbox (`appupdate-bench --xl-serve`), and runs
#   PLUGIN web -n NS --endpoints FILE --dry-run -o json --image-check off --color never
# RUNS times against each, the PLUGINs alternating run by run (old and new builds compare under
# the same load). Every run is measured by `appupdate-bench --peak-rss` (getrusage of exactly one
# child: CPU user + system, peak RSS, wall). Prints one line per run and the medians, and checks
# that every PLUGIN's standard output is byte for byte the first PLUGIN's on each server.
#
# Options:
#   --runs N            timed runs per PLUGIN and server (default 7)
#   --namespace NS      namespace on the real server (default xl-bench); created if missing,
#                       reloaded if it does not hold the XL state
#   --kubeconfig FILE   the real server (default /work/realk8s133/kubeconfig)
#   --context NAME      its context (default admin)
#   --kubectl BIN       kubectl for loading (default: the one beside the kubeconfig, else PATH)
#   --bench BIN         appupdate-bench (default target/release/appupdate-bench)
#   --no-sandbox        real server only
#   --delete            delete the namespace at the end
#   --keep DIR          keep the work files (endpoints, outputs, objects) in DIR
#
# Example (docs/performance.md, "What was changed in the plugin, and why", item 19):
#   cargo build --release -p kubectl-appupdate -p appupdate-bench
#   scripts/xl-real.sh --runs 9 --namespace xl-bench --delete target/release/kubectl-appupdate
# Old against new: copy each build's binary aside and name both; they alternate run by run.
set -euo pipefail

runs=7
ns=xl-bench
kubeconfig=/work/realk8s133/kubeconfig
context=admin
kubectl=
bench=
sandbox=1
delete=0
keep=
plugins=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --namespace) ns=$2; shift 2 ;;
        --kubeconfig) kubeconfig=$2; shift 2 ;;
        --context) context=$2; shift 2 ;;
        --kubectl) kubectl=$2; shift 2 ;;
        --bench) bench=$2; shift 2 ;;
        --no-sandbox) sandbox=0; shift ;;
        --delete) delete=1; shift ;;
        --keep) keep=$2; shift 2 ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        -*) echo "xl-real.sh: unknown option $1" >&2; exit 2 ;;
        *) plugins+=("$(realpath "$1")"); shift ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
[ ${#plugins[@]} -gt 0 ] || plugins=("$root/target/release/kubectl-appupdate")
bench=${bench:-$root/target/release/appupdate-bench}
if [ -z "$kubectl" ]; then
    kubectl=$(dirname "$kubeconfig")/bin/kubectl
    [ -x "$kubectl" ] || kubectl=kubectl
fi
for p in "${plugins[@]}" "$bench"; do
    [ -x "$p" ] || { echo "xl-real.sh: $p is not an executable" >&2; exit 2; }
done

work=${keep:-$(mktemp -d)}
mkdir -p "$work/home"
fifo=$work/serve.stdin
rm -f "$fifo"; mkfifo "$fifo"
serve_pid=
cleanup() {
    exec 9>&- 2>/dev/null || true
    if [ -n "$serve_pid" ]; then wait "$serve_pid" 2>/dev/null || true; fi
    if [ "$delete" = 1 ]; then
        "$kubectl" --kubeconfig "$kubeconfig" --context "$context" delete ns "$ns" --wait=false >/dev/null 2>&1 || true
    fi
    [ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT

# The sandbox (also writes the endpoints file and the objects for the real server).
"$bench" --xl-serve "$work" <"$fifo" 2>"$work/serve.log" &
serve_pid=$!
exec 9>"$fifo"
for _ in $(seq 600); do
    grep -q "XL sandbox at" "$work/serve.log" 2>/dev/null && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
    sleep 0.1
done
grep -q "XL sandbox at" "$work/serve.log" || { echo "xl-real.sh: the sandbox did not start" >&2; exit 1; }

k() { "$kubectl" --kubeconfig "$kubeconfig" --context "$context" "$@"; }
want=$(python3 -c 'import json,sys; print(sum(1 for i in json.load(open(sys.argv[1]))["items"] if i["kind"]=="Ingress"))' "$work/objects-xl.json")
k get ns "$ns" >/dev/null 2>&1 || k create ns "$ns" >/dev/null
have=$(k -n "$ns" get ingress -o name 2>/dev/null | wc -l)
if [ "$have" != "$want" ] || ! k -n "$ns" get deployment/web service/web hpa/web >/dev/null 2>&1; then
    echo "loading the XL state into namespace $ns ($want Ingresses)…" >&2
    k -n "$ns" delete ingress,deployment,service,hpa --all --wait=true >/dev/null
    k -n "$ns" create --field-manager=kubectl-appupdate -f "$work/objects-xl.json" >/dev/null
fi

common=(--endpoints "$work/endpoints-xl.yaml" --dry-run -o json --color never --image-check off)
args_real=(web --kubeconfig "$kubeconfig" --context "$context" -n "$ns" "${common[@]}")
args_sandbox=(web --kubeconfig "$work/kubeconfig-xl" -n demo "${common[@]}")
targets=(real)
[ "$sandbox" = 1 ] && targets+=(sandbox)

scrubbed() { env -i PATH="$PATH" HOME="$work/home" NO_COLOR=1 "$@"; }

# One untimed run per plugin and server: the outputs, compared byte for byte.
for t in "${targets[@]}"; do
    eval "a=(\"\${args_$t[@]}\")"
    for i in "${!plugins[@]}"; do
        scrubbed "${plugins[$i]}" "${a[@]}" >"$work/out-$t-$i.json" 2>"$work/err-$t-$i.txt" ||
            { echo "xl-real.sh: ${plugins[$i]} failed against $t:" >&2; cat "$work/err-$t-$i.txt" >&2; exit 1; }
        if [ "$i" -gt 0 ]; then
            if cmp -s "$work/out-$t-0.json" "$work/out-$t-$i.json"; then
                echo "output on $t: ${plugins[$i]} = ${plugins[0]} (byte for byte, $(wc -c <"$work/out-$t-0.json") bytes)"
            else
                echo "output on $t: ${plugins[$i]} DIFFERS from ${plugins[0]}"
            fi
        fi
    done
done

# The timed runs, alternating plugins and servers.
results=$work/results.txt
: >"$results"
for r in $(seq "$runs"); do
    for t in "${targets[@]}"; do
        eval "a=(\"\${args_$t[@]}\")"
        for i in "${!plugins[@]}"; do
            line=$(scrubbed "$bench" --peak-rss "${plugins[$i]}" "${a[@]}")
            read -r rss code cpu wall <<<"$line"
            [ "$code" = 0 ] || { echo "xl-real.sh: run $r of ${plugins[$i]} against $t exited $code" >&2; exit 1; }
            echo "$t $i $cpu $rss $wall" >>"$results"
            printf 'run %d %-7s %s: cpu %6.1f ms  rss %6.1f MiB  wall %6.1f ms\n' \
                "$r" "$t" "${plugins[$i]}" "$cpu" "$(echo "$rss/1024" | bc -l)" "$wall"
        done
    done
done

python3 - "$results" "${plugins[@]}" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
plugins = sys.argv[2:]
print(f"\n{'server':8} {'plugin':40} {'runs':>4} {'CPU ms median (min-max)':>26} {'peak RSS MiB':>13} {'wall ms':>8}")
for t in dict.fromkeys(r[0] for r in rows):
    for i, p in enumerate(plugins):
        xs = [r for r in rows if r[0] == t and int(r[1]) == i]
        cpu = [float(r[2]) for r in xs]
        rss = [int(r[3]) / 1024 for r in xs]
        wall = [float(r[4]) for r in xs]
        rng = f"{statistics.median(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f})"
        print(f"{t:8} {p[-40:]:40} {len(xs):>4} {rng:>26} {statistics.median(rss):>13.1f} {statistics.median(wall):>8.1f}")
EOF
