//! The release: the repository's `plugin.yaml` against krew's rules, the package version and
//! the templates; real runs of `scripts/release.sh` that package given binaries (`--binary`,
//! so no release build runs here) and are unpacked and installed the way krew would; and the
//! reasons it gives when it cannot build or must refuse a binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_code, stderr, stdout};
use release_check::krew::{self, Expected};
use release_check::sha256_hex;
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The five release platforms, in the order the release script builds them.
const PLATFORMS: [(&str, &str); 5] = [
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("windows", "amd64"),
];

/// What krew (and this package's version) would object to in `text`; `index_file_name` when it
/// is checked as the copy submitted to krew-index.
fn violations(text: &str, index_file_name: Option<&str>) -> Vec<String> {
    let version = format!("v{VERSION}");
    krew::violations(
        text,
        &Expected {
            name: "appupdate",
            version: Some(&version),
            index_file_name,
        },
    )
}

/// The templates rendered as the release script renders them, for `(os, arch, sha256)`.
fn render_template(platforms: &[(&str, &str, &str)], base_url: &str) -> String {
    let manifest = std::fs::read_to_string(format!("{ROOT}/krew/appupdate.yaml.in")).unwrap();
    let platform = std::fs::read_to_string(format!("{ROOT}/krew/platform.yaml.in")).unwrap();
    let blocks: Vec<String> = platforms
        .iter()
        .map(|(os, arch, sha)| {
            let (exe, helper, ext) = if *os == "windows" {
                (".exe", "kubectl_complete-appupdate.cmd", "zip")
            } else {
                ("", "kubectl_complete-appupdate", "tar.gz")
            };
            platform
                .replace("@OS@", os)
                .replace("@ARCH@", arch)
                .replace(
                    "@URI@",
                    &format!("{base_url}/kubectl-appupdate-v{VERSION}-{os}-{arch}.{ext}"),
                )
                .replace("@SHA256@", sha)
                .replace("@EXE@", exe)
                .replace("@HELPER@", helper)
        })
        .collect();
    let body: String = manifest
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    body.replace("@VERSION@", &format!("v{VERSION}"))
        .replace("@PLATFORMS@\n", &blocks.concat())
}

fn plugin_yaml() -> (String, Value) {
    let text = std::fs::read_to_string(format!("{ROOT}/plugin.yaml")).unwrap();
    let value: Value = serde_saphyr::from_str(&text).unwrap();
    (text, value)
}

#[test]
fn plugin_yaml_is_the_manifest_of_the_package_version_and_krew_accepts_it() {
    let (text, m) = plugin_yaml();
    assert_eq!(
        violations(&text, None),
        Vec::<String>::new(),
        "plugin.yaml is stale or breaks krew's rules: run scripts/release.sh"
    );
    // Submitted to krew-index under the name krew requires, the same bytes pass.
    assert_eq!(
        violations(&text, Some("appupdate.yaml")),
        Vec::<String>::new()
    );
    assert_eq!(m["spec"]["version"], format!("v{VERSION}"));
}

#[test]
fn plugin_yaml_lists_all_five_platforms_as_the_release_script_renders_them() {
    let (text, m) = plugin_yaml();
    let platforms = m["spec"]["platforms"].as_array().unwrap();
    let listed: Vec<(String, String, String)> = platforms
        .iter()
        .map(|p| {
            let labels = &p["selector"]["matchLabels"];
            (
                labels["os"].as_str().unwrap().to_owned(),
                labels["arch"].as_str().unwrap().to_owned(),
                p["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = listed
        .iter()
        .map(|(o, a, _)| (o.as_str(), a.as_str()))
        .collect();
    assert_eq!(pairs, PLATFORMS);
    let with_sums: Vec<(&str, &str, &str)> = listed
        .iter()
        .map(|(o, a, s)| (o.as_str(), a.as_str(), s.as_str()))
        .collect();
    let base = format!(
        "https://github.com/kubectl-appupdate/kubectl-appupdate/releases/download/v{VERSION}"
    );
    assert_eq!(
        text,
        render_template(&with_sums, &base),
        "plugin.yaml differs from what the templates render: edit krew/*.yaml.in and run scripts/release.sh, not plugin.yaml"
    );
}

fn release(args: &[&str], out: &Path) -> std::process::Output {
    Command::new("bash")
        .arg(format!("{ROOT}/scripts/release.sh"))
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// A statically linked stand-in for the plugin (the real one is built for musl by the
/// release): it answers `--version` as the plugin does. Built with rustc, static glibc.
fn static_stand_in(dir: &Path) -> PathBuf {
    let src = dir.join("stand_in.rs");
    std::fs::write(
        &src,
        format!(
            "fn main() {{ if std::env::args().nth(1).as_deref() == Some(\"--version\") {{ println!(\"kubectl appupdate {VERSION}\"); }} }}"
        ),
    )
    .unwrap();
    let bin = dir.join("kubectl-appupdate");
    let o = Command::new("rustc")
        .args([
            "-C",
            "target-feature=+crt-static",
            "-C",
            "opt-level=0",
            "-o",
        ])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert_code(&o, 0);
    bin
}

/// Unpacks `archive` and applies the platform's `files` operations into an install
/// directory, as `kubectl krew install` does; returns the install directory.
fn krew_install(archive: &Path, platform: &Value, work: &Path) -> PathBuf {
    let unpacked = work.join("unpacked");
    let installed = work.join("installed");
    std::fs::create_dir_all(&unpacked).unwrap();
    std::fs::create_dir_all(&installed).unwrap();
    let o = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    assert_code(&o, 0);
    for op in platform["files"].as_array().unwrap() {
        let from = unpacked.join(op["from"].as_str().unwrap());
        assert!(from.exists(), "{} is not in the archive", op["from"]);
        let to = installed.join(op["to"].as_str().unwrap());
        std::fs::copy(&from, to.join(from.file_name().unwrap())).unwrap();
    }
    installed
}

#[test]
fn the_release_script_packs_linux_amd64_and_renders_a_manifest_krew_accepts() {
    let out = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = static_stand_in(tmp.path());
    let spec = format!("linux/amd64={}", bin.display());
    let before = std::fs::read(format!("{ROOT}/plugin.yaml")).unwrap();
    let o = release(&["--targets", "linux/amd64", "--binary", &spec], out.path());
    assert_code(&o, 0);
    let archive_name = format!("kubectl-appupdate-v{VERSION}-linux-amd64.tar.gz");
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("built   linux/amd64 ") && l.contains(&archive_name)),
        "{}",
        stdout(&o)
    );
    // The binary was checked before it was packed.
    assert!(
        stdout(&o).contains(&format!(
            "{} (x86_64-unknown-linux-musl): statically linked",
            bin.display()
        )),
        "{}",
        stdout(&o)
    );
    // rustc links a static x86-64 executable as a static-pie with full RELRO by default.
    for fact in [
        "position-independent executable (ET_DYN, DF_1_PIE)",
        "full RELRO (PT_GNU_RELRO, BIND_NOW)",
    ] {
        assert!(
            stdout(&o).contains(&format!(
                "{} (x86_64-unknown-linux-musl): {fact}",
                bin.display()
            )),
            "{}",
            stdout(&o)
        );
    }
    // A partial release leaves the repository's manifest alone.
    assert!(
        stderr(&o).contains("plugin.yaml left as it is"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(format!("{ROOT}/plugin.yaml")).unwrap(),
        before
    );

    // The manifest is named after metadata.name, and follows every rule.
    let text = std::fs::read_to_string(out.path().join("appupdate.yaml")).unwrap();
    assert_eq!(
        violations(&text, Some("appupdate.yaml")),
        Vec::<String>::new()
    );
    let m: Value = serde_saphyr::from_str(&text).unwrap();
    let platforms = m["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 1, "only what was built is listed");
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(p["selector"]["matchLabels"]["arch"], "amd64");
    assert!(
        p["uri"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/releases/download/v{VERSION}/{archive_name}"))
    );

    // The sha256 is the archive's, here and in SHA256SUMS.
    let archive = out.path().join(&archive_name);
    let sum = sha256_hex(&std::fs::read(&archive).unwrap());
    assert_eq!(p["sha256"], sum.as_str());
    let sums = std::fs::read_to_string(out.path().join("SHA256SUMS")).unwrap();
    assert_eq!(sums, format!("{sum}  {archive_name}\n"));

    // Installed as krew would: bin present and executable, LICENSE extracted, helper too.
    let work = tempfile::tempdir().unwrap();
    let installed = krew_install(&archive, p, work.path());
    let bin_path = installed.join(p["bin"].as_str().unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(
        std::fs::metadata(&bin_path).unwrap().permissions().mode() & 0o111,
        0
    );
    assert!(installed.join("LICENSE").exists());
    assert!(installed.join("kubectl_complete-appupdate").exists());
    let v = Command::new(&bin_path).arg("--version").output().unwrap();
    assert_eq!(stdout(&v).trim(), format!("kubectl appupdate {VERSION}"));
    let names: BTreeSet<String> = std::fs::read_dir(work.path().join("unpacked"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(
            [
                "LICENSE",
                "README.md",
                "kubectl-appupdate",
                "kubectl_complete-appupdate"
            ]
            .map(String::from)
        )
    );

    // Packing again gives the same bytes (sorted names, fixed owner and time, gzip -n).
    let again = tempfile::tempdir().unwrap();
    assert_code(
        &release(
            &["--targets", "linux/amd64", "--binary", &spec],
            again.path(),
        ),
        0,
    );
    assert_eq!(
        std::fs::read(again.path().join(&archive_name)).unwrap(),
        std::fs::read(&archive).unwrap()
    );
}

#[test]
fn a_dynamically_linked_linux_binary_is_refused_before_anything_is_packed() {
    let out = tempfile::tempdir().unwrap();
    // The test build of the plugin links glibc dynamically, as a release must not.
    let bin = assert_cmd::cargo::cargo_bin("kubectl-appupdate");
    let spec = format!("linux/amd64={}", bin.display());
    let o = release(&["--targets", "linux/amd64", "--binary", &spec], out.path());
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{} (x86_64-unknown-linux-musl): dynamically linked",
            bin.display()
        )),
        "{err}"
    );
    // Its linking is the only problem: rustc links it as a PIE with full RELRO.
    assert!(
        !err.contains("position-independent") && !err.contains("RELRO"),
        "{err}"
    );
    assert!(
        err.contains("release: linux/amd64: the binary failed its checks"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

#[test]
fn a_binary_for_another_platform_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = static_stand_in(tmp.path()); // an x86-64 ELF, not a Windows .exe
    let spec = format!("windows/amd64={}", bin.display());
    let o = release(
        &["--targets", "windows/amd64", "--binary", &spec],
        out.path(),
    );
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{} (x86_64-pc-windows-gnu): not a binary for WindowsAmd64: the file is Elf64",
            bin.display()
        )),
        "{err}"
    );
}

/// A directory with a `rustc` that reports `sysroot` as its sysroot and hands everything
/// else to the real one, and the PATH that puts it first (without cargo-zigbuild).
fn fake_toolchain(dir: &Path, sysroot: &Path) -> String {
    let real = Command::new("rustup")
        .args(["which", "rustc"])
        .output()
        .map(|o| stdout(&o).trim().to_owned())
        .unwrap_or_else(|_| "rustc".into());
    let rustc = dir.join("rustc");
    std::fs::write(
        &rustc,
        format!(
            "#!/bin/sh\nif [ \"$1 $2\" = \"--print sysroot\" ]; then echo '{}'; else exec '{real}' \"$@\"; fi\n",
            sysroot.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&rustc, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display())
}

fn release_with_path(args: &[&str], out: &Path, path: &str) -> std::process::Output {
    Command::new("bash")
        .arg(format!("{ROOT}/scripts/release.sh"))
        .args(args)
        .arg("--out")
        .arg(out)
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn a_target_whose_standard_library_is_missing_is_skipped_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let empty_sysroot = tmp.path().join("sysroot");
    std::fs::create_dir_all(&empty_sysroot).unwrap();
    let path = fake_toolchain(tmp.path(), &empty_sysroot);
    let out = tempfile::tempdir().unwrap();
    let o = release_with_path(&["--targets", "darwin/arm64"], out.path(), &path);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("skipping darwin/arm64: the Rust standard library for aarch64-apple-darwin is not installed (rustup target add aarch64-apple-darwin)"),
        "{err}"
    );
    assert!(err.contains("nothing was built"), "{err}");
    assert!(!out.path().join("appupdate.yaml").exists());
}

#[test]
fn a_target_without_the_zig_cross_toolchain_is_skipped_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let sysroot = tmp.path().join("sysroot");
    std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-pc-windows-gnu/lib")).unwrap();
    let path = fake_toolchain(tmp.path(), &sysroot);
    let out = tempfile::tempdir().unwrap();
    let o = release_with_path(&["--targets", "windows/amd64"], out.path(), &path);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("skipping windows/amd64: cargo-zigbuild is not installed (pip install ziglang cargo-zigbuild)"),
        "{err}"
    );
    assert!(err.contains("nothing was built"), "{err}");
}
