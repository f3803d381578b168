#!/usr/bin/env bash
# Builds the release archives of kubectl-appupdate for every platform, renders the krew
# manifest, and checks all of it before it finishes.
#
#   scripts/release.sh [--targets "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"]
#                      [--out DIR] [--base-url URL] [--binary OS/ARCH=PATH]...
#
# Targets and how they are built (cargo-zigbuild, zig as the C compiler and linker, so one
# Linux machine builds all five; see docs/releasing.md for the set-up):
#   linux/amd64    x86_64-unknown-linux-musl    static
#   linux/arm64    aarch64-unknown-linux-musl   static
#   darwin/amd64   x86_64-apple-darwin          macOS >= 11.0
#   darwin/arm64   aarch64-apple-darwin         macOS >= 11.0, ad-hoc signed by the linker
#   windows/amd64  x86_64-pc-windows-gnu        .exe
# Each archive, DIR/kubectl-appupdate-v<version>-<os>-<arch>.tar.gz (.zip for Windows), holds
# the binary, the completion helper kubectl_complete-appupdate (.cmd on Windows), LICENSE and
# README.md, packed reproducibly (sorted names, owner 0, the last commit's time: see below).
#
# Then it writes DIR/SHA256SUMS and the krew manifest DIR/appupdate.yaml (krew/appupdate.yaml.in
# with one krew/platform.yaml.in entry per archive), and, when all five platforms were built
# with the default --base-url, copies it to plugin.yaml at the top of the repository: the
# committed manifest of the current version. The copy submitted to krew-index is
# plugins/appupdate.yaml, because krew-index requires the file name to be metadata.name.
#
# Before it finishes it checks (crates/release-check): each binary's format and architecture,
# on Linux static linking, position independence (PIE) and full RELRO, the minimum macOS
# version and a valid code signature on macOS arm64, only system DLLs on Windows; the manifest
# against krew's rules and the package version; each archive's sha256. It runs the host's
# binary (--version) and, when qemu-aarch64 (Debian qemu-user) is installed, the Linux arm64
# binary: --version and a dry run against the sandbox API server over TLS.
#
# A target whose Rust standard library or cross toolchain is missing is skipped with the
# reason; the script fails only if nothing could be built or a check fails.
#
#   --targets   which os/arch pairs (default: all five)
#   --out       output directory (default: dist)
#   --base-url  where the archives will be downloaded from (default: the GitHub release of the
#               version, .../releases/download/v<version>)
#   --binary    package this already-built binary for OS/ARCH instead of building it (for
#               tests, and for CI that built the binary in an earlier step); repeatable
#
# Try the result with
#   kubectl krew install --manifest=dist/appupdate.yaml \
#     --archive=dist/kubectl-appupdate-v<version>-linux-amd64.tar.gz
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
all_targets="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"
targets=$all_targets
out="$root/dist"
base_url=""
declare -A given=()

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
    --binary|--binary=*)
      if [ "$1" = --binary ]; then spec="${2:?--binary needs OS/ARCH=PATH}"; shift 2; else spec="${1#*=}"; shift; fi
      [[ "$spec" == */*=* ]] || die "--binary takes OS/ARCH=PATH (got '$spec')"
      given["${spec%%=*}"]="${spec#*=}"
      ;;
    -h|--help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# The version is the package's, so --version, the archive names and the manifest agree.
# The workspace's version (`[workspace.package]`), which the binary and the shell inherit.
version=$(awk '
  /^\[(workspace\.)?package\]/ { in_pkg = 1; next }
  /^\[/ { in_pkg = 0 }
  in_pkg && /^version *= *"/ { gsub(/.*= *"|".*/, ""); print; exit }
' "$root/Cargo.toml")
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] \
  || die "cannot read a semver version from Cargo.toml (got '$version')"
tag="v$version"
default_base_url="https://github.com/kubectl-appupdate/kubectl-appupdate/releases/download/$tag"
base_url="${base_url:-$default_base_url}"
base_url="${base_url%/}"

triple_of() {
  case "$1" in
    linux/amd64) echo x86_64-unknown-linux-musl ;;
    linux/arm64) echo aarch64-unknown-linux-musl ;;
    darwin/amd64) echo x86_64-apple-darwin ;;
    darwin/arm64) echo aarch64-apple-darwin ;;
    windows/amd64) echo x86_64-pc-windows-gnu ;;
    *) return 1 ;;
  esac
}

target_dir="${CARGO_TARGET_DIR:-$root/target}"
sysroot=$(rustc --print sysroot)
host_os=$(uname -s)
host_arch=$(uname -m)

# Why a target cannot be built here (empty: it can).
cannot_build() {
  local triple=$1
  if [ ! -d "$sysroot/lib/rustlib/$triple/lib" ]; then
    echo "the Rust standard library for $triple is not installed (rustup target add $triple)"
    return
  fi
  if ! command -v cargo-zigbuild >/dev/null; then
    echo "cargo-zigbuild is not installed (pip install ziglang cargo-zigbuild)"
    return
  fi
}

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# The checker, built once (a small workspace crate, debug profile).
check_bin=""
release_check() {
  if [ -z "$check_bin" ]; then
    (cd "$root" && cargo build -q --locked -p release-check) || die "cannot build release-check"
    check_bin="$target_dir/debug/release-check"
  fi
  "$check_bin" "$@"
}

# Can this machine run a binary for os/arch, and how (prints the runner; "" = directly).
runner_for() {
  case "$1:$host_os:$host_arch" in
    linux/amd64:Linux:x86_64 | linux/arm64:Linux:aarch64 | linux/arm64:Linux:arm64) echo "" ;;
    darwin/arm64:Darwin:arm64 | darwin/amd64:Darwin:x86_64) echo "" ;;
    linux/arm64:Linux:*) command -v qemu-aarch64 >/dev/null && echo qemu-aarch64 || return 1 ;;
    *) return 1 ;;
  esac
}

# A dry run of the binary (through its runner) against the sandbox API server over TLS.
sandbox_pid=""
sandbox_kubeconfig=""
stop_sandbox() { if [ -n "$sandbox_pid" ]; then kill "$sandbox_pid" 2>/dev/null || true; wait "$sandbox_pid" 2>/dev/null || true; sandbox_pid=""; fi; }
dry_run() {
  local runner=$1 bin=$2
  if [ -z "$sandbox_pid" ]; then
    (cd "$root" && cargo build -q --locked -p sandbox-apiserver) || die "cannot build the sandbox API server"
    sandbox_kubeconfig="$stage_root/sandbox-kubeconfig"
    "$target_dir/debug/sandbox-apiserver" serve --demo --kubeconfig "$sandbox_kubeconfig" \
      2>"$stage_root/sandbox.log" &
    sandbox_pid=$!
    for _ in $(seq 100); do [ -s "$sandbox_kubeconfig" ] && break; sleep 0.1; done
    [ -s "$sandbox_kubeconfig" ] || die "the sandbox API server did not start: $(cat "$stage_root/sandbox.log")"
  fi
  local code=0
  # shellcheck disable=SC2086
  $runner "$bin" web --kubeconfig "$sandbox_kubeconfig" --image registry.example.com/web:release-check \
    --max 9 --dry-run --detailed-exitcode --color never >"$stage_root/dry-run.out" 2>"$stage_root/dry-run.err" || code=$?
  [ "$code" = 2 ] && grep -q 'registry.example.com/web:release-check' "$stage_root/dry-run.out" \
    || die "dry run of $bin under '${runner:-the host}' exited $code (expected 2, changes shown): $(cat "$stage_root/dry-run.out" "$stage_root/dry-run.err")"
  echo "dry run against the sandbox over TLS: exit 2 (--dry-run --detailed-exitcode: changes shown, none written); the plan:"
  sed 's/^/    /' "$stage_root/dry-run.out"
}

mkdir -p "$out"
out=$(cd "$out" && pwd)
stage_root=$(mktemp -d)
trap 'stop_sandbox; rm -rf "$stage_root"' EXIT
# Reproducible archives: the time of the last commit that changed anything but plugin.yaml (so
# the commit that records plugin.yaml reproduces the archives it lists), else a fixed date.
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct -- . ':(exclude)plugin.yaml' 2>/dev/null || true)}
epoch=${epoch:-1700000000}
if [ -n "$(git -C "$root" status --porcelain -- . ':(exclude)plugin.yaml' ':(exclude)dist' 2>/dev/null)" ]; then
  note "warning: the work tree has uncommitted changes; these archives cannot be reproduced from a commit"
fi

pack_tar_gz() { # dir archive names...
  local dir=$1 archive=$2; shift 2
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$dir" -cf - "$@" \
    | gzip -n -9 > "$archive"
}
pack_zip() { # dir archive names...
  python3 - "$epoch" "$@" <<'PY'
import sys, time, zipfile, os
epoch, src, archive, *names = sys.argv[1:]
stamp = time.gmtime(max(int(epoch), 315532800))[:6]  # zip cannot store dates before 1980
with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for name in sorted(names):
        info = zipfile.ZipInfo(name, stamp)
        info.external_attr = (0o100755 if name.endswith((".exe", ".cmd")) else 0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(src, name), "rb") as f:
            z.writestr(info, f.read())
PY
}

built=()
skipped=()
report=()
for target in $targets; do
  os=${target%/*}
  arch=${target#*/}
  triple=$(triple_of "$target") || die "unknown target $target (use linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)"
  exe=""; [ "$os" = windows ] && exe=".exe"
  if [ -n "${given[$target]:-}" ]; then
    bin_path=${given[$target]}
    [ -f "$bin_path" ] || die "--binary $target=$bin_path is not a file"
  elif [ ${#given[@]} -gt 0 ]; then
    skipped+=("$target: no --binary given for it"); continue
  else
    why=$(cannot_build "$triple")
    if [ -n "$why" ]; then
      note "skipping $target: $why"
      skipped+=("$target: $why")
      continue
    fi
    note "building $target ($triple)"
    env_vars=()
    if [ "$triple" = x86_64-unknown-linux-musl ]; then
      # rustc asks the linker for -static-pie, which zig's clang ignores ("argument unused"):
      # it would link a position-dependent executable that release-check refuses. With -pie
      # added, zig links static-pie, as rustc's own linker does.
      env_vars+=("CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS=-C link-arg=-pie")
    fi
    if [ "$os" = darwin ]; then
      # zig would write minimum macOS 15 (its own default); the link stubs stand in for the
      # Security and CoreFoundation frameworks of an SDK.
      env_vars+=("MACOSX_DEPLOYMENT_TARGET=11.0"
        "CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_RUSTFLAGS=-C link-arg=-F$root/scripts/macos-frameworks")
    fi
    (cd "$root" && env "${env_vars[@]}" cargo zigbuild --release --locked --target "$triple" --bin kubectl-appupdate)
    bin_path="$target_dir/$triple/release/kubectl-appupdate$exe"
  fi

  # The binary is what the target needs, before anything is packed.
  echo "== $target ($triple)"
  release_check binary "$triple" "$bin_path" || die "$target: the binary failed its checks"
  command -v file >/dev/null && echo "file: $(file -b "$bin_path")"
  size=$(wc -c < "$bin_path")
  echo "size: $size bytes ($(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') MiB)"
  [ "$size" -le $((10 * 1048576)) ] || note "warning: $target binary is over 10 MiB"
  if runner=$(runner_for "$target"); then
    got=$($runner "$bin_path" --version) || die "$target: --version failed"
    [ "$got" = "kubectl appupdate $version" ] \
      || die "$target: --version says '$got', expected 'kubectl appupdate $version'"
    echo "${runner:-ran}: --version → $got"
    if [ -n "$runner" ]; then dry_run "$runner" "$bin_path"; fi
  fi

  name="kubectl-appupdate-$tag-$os-$arch"
  stage="$stage_root/$name"
  mkdir -p "$stage"
  install -m 0755 "$bin_path" "$stage/kubectl-appupdate$exe"
  install -m 0644 "$root/LICENSE" "$stage/LICENSE"
  install -m 0644 "$root/README.md" "$stage/README.md"
  if [ "$os" = windows ]; then
    helper=kubectl_complete-appupdate.cmd
    install -m 0755 "$root/scripts/$helper" "$stage/$helper"
    file="$name.zip"
    pack_zip "$stage" "$out/$file" "kubectl-appupdate$exe" "$helper" LICENSE README.md
  else
    helper=kubectl_complete-appupdate
    install -m 0755 "$root/scripts/$helper" "$stage/$helper"
    file="$name.tar.gz"
    pack_tar_gz "$stage" "$out/$file" "kubectl-appupdate$exe" "$helper" LICENSE README.md
  fi
  sum=$(sha256_of "$out/$file")
  built+=("$os $arch $file $sum")
  report+=("$(printf '%-14s %-48s %9s bytes  binary %9s bytes  sha256 %s' "$os/$arch" "$file" "$(wc -c < "$out/$file")" "$size" "$sum")")
  note "packed $out/$file"
done

stop_sandbox
[ ${#built[@]} -gt 0 ] || die "nothing was built: ${skipped[*]:-no targets}"

# SHA256SUMS and the manifest, one platform entry per archive built.
: > "$out/SHA256SUMS"
platforms=""
for entry in "${built[@]}"; do
  read -r os arch file sum <<< "$entry"
  exe=""; helper=kubectl_complete-appupdate
  [ "$os" = windows ] && { exe=".exe"; helper=kubectl_complete-appupdate.cmd; }
  printf '%s  %s\n' "$sum" "$file" >> "$out/SHA256SUMS"
  block=$(sed -e "s|@OS@|$os|" -e "s|@ARCH@|$arch|" -e "s|@URI@|$base_url/$file|" \
              -e "s|@SHA256@|$sum|" -e "s|@EXE@|$exe|g" -e "s|@HELPER@|$helper|" \
              "$root/krew/platform.yaml.in")
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

echo "== manifest"
release_check manifest "$manifest" --name appupdate --version "$tag" --index-copy --archives "$out" \
  || die "the manifest failed krew's rules or its sha256s"
(cd "$out" && sha256sum -c --quiet SHA256SUMS 2>/dev/null || shasum -a 256 -c SHA256SUMS >/dev/null) \
  || die "SHA256SUMS does not match the archives"

if [ ${#given[@]} -eq 0 ] && [ ${#built[@]} -eq 5 ] && [ "$base_url" = "$default_base_url" ]; then
  cp "$manifest" "$root/plugin.yaml"
  note "updated plugin.yaml (commit it with the release)"
else
  note "plugin.yaml left as it is: it is written only when all five platforms are built for the default --base-url"
fi

for line in "${report[@]}"; do
  echo "built   $line"
done
for s in "${skipped[@]}"; do
  echo "skipped $s"
done
