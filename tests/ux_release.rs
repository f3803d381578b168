//! The krew manifest against krew's rules: the template rendered for all four platforms, and a
//! real run of `scripts/release.sh` for linux/amd64 (packaging the already-built test binary with
//! `--binary`, so no release build runs here) whose archive is unpacked the way krew would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_code, stderr, stdout};
use serde_json::Value;
use sha2::{Digest, Sha256};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `v` + semver: MAJOR.MINOR.PATCH without leading zeros, optional -prerelease and +build.
fn is_v_semver(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

/// Two matchLabels selectors overlap when some label set matches both: no key they share has
/// different values.
fn overlap(a: &serde_json::Map<String, Value>, b: &serde_json::Map<String, Value>) -> bool {
    a.iter().all(|(k, v)| b.get(k).is_none_or(|w| w == v))
}

/// Every krew rule this project's manifest must follow; returns the violations.
fn krew_violations(file_name: &str, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let m: Value = match serde_saphyr::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    if m["apiVersion"] != "krew.googlecontainertools.github.com/v1alpha2" {
        bad.push(format!("apiVersion {}", m["apiVersion"]));
    }
    if m["kind"] != "Plugin" {
        bad.push(format!("kind {}", m["kind"]));
    }
    let name = m["metadata"]["name"].as_str().unwrap_or_default();
    if format!("{name}.yaml") != file_name {
        bad.push(format!(
            "file {file_name} is not metadata.name ({name}) + .yaml"
        ));
    }
    let spec = &m["spec"];
    let version = spec["version"].as_str().unwrap_or_default();
    if !is_v_semver(version) {
        bad.push(format!("version {version:?} is not v-prefixed semver"));
    }
    let short = spec["shortDescription"].as_str().unwrap_or_default();
    if short.is_empty() || short.contains('\n') || short.chars().count() > 50 {
        bad.push(format!(
            "shortDescription {short:?} is not one line of at most 50 characters"
        ));
    }
    if spec["description"].as_str().is_none_or(str::is_empty) {
        bad.push("no description".into());
    }
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    if platforms.is_empty() {
        bad.push("no platforms".into());
    }
    let mut selectors: Vec<serde_json::Map<String, Value>> = Vec::new();
    for (i, p) in platforms.iter().enumerate() {
        let sel = p["selector"].as_object().cloned().unwrap_or_default();
        if sel.keys().any(|k| k != "matchLabels") {
            bad.push(format!("platform {i}: selector has more than matchLabels"));
        }
        let labels = sel
            .get("matchLabels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if labels.is_empty() || labels.keys().any(|k| k != "os" && k != "arch") {
            bad.push(format!(
                "platform {i}: labels must be os/arch only: {labels:?}"
            ));
        }
        if selectors.iter().any(|s| overlap(s, &labels)) {
            bad.push(format!(
                "platform {i}: selector {labels:?} overlaps an earlier one"
            ));
        }
        selectors.push(labels);
        let sha = p["sha256"].as_str().unwrap_or_default();
        if sha.len() != 64 || !sha.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            bad.push(format!(
                "platform {i}: sha256 {sha:?} is not 64 lowercase hex digits"
            ));
        }
        if p["bin"].as_str().is_none_or(str::is_empty) {
            bad.push(format!("platform {i}: no bin"));
        }
        let uri = p["uri"].as_str().unwrap_or_default();
        if !uri.starts_with("https://") || !uri.ends_with(".tar.gz") {
            bad.push(format!("platform {i}: uri {uri:?}"));
        }
        let files = p["files"].as_array().cloned().unwrap_or_default();
        if !files.iter().any(|f| f["from"] == "LICENSE") {
            bad.push(format!("platform {i}: LICENSE is not extracted"));
        }
        if !files.iter().any(|f| f["from"] == p["bin"]) {
            bad.push(format!("platform {i}: bin is not extracted"));
        }
    }
    bad
}

/// The template rendered the way the release script renders it.
fn render_template(platforms: &[(&str, &str)]) -> String {
    let manifest = std::fs::read_to_string(format!("{ROOT}/krew/appupdate.yaml.in")).unwrap();
    let platform = std::fs::read_to_string(format!("{ROOT}/krew/platform.yaml.in")).unwrap();
    let blocks: Vec<String> = platforms
        .iter()
        .map(|(os, arch)| {
            platform
                .replace("@OS@", os)
                .replace("@ARCH@", arch)
                .replace(
                    "@URI@",
                    &format!("https://example.com/kubectl-appupdate-v{VERSION}-{os}-{arch}.tar.gz"),
                )
                .replace("@SHA256@", &hex_sha256(format!("{os}/{arch}").as_bytes()))
        })
        .collect();
    manifest
        .replace("@VERSION@", &format!("v{VERSION}"))
        .replace("@PLATFORMS@\n", &blocks.concat())
}

#[test]
fn the_rule_checker_catches_what_krew_rejects() {
    let good = render_template(&[("linux", "amd64"), ("darwin", "arm64")]);
    assert_eq!(
        krew_violations("appupdate.yaml", &good),
        Vec::<String>::new()
    );
    assert_eq!(krew_violations("plugin.yaml", &good).len(), 1);
    let upper = good.replacen("sha256: \"", "sha256: \"AB", 1);
    assert!(!krew_violations("appupdate.yaml", &upper).is_empty());
    let long = good.replace(
        "shortDescription: Safely update an app's image, HPA and routes",
        "shortDescription: Update an application's image, autoscaling bounds and routes, safely",
    );
    assert!(!krew_violations("appupdate.yaml", &long).is_empty());
    let overlapping = render_template(&[("linux", "amd64"), ("linux", "amd64")]);
    assert!(!krew_violations("appupdate.yaml", &overlapping).is_empty());
    let no_v = good.replace(
        &format!("version: v{VERSION}"),
        &format!("version: {VERSION}"),
    );
    assert!(!krew_violations("appupdate.yaml", &no_v).is_empty());
}

#[test]
fn the_template_renders_a_valid_manifest_for_all_four_platforms() {
    let text = render_template(&[
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("darwin", "amd64"),
        ("darwin", "arm64"),
    ]);
    assert_eq!(
        krew_violations("appupdate.yaml", &text),
        Vec::<String>::new()
    );
    assert!(!text.contains('@'), "every placeholder is filled:\n{text}");
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
    let bin = assert_cmd::cargo::cargo_bin("kubectl-appupdate");
    let o = release(
        &[
            "--binary",
            bin.to_str().unwrap(),
            "--targets",
            "linux/amd64",
        ],
        out.path(),
    );
    assert_code(&o, 0);
    let archive_name = format!("kubectl-appupdate-v{VERSION}-linux-amd64.tar.gz");
    assert!(
        stdout(&o).contains(&format!("built   linux/amd64  {archive_name}")),
        "{}",
        stdout(&o)
    );

    // The manifest is named after metadata.name, and follows every rule.
    let manifest_path = out.path().join("appupdate.yaml");
    let text = std::fs::read_to_string(&manifest_path).unwrap();
    assert_eq!(
        krew_violations("appupdate.yaml", &text),
        Vec::<String>::new()
    );
    let m: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(m["spec"]["version"], format!("v{VERSION}"));
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
    let sum = hex_sha256(&std::fs::read(&archive).unwrap());
    assert_eq!(p["sha256"], sum.as_str());
    let sums = std::fs::read_to_string(out.path().join("SHA256SUMS")).unwrap();
    assert_eq!(sums, format!("{sum}  {archive_name}\n"));

    // Installed as krew would: bin present and executable, LICENSE extracted, helper too.
    let work = tempfile::tempdir().unwrap();
    let installed = krew_install(&archive, p, work.path());
    let bin_path = installed.join(p["bin"].as_str().unwrap());
    assert!(bin_path.exists(), "bin {} is installed", p["bin"]);
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
        BTreeSet::from([
            "LICENSE".to_owned(),
            "kubectl-appupdate".to_owned(),
            "kubectl_complete-appupdate".to_owned()
        ])
    );
}

#[test]
fn a_target_that_cannot_be_built_here_is_skipped_with_its_reason() {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let std_dir = Path::new(stdout(&sysroot).trim()).join("lib/rustlib/aarch64-apple-darwin");
    if std_dir.exists() {
        return; // a machine that can build for macOS; nothing to observe here
    }
    let out = tempfile::tempdir().unwrap();
    let o = release(&["--targets", "darwin/arm64"], out.path());
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("skipping darwin/arm64: the Rust standard library for aarch64-apple-darwin is not installed"),
        "{err}"
    );
    assert!(err.contains("nothing was built"), "{err}");
    assert!(!out.path().join("appupdate.yaml").exists());
}
