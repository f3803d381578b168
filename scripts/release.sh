#!/usr/bin/env bash
# Builds the release archives of kubectl-appupdate and renders the krew manifest.
#
#   scripts/release.sh [--targets "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"]
#                      [--out DIR] [--base-url URL] [--binary PATH]
#
# For each os/arch it builds `cargo build --release --locked --target <triple>` and packs
# DIR/kubectl-appupdate-v<version>-<os>-<arch>.tar.gz holding kubectl-appupdate, LICENSE and the
# kubectl_complete-appupdate helper, reproducibly (sorted names, fixed owner and mtime, gzip -n).
# A target whose Rust standard library or linker is not installed is skipped with the reason;
# the script fails only if nothing could be built. Then it writes DIR/SHA256SUMS and renders
# DIR/appupdate.yaml from krew/appupdate.yaml.in with one platform entry per archive built:
# krew requires the manifest's file name to equal metadata.name, so it is appupdate.yaml, not
# plugin.yaml.
#
#   --targets   which os/arch pairs (default: all four)
#   --out       output directory (default: dist)
#   --base-url  where the archives will be downloaded from (default: the GitHub release of the
#               version, .../releases/download/v<version>)
#   --binary    package this already-built binary instead of building (host os/arch only; for
#               tests and for CI that built the binary in an earlier step)
#
# Needs: cargo, rustc, GNU tar, gzip, sha256sum (or shasum). Try the result with
#   kubectl krew install --manifest=dist/appupdate.yaml \
#     --archive=dist/kubectl-appupdate-v<version>-linux-amd64.tar.gz
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
targets="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
out="$root/dist"
base_url=""
binary=""

die() { echo "release: $*" >&2; exit 1; }
note() { echo "release: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --targets) targets="${2:?--targets needs a value}"; shift 2 ;;
    --targets=*) targets="${1#*=}"; shift ;;
    --out) out="${2:?--out needs a value}"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --base-url) base_url="${2:?--base-url needs a value}"; shift 2 ;;
    --base-url=*) base_url="${1#*=}"; shift ;;
    --binary) binary="${2:?--binary needs a value}"; shift 2 ;;
    --binary=*) binary="${1#*=}"; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# The version is the package's, so --version, the archive names and the manifest agree.
version=$(awk '
  /^\[package\]/ { in_pkg = 1; next }
  /^\[/ { in_pkg = 0 }
  in_pkg && /^version *=/ { gsub(/.*= *"|".*/, ""); print; exit }
' "$root/Cargo.toml")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] \
  || die "cannot read a semver version from Cargo.toml (got '$version')"
tag="v$version"
base_url="${base_url:-https://github.com/kubectl-appupdate/kubectl-appupdate/releases/download/$tag}"
base_url="${base_url%/}"

triple_of() {
  case "$1" in
    linux/amd64) echo x86_64-unknown-linux-gnu ;;
    linux/arm64) echo aarch64-unknown-linux-gnu ;;
    darwin/amd64) echo x86_64-apple-darwin ;;
    darwin/arm64) echo aarch64-apple-darwin ;;
    *) return 1 ;;
  esac
}

host_triple=$(rustc -vV | sed -n 's/^host: //p')
sysroot=$(rustc --print sysroot)

# Why a target cannot be built here (empty: it can).
cannot_build() {
  local triple=$1
  if [ ! -d "$sysroot/lib/rustlib/$triple/lib" ]; then
    echo "the Rust standard library for $triple is not installed (rustup target add $triple)"
    return
  fi
  if [ "$triple" != "$host_triple" ]; then
    case "$triple" in
      *-linux-gnu)
        local cc="${triple%%-*}-linux-gnu-gcc"
        command -v "$cc" >/dev/null || echo "no linker for $triple ($cc not found)"
        ;;
      *-apple-darwin)
        [ "$(uname -s)" = Darwin ] || echo "linking for macOS needs a macOS SDK (build on macOS)"
        ;;
    esac
  fi
}

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
# Reproducible archives: the commit time, else a fixed date.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 1700000000)}

built=()
skipped=()
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  triple=$(triple_of "$target") || die "unknown target $target (use linux|darwin / amd64|arm64)"
  if [ -n "$binary" ]; then
    [ "$triple" = "$host_triple" ] || { skipped+=("$target: --binary packages the host's binary only"); continue; }
    [ -x "$binary" ] || die "--binary $binary is not an executable file"
    bin_path=$binary
  else
    why=$(cannot_build "$triple")
    if [ -n "$why" ]; then
      note "skipping $target: $why"
      skipped+=("$target: $why")
      continue
    fi
    note "building $target ($triple)"
    linker_var="CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER"
    if [ "$triple" != "$host_triple" ] && [[ "$triple" == *-linux-gnu ]] && [ -z "${!linker_var:-}" ]; then
      export "$linker_var=${triple%%-*}-linux-gnu-gcc"
    fi
    (cd "$root" && cargo build --release --locked --target "$triple" --bin kubectl-appupdate)
    bin_path="${CARGO_TARGET_DIR:-$root/target}/$triple/release/kubectl-appupdate"
  fi
  if [ "$triple" = "$host_triple" ]; then
    got=$("$bin_path" --version)
    [ "$got" = "kubectl appupdate $version" ] \
      || die "$bin_path --version says '$got', expected 'kubectl appupdate $version'"
  fi

  name="kubectl-appupdate-$tag-$os-$arch"
  stage="$stage_root/$name"
  mkdir -p "$stage"
  install -m 0755 "$bin_path" "$stage/kubectl-appupdate"
  install -m 0755 "$root/scripts/kubectl_complete-appupdate" "$stage/kubectl_complete-appupdate"
  install -m 0644 "$root/LICENSE" "$stage/LICENSE"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
      -C "$stage" -cf - kubectl-appupdate kubectl_complete-appupdate LICENSE \
    | gzip -n > "$out/$name.tar.gz"
  built+=("$os $arch $name.tar.gz $(sha256_of "$out/$name.tar.gz")")
  note "packed $out/$name.tar.gz"
done

[ ${#built[@]} -gt 0 ] || die "nothing was built: ${skipped[*]:-no targets}"

# SHA256SUMS and the manifest, one platform entry per archive built.
: > "$out/SHA256SUMS"
platforms=""
for entry in "${built[@]}"; do
  read -r os arch file sum <<< "$entry"
  printf '%s  %s\n' "$sum" "$file" >> "$out/SHA256SUMS"
  block=$(sed -e "s|@OS@|$os|" -e "s|@ARCH@|$arch|" -e "s|@URI@|$base_url/$file|" \
              -e "s|@SHA256@|$sum|" "$root/krew/platform.yaml.in")
  platforms+="$block"$'\n'
done
manifest="$out/appupdate.yaml"
awk -v version="$tag" -v platforms="${platforms%$'\n'}" '
  /^#/ && !started { next }
  { started = 1 }
  /^@PLATFORMS@$/ { print platforms; next }
  { gsub(/@VERSION@/, version); print }
' "$root/krew/appupdate.yaml.in" > "$manifest"

note "wrote $manifest and $out/SHA256SUMS"
for entry in "${built[@]}"; do
  read -r os arch file _ <<< "$entry"
  echo "built   $os/$arch  $file"
done
for s in "${skipped[@]}"; do
  echo "skipped $s"
done
