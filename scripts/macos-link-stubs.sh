#!/usr/bin/env bash
# Regenerates the macOS link stubs in scripts/macos-frameworks/ from the symbols the plugin's
# macOS link leaves undefined. Run it when a dependency change makes the darwin link fail with
# "undefined symbol" (scripts/release.sh then stops at darwin/*).
#
#   scripts/macos-link-stubs.sh
#
# Why: rustls' platform verifier and native roots (security-framework, core-foundation) link
# the Security and CoreFoundation frameworks. zig links Mach-O without an Apple SDK, but it
# needs each framework's exported symbols, which only the SDK ships. A text stub
# (<Name>.framework/<Name>.tbd, TAPI format) naming the framework's install name and the
# symbols we use is enough: the binary then loads the real framework on the user's Mac.
#
# How: link aarch64-apple-darwin against stubs that export nothing, collect every symbol the
# linker reports undefined, give each to its framework by prefix (Sec/kSec/SSL → Security,
# CF/kCF/__CF → CoreFoundation; anything else is an error to resolve by hand), write stubs for
# both macOS architectures, and link again to confirm. Needs the set-up in docs/releasing.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/scripts/macos-frameworks"
triple=aarch64-apple-darwin

write_stub() { # name install-name symbols...
  local name=$1 install=$2; shift 2
  mkdir -p "$dir/$name.framework"
  {
    echo "--- !tapi-tbd"
    echo "# Link stub for $name.framework, written by scripts/macos-link-stubs.sh: the symbols"
    echo "# this project uses. Not Apple's file; regenerate it instead of editing it."
    echo "tbd-version:     4"
    echo "targets:         [ x86_64-macos, arm64-macos ]"
    echo "install-name:    '$install'"
    if [ $# -gt 0 ]; then
      echo "exports:"
      echo "  - targets:         [ x86_64-macos, arm64-macos ]"
      echo "    symbols:         [ $(printf '%s, ' "$@" | sed 's/, $//') ]"
    fi
    echo "..."
  } > "$dir/$name.framework/$name.tbd"
}

link() {
  (cd "$root" && env MACOSX_DEPLOYMENT_TARGET=11.0 \
    "CARGO_TARGET_AARCH64_APPLE_DARWIN_RUSTFLAGS=-C link-arg=-F$dir" \
    cargo zigbuild --release --locked --target "$triple" --bin kubectl-appupdate)
}

security=/System/Library/Frameworks/Security.framework/Versions/A/Security
corefoundation=/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation

write_stub Security "$security"
write_stub CoreFoundation "$corefoundation"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if link >"$log" 2>&1; then
  echo "macos-link-stubs: the link needs no framework symbol at all; the stubs are empty" >&2
  exit 0
fi
# zig reports each as "error: undefined symbol: _Name".
mapfile -t undefined < <(grep -o 'undefined symbol: [_A-Za-z0-9$.]*' "$log" | sed 's/.*: //' | sort -u)
[ ${#undefined[@]} -gt 0 ] || { cat "$log" >&2; echo "macos-link-stubs: the link failed for another reason (above)" >&2; exit 1; }

sec=(); cf=(); other=()
for s in "${undefined[@]}"; do
  case "$s" in
    _Sec*|_kSec*|_SSL*) sec+=("$s") ;;
    _CF*|_kCF*|___CF*) cf+=("$s") ;;
    *) other+=("$s") ;;
  esac
done
[ ${#other[@]} -eq 0 ] || {
  echo "macos-link-stubs: undefined symbols of no known framework: ${other[*]}" >&2
  echo "(a dependency needs another framework or library: add its stub here)" >&2
  exit 1
}
write_stub Security "$security" "${sec[@]}"
write_stub CoreFoundation "$corefoundation" "${cf[@]}"
echo "macos-link-stubs: Security ${#sec[@]} symbols, CoreFoundation ${#cf[@]} symbols; linking again" >&2
link
echo "macos-link-stubs: done; commit scripts/macos-frameworks/" >&2
