//! Checks for a release of kubectl-appupdate, used by `scripts/release.sh` before it finishes,
//! by CI on the repository's `plugin.yaml`, and by the tests.
//!
//! - [`krew`]: a plugin manifest against krew's rules and the package version;
//! - [`binary`]: each release binary's format, architecture, linking (on Linux: static,
//!   position-independent, full RELRO), minimum macOS version and code signature;
//! - [`archives`]: each platform's archive is where the manifest says, with its sha256.

pub mod binary;
pub mod krew;

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`, as krew writes it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every platform's archive, found in `dir` under the last segment of its `uri`, must exist and
/// have the manifest's sha256. Returns the problems (empty when all match).
pub fn archives(manifest: &str, dir: &Path) -> Vec<String> {
    let m: Value = match serde_saphyr::from_str(manifest) {
        Ok(v) => v,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    let mut bad = Vec::new();
    for (i, p) in m["spec"]["platforms"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let uri = p["uri"].as_str().unwrap_or_default();
        let name = uri.rsplit('/').next().unwrap_or_default();
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let sum = sha256_hex(&bytes);
                if p["sha256"].as_str() != Some(sum.as_str()) {
                    bad.push(format!(
                        "platform {i}: {name} has sha256 {sum}, the manifest says {}",
                        p["sha256"]
                    ));
                }
            }
            Err(e) => bad.push(format!("platform {i}: {}: {e}", path.display())),
        }
    }
    bad
}
