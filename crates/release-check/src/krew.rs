//! A krew plugin manifest against krew's rules.
//!
//! The rules are krew's own, as its code states them: `ValidatePlugin` and `validatePlatform`
//! (krew `internal/index/validation/validate.go`: apiVersion, kind, a safe name equal to the
//! expected one, a one-line shortDescription, `v`-prefixed semver, uri, a lowercase sha256,
//! bin, files with from and to, a selector on `os`/`arch` only) and the index's manifest check
//! (krew `cmd/validate-krew-manifest`: the file is named `<metadata.name>.yaml`, every selector
//! matches a platform krew supports, no two selectors match the same one, and a LICENSE is
//! installed). On top of those, what krew's guide asks for: `.zip` or `.tar.gz` archives, an
//! `.exe` entry point on Windows, and a shortDescription of a few words (at most 50
//! characters here, so that `kubectl krew search` shows it whole).

use serde_json::{Map, Value};

/// The apiVersion krew reads.
pub const API_VERSION: &str = "krew.googlecontainertools.github.com/v1alpha2";

/// Every os/arch pair krew installs on (`validate-krew-manifest`'s list).
pub const KREW_PLATFORMS: &[(&str, &str)] = &[
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("darwin", "386"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];

const WINDOWS_RESERVED: &[&str] = &[
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

const LICENSE_NAMES: &[&str] = &[
    "license",
    "license.txt",
    "license.md",
    "licenses",
    "licenses.txt",
    "licenses.md",
    "copying",
    "copying.txt",
];

/// What the manifest must say besides krew's rules.
#[derive(Clone, Copy, Debug, Default)]
pub struct Expected<'a> {
    /// `metadata.name`, the plugin's name in the index.
    pub name: &'a str,
    /// `spec.version` (with its `v`), when it must be a particular one.
    pub version: Option<&'a str>,
    /// The manifest's file name, when it is the copy submitted to an index (krew-index reads
    /// `plugins/<metadata.name>.yaml` and rejects any other name).
    pub index_file_name: Option<&'a str>,
}

/// `v` + semver (krew parses with `k8s.io/apimachinery/pkg/util/version.ParseSemantic`):
/// MAJOR.MINOR.PATCH without leading zeros, optional -prerelease and +build.
pub fn is_v_semver(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let (core, build) = match rest.split_once('+') {
        Some((c, b)) => (c, Some(b)),
        None => (rest, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (core, None),
    };
    let ident_ok = |s: &str| {
        s.split('.')
            .all(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
        && pre.is_none_or(ident_ok)
        && build.is_none_or(ident_ok)
}

fn is_safe_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        && !WINDOWS_RESERVED
            .iter()
            .any(|r| r.eq_ignore_ascii_case(name))
}

/// Whether a platform's selector matches the label set `os`/`arch` (matchLabels and
/// matchExpressions with In, NotIn, Exists, DoesNotExist, as Kubernetes label selectors).
fn selector_matches(selector: &Map<String, Value>, os: &str, arch: &str) -> bool {
    let label = |k: &str| match k {
        "os" => Some(os),
        "arch" => Some(arch),
        _ => None,
    };
    let labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs_ok = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let have = label(e["key"].as_str().unwrap_or_default());
                let values: Vec<&str> = e["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e["operator"].as_str().unwrap_or_default() {
                    "In" => have.is_some_and(|h| values.contains(&h)),
                    "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                    "Exists" => have.is_some(),
                    "DoesNotExist" => have.is_none(),
                    _ => false,
                }
            })
        });
    labels_ok && exprs_ok
}

fn validate_selector(i: usize, sel: Option<&Map<String, Value>>, bad: &mut Vec<String>) {
    let Some(sel) = sel else {
        bad.push(format!("platform {i}: no selector"));
        return;
    };
    let labels = sel.get("matchLabels").and_then(Value::as_object);
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    if labels.is_none() && exprs.is_none_or(Vec::is_empty) {
        bad.push(format!("platform {i}: empty selector"));
    }
    if sel
        .keys()
        .any(|k| k != "matchLabels" && k != "matchExpressions")
    {
        bad.push(format!(
            "platform {i}: the selector has keys other than matchLabels/matchExpressions"
        ));
    }
    let keys = labels
        .into_iter()
        .flat_map(|m| m.keys().map(String::as_str))
        .chain(
            exprs
                .into_iter()
                .flatten()
                .map(|e| e["key"].as_str().unwrap_or_default()),
        );
    for key in keys {
        if key != "os" && key != "arch" {
            bad.push(format!(
                "platform {i}: selector key {key:?} is not supported (only os and arch)"
            ));
        }
    }
    if labels.is_some_and(Map::is_empty) {
        bad.push(format!("platform {i}: matchLabels is specified but empty"));
    }
    if exprs.is_some_and(Vec::is_empty) {
        bad.push(format!(
            "platform {i}: matchExpressions is specified but empty"
        ));
    }
}

/// Every rule the manifest `text` breaks, in words; empty when krew accepts it.
pub fn violations(text: &str, expected: &Expected<'_>) -> Vec<String> {
    let mut bad = Vec::new();
    let m: Value = match serde_saphyr::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    if m["apiVersion"] != API_VERSION {
        bad.push(format!(
            "apiVersion is {}, krew reads {API_VERSION}",
            m["apiVersion"]
        ));
    }
    if m["kind"] != "Plugin" {
        bad.push(format!("kind is {}, not Plugin", m["kind"]));
    }
    let name = m["metadata"]["name"].as_str().unwrap_or_default();
    if !is_safe_plugin_name(name) {
        bad.push(format!(
            "metadata.name {name:?} is not allowed (letters, digits, _ and -; not a Windows device name)"
        ));
    }
    if name != expected.name {
        bad.push(format!(
            "metadata.name is {name:?}, expected {:?}",
            expected.name
        ));
    }
    if let Some(file_name) = expected.index_file_name
        && file_name != format!("{name}.yaml")
    {
        bad.push(format!(
            "the index copy is named {file_name}, krew-index requires metadata.name + .yaml ({name}.yaml)"
        ));
    }
    let spec = &m["spec"];
    let version = spec["version"].as_str().unwrap_or_default();
    if !is_v_semver(version) {
        bad.push(format!(
            "spec.version {version:?} is not a v-prefixed semantic version"
        ));
    }
    if let Some(want) = expected.version
        && version != want
    {
        bad.push(format!(
            "spec.version is {version:?}, the package version is {want:?}"
        ));
    }
    let short = spec["shortDescription"].as_str().unwrap_or_default();
    if short.is_empty() || short.contains(['\r', '\n']) || short.chars().count() > 50 {
        bad.push(format!(
            "spec.shortDescription {short:?} is not one line of 1 to 50 characters"
        ));
    }
    if spec["description"].as_str().is_none_or(str::is_empty) {
        bad.push("spec.description is missing".into());
    }
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    if platforms.is_empty() {
        bad.push("spec.platforms is empty".into());
    }
    for (i, p) in platforms.iter().enumerate() {
        let uri = p["uri"].as_str().unwrap_or_default();
        if !uri.starts_with("https://") || !(uri.ends_with(".tar.gz") || uri.ends_with(".zip")) {
            bad.push(format!(
                "platform {i}: uri {uri:?} is not an https URL of a .tar.gz or .zip"
            ));
        }
        let sha = p["sha256"].as_str().unwrap_or_default();
        if sha.len() != 64 || !sha.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            bad.push(format!(
                "platform {i}: sha256 {sha:?} is not 64 lowercase hex digits"
            ));
        }
        let bin = p["bin"].as_str().unwrap_or_default();
        if bin.is_empty() {
            bad.push(format!("platform {i}: bin is missing"));
        }
        match p.get("files") {
            None => {}
            Some(Value::Array(files)) if !files.is_empty() => {
                for f in files {
                    if f["from"].as_str().is_none_or(str::is_empty)
                        || f["to"].as_str().is_none_or(str::is_empty)
                    {
                        bad.push(format!("platform {i}: a files entry lacks from or to"));
                    }
                }
                if !files.iter().any(|f| f["from"].as_str() == Some(bin)) {
                    bad.push(format!("platform {i}: bin {bin:?} is not among the files"));
                }
                let license = files.iter().any(|f| {
                    f["from"]
                        .as_str()
                        .and_then(|s| s.rsplit('/').next())
                        .is_some_and(|s| LICENSE_NAMES.contains(&s.to_lowercase().as_str()))
                });
                if !license {
                    bad.push(format!("platform {i}: no LICENSE file is installed"));
                }
            }
            Some(_) => bad.push(format!(
                "platform {i}: files has to be unspecified or a non-empty list"
            )),
        }
        let sel = p["selector"].as_object();
        validate_selector(i, sel, &mut bad);
        let sel = sel.cloned().unwrap_or_default();
        let matched: Vec<&(&str, &str)> = KREW_PLATFORMS
            .iter()
            .filter(|(os, arch)| selector_matches(&sel, os, arch))
            .collect();
        if matched.is_empty() {
            bad.push(format!(
                "platform {i}: the selector matches no platform krew supports"
            ));
        }
        if matched.iter().any(|(os, _)| *os == "windows") && !bin.ends_with(".exe") {
            bad.push(format!(
                "platform {i}: bin {bin:?} on Windows must be an .exe (krew links only .exe entry points there)"
            ));
        }
    }
    for (os, arch) in KREW_PLATFORMS {
        let hits: Vec<usize> = platforms
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                selector_matches(
                    &p["selector"].as_object().cloned().unwrap_or_default(),
                    os,
                    arch,
                )
            })
            .map(|(i, _)| i)
            .collect();
        if hits.len() > 1 {
            bad.push(format!(
                "platforms {hits:?} have overlapping selectors that select {os}/{arch}"
            ));
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: appupdate
spec:
  version: v0.1.0
  homepage: https://example.com
  shortDescription: Safely update an app's image, HPA and routes
  description: |
    Changes things.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: https://example.com/a-linux-amd64.tar.gz
    sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    bin: kubectl-appupdate
    files:
    - from: kubectl-appupdate
      to: .
    - from: LICENSE
      to: .
  - selector:
      matchLabels:
        os: windows
        arch: amd64
    uri: https://example.com/a-windows-amd64.zip
    sha256: "1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    bin: kubectl-appupdate.exe
    files:
    - from: kubectl-appupdate.exe
      to: .
    - from: LICENSE
      to: .
"#;

    fn expected() -> Expected<'static> {
        Expected {
            name: "appupdate",
            version: Some("v0.1.0"),
            index_file_name: Some("appupdate.yaml"),
        }
    }

    fn broken(from: &str, to: &str) -> Vec<String> {
        assert!(GOOD.contains(from), "{from}");
        violations(&GOOD.replacen(from, to, 1), &expected())
    }

    #[test]
    fn a_manifest_that_follows_every_rule_has_no_violations() {
        assert_eq!(violations(GOOD, &expected()), Vec::<String>::new());
    }

    #[test]
    fn each_broken_rule_is_named() {
        let cases = [
            ("v1alpha2", "v1alpha1", "apiVersion"),
            ("kind: Plugin", "kind: Plugins", "kind"),
            ("name: appupdate", "name: app update", "not allowed"),
            ("name: appupdate", "name: other", "expected \"appupdate\""),
            ("version: v0.1.0", "version: 0.1.0", "semantic version"),
            ("version: v0.1.0", "version: v0.01.0", "semantic version"),
            ("version: v0.1.0", "version: v0.2.0", "package version"),
            (
                "shortDescription: Safely update an app's image, HPA and routes",
                "shortDescription: Update an application's image, autoscaling bounds and routes",
                "shortDescription",
            ),
            ("sha256: \"0123", "sha256: \"A123", "lowercase hex"),
            ("a-linux-amd64.tar.gz", "a-linux-amd64.tgz", "uri"),
            (
                "bin: kubectl-appupdate.exe",
                "bin: kubectl-appupdate",
                "must be an .exe",
            ),
            ("from: LICENSE", "from: README.md", "LICENSE"),
            (
                "os: windows",
                "os: linux",
                "overlapping selectors that select linux/amd64",
            ),
            (
                "arch: amd64\n    uri: https://example.com/a-windows",
                "arch: sparc\n    uri: https://example.com/a-windows",
                "matches no platform",
            ),
            (
                "os: linux\n",
                "os: linux\n        distro: debian\n",
                "not supported",
            ),
            (
                "    - from: kubectl-appupdate\n      to: .\n",
                "",
                "is not among the files",
            ),
        ];
        for (from, to, needle) in cases {
            let v = broken(from, to);
            assert!(
                v.iter().any(|m| m.contains(needle)),
                "{from:?} -> {to:?}: expected a violation naming {needle:?}, got {v:?}"
            );
        }
    }

    #[test]
    fn the_index_copy_must_be_named_after_the_plugin_but_the_repository_copy_need_not() {
        let as_plugin_yaml = Expected {
            index_file_name: Some("plugin.yaml"),
            ..expected()
        };
        assert_eq!(violations(GOOD, &as_plugin_yaml).len(), 1);
        let repository_copy = Expected {
            index_file_name: None,
            ..expected()
        };
        assert_eq!(violations(GOOD, &repository_copy), Vec::<String>::new());
    }

    #[test]
    fn match_expressions_are_understood_like_label_selectors() {
        let sel: Map<String, Value> = serde_json::from_str(
            r#"{"matchExpressions":[{"key":"os","operator":"In","values":["darwin","linux"]}]}"#,
        )
        .unwrap_or_default();
        assert!(selector_matches(&sel, "linux", "arm64"));
        assert!(!selector_matches(&sel, "windows", "amd64"));
    }

    #[test]
    fn semver_follows_krew() {
        for ok in ["v0.1.0", "v1.2.3-rc.1", "v1.2.3+build.5", "v10.0.0-alpha-1"] {
            assert!(is_v_semver(ok), "{ok}");
        }
        for bad in [
            "0.1.0",
            "v0.1",
            "v01.1.0",
            "v1.2.3-",
            "v1.2.3-a..b",
            "v1.2.x",
        ] {
            assert!(!is_v_semver(bad), "{bad}");
        }
    }
}
