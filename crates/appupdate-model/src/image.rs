//! The image check's pure parts (`appupdate_kube::registry` sends the requests): an image
//! reference normalised as containerd normalises it, a registry's `WWW-Authenticate`
//! challenge, a manifest or index and the platforms it names, which platforms the nodes of a
//! pod template need, and the credentials of a docker `config.json`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::text::Untrusted;

/// The registry Docker Hub's short names mean.
pub const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API answers.
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// The media types asked for, most specific first: OCI and Docker indexes and manifests.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// An image reference, normalised: `nginx` is `docker.io/library/nginx:latest`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageRef {
    /// `docker.io`, `ghcr.io`, `localhost:5000`.
    pub registry: String,
    /// `library/nginx`, `org/web`.
    pub repository: String,
    /// `None` only with a digest and no tag.
    pub tag: Option<String>,
    /// `sha256:…`, when the reference pins one.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses a reference already checked by the plan's syntax check, normalising as
    /// containerd does: no registry means `docker.io`, a Docker Hub name without a `/` is in
    /// `library/`, no tag and no digest means `:latest`. The first component is a registry
    /// when it has a `.` or a `:`, or is `localhost`.
    pub fn parse(image: &str) -> Result<ImageRef, String> {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_owned())),
            None => (image, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                &rest[..last_slash + i],
                Some(rest[last_slash + i + 1..].to_owned()),
            ),
            None => (rest, None),
        };
        if name.is_empty() {
            return Err("the image reference has no name".into());
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_owned(), path.to_owned())
            }
            _ => (DOCKER_HUB.to_owned(), name.to_owned()),
        };
        let registry = if registry == "index.docker.io" {
            DOCKER_HUB.to_owned()
        } else {
            registry
        };
        let repository = if registry == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        if repository.is_empty() || repository.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(format!(
                "{:?} is not a valid repository name",
                Untrusted(&repository)
            ));
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            (tag, _) => tag,
        };
        Ok(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The host (and port) the registry API answers on.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// What the manifest is asked by: the digest when pinned, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// `registry/repository:tag` without a digest.
    pub fn tagged(&self) -> String {
        match &self.tag {
            Some(t) => format!("{}/{}:{t}", self.registry, self.repository),
            None => format!("{}/{}", self.registry, self.repository),
        }
    }

    /// The same image, spelled `name:tag@digest`: what `--pin-digest` writes, from the
    /// reference as it was given (`original`), so that a short name stays short.
    pub fn pinned(original: &str, digest: &str) -> String {
        let without = original.split_once('@').map_or(original, |(r, _)| r);
        format!("{without}@{digest}")
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tagged())?;
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Whether two references name the same image: the same normalised name, and either the same
/// tag and digest, or one of them `name:tag@D` and the other `name:tag` known (by the
/// registry) to be `D` (`resolved`). An admission controller that pinned a tag to its digest
/// did not change the image.
pub fn same_image(a: &str, b: &str, resolved: Option<&str>) -> bool {
    if a == b {
        return true;
    }
    let (Ok(x), Ok(y)) = (ImageRef::parse(a), ImageRef::parse(b)) else {
        return false;
    };
    if x.registry != y.registry || x.repository != y.repository {
        return false;
    }
    match (&x.digest, &y.digest) {
        (Some(dx), Some(dy)) => dx == dy,
        (Some(d), None) => y.tag == x.tag && resolved == Some(d.as_str()),
        (None, Some(d)) => x.tag == y.tag && resolved == Some(d.as_str()),
        (None, None) => x.tag == y.tag,
    }
}

/// Whether `live` is `recorded` pinned to a digest (`name:tag@sha256:…`), as an admission
/// controller that pins tags (Kyverno's `mutateDigest`) rewrites what was written: the image
/// written, not a change by someone else. Without the registry the digest cannot be compared,
/// but it was the tag's when the controller pinned it, at the write.
pub fn pinned_at_admission(live: &str, recorded: &str) -> bool {
    if recorded.contains('@') {
        return false;
    }
    live.strip_prefix(recorded)
        .and_then(|rest| rest.strip_prefix("@sha256:"))
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `deployment` as a saved plan wrote it, when an admission controller pinned what it wrote:
/// every container image that reads `written@digest` — `written` a tag (`name:tag`), `digest`
/// the one the plan recorded for it — spelled `written` again, so that re-planning against it
/// sees the plan's value in place rather than a change. `None` when no container is so pinned
/// (another digest is another image: drift).
pub fn as_written(deployment: &Value, written: &str, digest: &str) -> Option<Value> {
    if written.contains('@') || !digest.starts_with("sha256:") {
        return None;
    }
    let pinned = format!("{written}@{digest}");
    let mut copy = deployment.clone();
    let mut found = false;
    for c in copy
        .pointer_mut("/spec/template/spec/containers")?
        .as_array_mut()?
    {
        if c.get("image").and_then(Value::as_str) == Some(pinned.as_str()) {
            c["image"] = Value::String(written.to_owned());
            found = true;
        }
    }
    found.then_some(copy)
}

/// An operating system and architecture (and variant): `linux/arm64/v8`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct Platform {
    pub os: String,
    #[serde(rename = "architecture")]
    pub arch: String,
    #[serde(default)]
    pub variant: Option<String>,
}

impl Platform {
    pub fn new(os: &str, arch: &str) -> Platform {
        Platform {
            os: os.to_owned(),
            arch: arch.to_owned(),
            variant: None,
        }
    }

    /// An attestation or other entry that is not an image to run (`unknown/unknown`).
    pub fn is_unknown(&self) -> bool {
        self.os == "unknown" || self.arch == "unknown"
    }

    /// Whether a node of `os`/`arch` runs this image (a variant runs on its architecture).
    pub fn runs_on(&self, node: &Platform) -> bool {
        self.os == node.os && self.arch == node.arch
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Untrusted(&self.os), Untrusted(&self.arch))?;
        if let Some(v) = self.variant.as_deref().filter(|v| !v.is_empty()) {
            write!(f, "/{}", Untrusted(v))?;
        }
        Ok(())
    }
}

/// The platforms, in order, without repeats, as the plan shows them.
pub fn platform_list(platforms: &[Platform]) -> String {
    platforms
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A registry's challenge: its scheme (`Bearer`, `Basic`) and parameters (`realm`,
/// `service`, `scope`), parameter names in lower case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

/// Parses `WWW-Authenticate: Bearer realm="https://auth.docker.io/token",service="…"`:
/// quoted or bare values, commas between parameters; `None` without a scheme.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, mut rest) = match header.split_once(char::is_whitespace) {
        Some((s, r)) => (s, r.trim_start()),
        None => (header, ""),
    };
    if scheme.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        if !key.is_empty() {
            params.insert(key, value);
        }
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge {
        scheme: scheme.to_owned(),
        params,
    })
}

/// What a manifest request returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Manifest {
    /// An index (manifest list): the platforms of its entries, attestations left out.
    Index { platforms: Vec<Platform> },
    /// One image: its config blob, which names its platform.
    Image { config: String },
}

/// Parses a manifest or index by its `mediaType` (the body's, else the response's
/// `Content-Type`).
pub fn parse_manifest(content_type: Option<&str>, body: &[u8]) -> Result<Manifest, String> {
    let doc: Value = serde_json::from_slice(body)
        .map_err(|_| "the registry's manifest is not valid JSON".to_owned())?;
    let media = doc
        .get("mediaType")
        .and_then(Value::as_str)
        .or(content_type)
        .unwrap_or("");
    let is_index = media.contains("image.index") || media.contains("manifest.list");
    if is_index || (media.is_empty() && doc.get("manifests").is_some()) {
        let mut platforms: Vec<Platform> = Vec::new();
        for entry in doc
            .get("manifests")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let Some(p) = entry
                .get("platform")
                .and_then(|p| Platform::deserialize(p).ok())
            else {
                continue;
            };
            if !p.is_unknown() && !platforms.contains(&p) {
                platforms.push(p);
            }
        }
        return Ok(Manifest::Index { platforms });
    }
    match doc
        .get("config")
        .and_then(|c| c.get("digest"))
        .and_then(Value::as_str)
    {
        Some(digest) => Ok(Manifest::Image {
            config: digest.to_owned(),
        }),
        None if doc.get("schemaVersion").and_then(Value::as_u64) == Some(1) => Err(
            "the registry serves only a schema 1 manifest, which no current runtime pulls".into(),
        ),
        None => Err(format!(
            "the registry's manifest is of an unknown kind ({:?})",
            Untrusted(media)
        )),
    }
}

/// The platform an image config blob names (`os`, `architecture`, `variant`).
pub fn config_platform(body: &[u8]) -> Option<Platform> {
    serde_json::from_slice::<Platform>(body)
        .ok()
        .filter(|p| !p.os.is_empty() && !p.arch.is_empty())
}

/// The error codes of a registry's error document (`MANIFEST_UNKNOWN`, `NAME_UNKNOWN`, …).
pub fn error_codes(body: &[u8]) -> Vec<String> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("errors").and_then(Value::as_array).map(|errors| {
                errors
                    .iter()
                    .filter_map(|e| e.get("code").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Where a pod template may run, as its required constraints on `kubernetes.io/os` and
/// `kubernetes.io/arch` say: `None` for a key means any value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementNeeds {
    /// The `nodeSelector`'s value, and each required node-affinity term's `In` values: a node
    /// must match the selector and one of the terms.
    pub os: Constraint,
    pub arch: Constraint,
}

/// A key's constraint: the selector's value and the affinity terms' alternatives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constraint {
    pub selector: Option<String>,
    /// One entry per required node-selector term that names the key with `In`; an empty list:
    /// no term constrains the key.
    pub terms: Vec<Vec<String>>,
}

pub const OS_LABEL: &str = "kubernetes.io/os";
pub const ARCH_LABEL: &str = "kubernetes.io/arch";

impl PlacementNeeds {
    /// The constraints of a pod template's `spec`.
    pub fn of_pod_spec(spec: &Value) -> PlacementNeeds {
        let selector = |key: &str| {
            spec.get("nodeSelector")
                .and_then(|s| s.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let terms = spec
            .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let term_values = |key: &str| -> Vec<Vec<String>> {
            terms
                .iter()
                .filter_map(|t| {
                    t.get("matchExpressions")
                        .and_then(Value::as_array)?
                        .iter()
                        .find(|e| {
                            e.get("key").and_then(Value::as_str) == Some(key)
                                && e.get("operator").and_then(Value::as_str) == Some("In")
                        })
                        .and_then(|e| e.get("values").and_then(Value::as_array))
                        .map(|vs| {
                            vs.iter()
                                .filter_map(|v| v.as_str().map(str::to_owned))
                                .collect()
                        })
                })
                .collect()
        };
        PlacementNeeds {
            os: Constraint {
                selector: selector(OS_LABEL),
                terms: term_values(OS_LABEL),
            },
            arch: Constraint {
                selector: selector(ARCH_LABEL),
                terms: term_values(ARCH_LABEL),
            },
        }
    }

    /// Whether a node with these labels is one the pods may land on (as far as os and
    /// architecture go).
    pub fn admits(&self, node: &Platform) -> bool {
        self.os.admits(&node.os) && self.arch.admits(&node.arch)
    }
}

impl Constraint {
    fn admits(&self, value: &str) -> bool {
        self.selector.as_deref().is_none_or(|s| s == value)
            && (self.terms.is_empty() || self.terms.iter().any(|t| t.iter().any(|v| v == value)))
    }
}

/// The node platforms of a node list as metadata (`PartialObjectMetadataList`): each node's
/// `kubernetes.io/os` and `kubernetes.io/arch` labels, distinct, sorted.
pub fn node_platforms(list: &Value) -> Vec<Platform> {
    let mut out: Vec<Platform> = list
        .get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| {
            let labels = n.pointer("/metadata/labels")?;
            Some(Platform::new(
                labels.get(OS_LABEL)?.as_str()?,
                labels.get(ARCH_LABEL)?.as_str()?,
            ))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The platforms of `needed` the image's `platforms` do not run on.
pub fn missing_platforms(platforms: &[Platform], needed: &[Platform]) -> Vec<Platform> {
    needed
        .iter()
        .filter(|n| !platforms.iter().any(|p| p.runs_on(n)))
        .cloned()
        .collect()
}

/// How a registry's credentials are found in a docker `config.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialSource {
    /// `auths`: a user name and password (from `auth`, or `username`/`password`), or an
    /// identity token (`identitytoken`, sent as the token request's refresh token — not
    /// supported here; taken as "no credentials").
    Basic { username: String, password: String },
    /// `credHelpers` for the registry, else `credsStore`: `docker-credential-<name> get`.
    Helper(String),
}

/// The parts of a docker `config.json` the check reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DockerConfig {
    #[serde(default)]
    pub auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    pub creds_store: Option<String>,
    #[serde(default)]
    pub cred_helpers: BTreeMap<String, String>,
}

/// One `auths` entry.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct AuthEntry {
    #[serde(default)]
    pub auth: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
}

impl DockerConfig {
    /// Parses a `config.json`'s text.
    pub fn parse(text: &str) -> Result<DockerConfig, String> {
        serde_json::from_str(text).map_err(|e| {
            format!(
                "it is not a docker config.json ({})",
                Untrusted(crate::text::one_line(&e.to_string()))
            )
        })
    }

    /// Where the credentials for `registry` (as normalised: `docker.io` for Docker Hub) come
    /// from: its credential helper, its `auths` entry, the default store.
    pub fn credentials_for(&self, registry: &str) -> Option<CredentialSource> {
        let keys = registry_keys(registry);
        if let Some(helper) = keys.iter().find_map(|k| self.cred_helpers.get(k)) {
            return Some(CredentialSource::Helper(helper.clone()));
        }
        let entry = self
            .auths
            .iter()
            .find(|(k, _)| keys.iter().any(|want| auth_key_host(k) == want))
            .map(|(_, e)| e);
        if let Some(basic) = entry.and_then(AuthEntry::basic) {
            return Some(basic);
        }
        self.creds_store
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(|s| CredentialSource::Helper(s.clone()))
    }
}

impl AuthEntry {
    fn basic(&self) -> Option<CredentialSource> {
        if let Some(auth) = self.auth.as_deref().filter(|a| !a.is_empty()) {
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()?;
            let text = String::from_utf8(raw).ok()?;
            let (username, password) = text.split_once(':')?;
            return Some(CredentialSource::Basic {
                username: username.to_owned(),
                password: password.to_owned(),
            });
        }
        match (&self.username, &self.password) {
            (Some(u), Some(p)) if !u.is_empty() => Some(CredentialSource::Basic {
                username: u.clone(),
                password: p.clone(),
            }),
            _ => None,
        }
    }
}

/// The keys a registry's entry may be under: Docker Hub's historical names too.
fn registry_keys(registry: &str) -> Vec<String> {
    if registry == DOCKER_HUB {
        vec![
            "https://index.docker.io/v1/".into(),
            "index.docker.io".into(),
            DOCKER_HUB.into(),
            DOCKER_HUB_API.into(),
        ]
    } else {
        vec![registry.to_owned()]
    }
}

/// An `auths` key's host: `https://index.docker.io/v1/` is `index.docker.io/v1/`'s host.
fn auth_key_host(key: &str) -> &str {
    if key == "https://index.docker.io/v1/" {
        return key;
    }
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// A credential helper's answer to `get`: `{"Username": …, "Secret": …}`. A `<token>`
/// username means an identity token, which is not supported (no credentials).
pub fn helper_answer(stdout: &[u8]) -> Result<Option<CredentialSource>, String> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "Username", default)]
        username: String,
        #[serde(rename = "Secret", default)]
        secret: String,
    }
    let answer: Answer = serde_json::from_slice(stdout)
        .map_err(|_| "its answer is not the JSON a credential helper gives".to_owned())?;
    if answer.username == "<token>" || answer.secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(CredentialSource::Basic {
        username: answer.username,
        password: answer.secret,
    }))
}

/// Whether a registry host is spoken to in plain HTTP: `localhost` and `127.0.0.0/8` (as
/// docker allows), `::1`, or one named by `--insecure-registry`.
pub fn plain_http(registry: &str, insecure: &[String]) -> bool {
    if insecure.iter().any(|h| h.eq_ignore_ascii_case(registry)) {
        return true;
    }
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(s: &str) -> ImageRef {
        ImageRef::parse(s).unwrap()
    }

    #[test]
    fn names_are_normalised_as_containerd_does() {
        assert_eq!(r("nginx").to_string(), "docker.io/library/nginx:latest");
        assert_eq!(r("nginx").api_host(), "registry-1.docker.io");
        assert_eq!(
            r("bitnami/redis:7").to_string(),
            "docker.io/bitnami/redis:7"
        );
        assert_eq!(
            r("index.docker.io/library/busybox:1").to_string(),
            "docker.io/library/busybox:1"
        );
        assert_eq!(r("localhost/web").registry, "localhost");
        assert_eq!(r("localhost:5000/web:2").api_host(), "localhost:5000");
        let pinned = r("ghcr.io/org/app/web:2.1@sha256:abc");
        assert_eq!(pinned.registry, "ghcr.io");
        assert_eq!(pinned.repository, "org/app/web");
        assert_eq!(pinned.tag.as_deref(), Some("2.1"));
        assert_eq!(pinned.manifest_reference(), "sha256:abc");
        let digest_only = r("ghcr.io/org/web@sha256:abc");
        assert_eq!(digest_only.tag, None);
        assert_eq!(
            r("registry.example.com:443/web").tag.as_deref(),
            Some("latest")
        );
        assert!(ImageRef::parse("Upper/Case").is_err());
        assert_eq!(
            ImageRef::pinned("web:2@sha256:old", "sha256:new"),
            "web:2@sha256:new"
        );
    }

    #[test]
    fn a_tag_and_its_pinned_spelling_are_the_same_image_when_the_digest_matches() {
        assert!(same_image("web:2", "web:2", None));
        assert!(same_image("docker.io/library/web:2", "web:2", None));
        assert!(same_image("web:2@sha256:d", "web:2", Some("sha256:d")));
        assert!(same_image("web:2", "web:2@sha256:d", Some("sha256:d")));
        assert!(!same_image("web:2", "web:2@sha256:d", Some("sha256:e")));
        assert!(!same_image("web:2", "web:2@sha256:d", None));
        assert!(!same_image("web:3", "web:2@sha256:d", Some("sha256:d")));
        assert!(!same_image("other:2", "web:2@sha256:d", Some("sha256:d")));
    }

    #[test]
    fn a_tag_pinned_at_admission_is_the_image_written() {
        let d = "sha256:4d3cb5e3a8d6b1f0e7c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8";
        assert!(pinned_at_admission(&format!("web:2@{d}"), "web:2"));
        assert!(!pinned_at_admission(&format!("web:3@{d}"), "web:2"));
        assert!(!pinned_at_admission("web:2@sha256:short", "web:2"));
        assert!(!pinned_at_admission(
            &format!("web:2@{d}"),
            &format!("web:2@{d}")
        ));
        assert!(!pinned_at_admission("web:2", "web:2"));
    }

    #[test]
    fn a_deployment_pinned_to_the_recorded_digest_reads_as_written() {
        let d = format!("sha256:{}", "4d".repeat(32));
        let deployment = |image: &str| {
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": image},
                {"name": "sidecar", "image": "proxy:1"}
            ]}}}})
        };
        assert_eq!(
            as_written(
                &deployment(&format!("r.example/web:2@{d}")),
                "r.example/web:2",
                &d
            ),
            Some(deployment("r.example/web:2"))
        );
        let other = format!("sha256:{}", "9a".repeat(32));
        assert_eq!(
            as_written(
                &deployment(&format!("r.example/web:2@{other}")),
                "r.example/web:2",
                &d
            ),
            None,
            "another digest is another image"
        );
        assert_eq!(
            as_written(&deployment("r.example/web:2"), "r.example/web:2", &d),
            None
        );
        assert_eq!(
            as_written(
                &deployment(&format!("r.example/web:3@{d}")),
                "r.example/web:2",
                &d
            ),
            None
        );
    }

    #[test]
    fn challenges_are_parsed_with_quoted_and_bare_values() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/nginx:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "Bearer");
        assert_eq!(c.params["realm"], "https://auth.docker.io/token");
        assert_eq!(c.params["service"], "registry.docker.io");
        assert_eq!(c.params["scope"], "repository:library/nginx:pull,push");
        let b = parse_challenge(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(b.scheme, "Basic");
        assert_eq!(b.params["realm"], "Registry Realm");
        let bare = parse_challenge("Bearer Realm=https://x/t, service=s").unwrap();
        assert_eq!(bare.params["realm"], "https://x/t");
        assert_eq!(bare.params["service"], "s");
        assert_eq!(parse_challenge("  "), None);
    }

    #[test]
    fn an_index_names_its_platforms_without_attestations() {
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"digest": "sha256:a", "platform": {"os": "linux", "architecture": "amd64"}},
                {"digest": "sha256:b", "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
                {"digest": "sha256:c", "platform": {"os": "unknown", "architecture": "unknown"}},
                {"digest": "sha256:d"}
            ]
        });
        let Manifest::Index { platforms } =
            parse_manifest(None, &serde_json::to_vec(&index).unwrap()).unwrap()
        else {
            panic!("an index")
        };
        assert_eq!(platform_list(&platforms), "linux/amd64, linux/arm64/v8");
        let list = json!({"schemaVersion": 2, "manifests": []});
        assert_eq!(
            parse_manifest(
                Some("application/vnd.docker.distribution.manifest.list.v2+json"),
                &serde_json::to_vec(&list).unwrap()
            ),
            Ok(Manifest::Index { platforms: vec![] })
        );
        let image = json!({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"digest": "sha256:cfg", "mediaType": "application/vnd.docker.container.image.v1+json"}, "layers": []});
        assert_eq!(
            parse_manifest(None, &serde_json::to_vec(&image).unwrap()),
            Ok(Manifest::Image {
                config: "sha256:cfg".into()
            })
        );
        assert!(parse_manifest(None, b"{\"schemaVersion\":1}").is_err());
        assert!(parse_manifest(None, b"not json").is_err());
        assert_eq!(
            config_platform(br#"{"os":"linux","architecture":"arm","variant":"v7","rootfs":{}}"#)
                .unwrap()
                .to_string(),
            "linux/arm/v7"
        );
        assert_eq!(config_platform(b"{}"), None);
        assert_eq!(
            error_codes(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"x"}]}"#),
            vec!["MANIFEST_UNKNOWN"]
        );
    }

    #[test]
    fn the_nodes_a_template_may_land_on_decide_the_platforms_needed() {
        let nodes = json!({"items": [
            {"metadata": {"name": "a", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}},
            {"metadata": {"name": "b", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}}},
            {"metadata": {"name": "c", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}},
            {"metadata": {"name": "d"}}
        ]});
        let all = node_platforms(&nodes);
        assert_eq!(platform_list(&all), "linux/amd64, linux/arm64");
        let any = PlacementNeeds::of_pod_spec(&json!({}));
        assert!(all.iter().all(|p| any.admits(p)));
        let pinned =
            PlacementNeeds::of_pod_spec(&json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}}));
        let admitted: Vec<_> = all.iter().filter(|p| pinned.admits(p)).cloned().collect();
        assert_eq!(platform_list(&admitted), "linux/arm64");
        let affinity = PlacementNeeds::of_pod_spec(&json!({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}
        ]}}}}));
        let admitted: Vec<_> = all.iter().filter(|p| affinity.admits(p)).cloned().collect();
        assert_eq!(platform_list(&admitted), "linux/amd64");
        let image = vec![Platform::new("linux", "amd64")];
        assert_eq!(
            platform_list(&missing_platforms(&image, &all)),
            "linux/arm64"
        );
        assert!(missing_platforms(&image, &admitted).is_empty());
        let mut v8 = Platform::new("linux", "arm64");
        v8.variant = Some("v8".into());
        assert!(missing_platforms(&[v8], &[Platform::new("linux", "arm64")]).is_empty());
    }

    #[test]
    fn credentials_come_from_helpers_then_auths_then_the_store() {
        let config = DockerConfig::parse(
            r#"{
                "auths": {
                    "https://index.docker.io/v1/": {"auth": "dXNlcjpwYXNz"},
                    "reg.example.com": {"username": "u", "password": "p"},
                    "http://localhost:5000": {"auth": "YTpiOmM="}
                },
                "credHelpers": {"gcr.io": "gcloud"},
                "credsStore": "desktop"
            }"#,
        )
        .unwrap();
        let basic = |u: &str, p: &str| {
            Some(CredentialSource::Basic {
                username: u.into(),
                password: p.into(),
            })
        };
        assert_eq!(config.credentials_for("docker.io"), basic("user", "pass"));
        assert_eq!(config.credentials_for("reg.example.com"), basic("u", "p"));
        assert_eq!(config.credentials_for("localhost:5000"), basic("a", "b:c"));
        assert_eq!(
            config.credentials_for("gcr.io"),
            Some(CredentialSource::Helper("gcloud".into()))
        );
        assert_eq!(
            config.credentials_for("other.example.com"),
            Some(CredentialSource::Helper("desktop".into()))
        );
        assert_eq!(DockerConfig::default().credentials_for("x.io"), None);
        assert!(DockerConfig::parse("{\"auths\": 1}").is_err());
        assert_eq!(
            helper_answer(br#"{"ServerURL":"x","Username":"u","Secret":"s"}"#).unwrap(),
            basic("u", "s")
        );
        assert_eq!(
            helper_answer(br#"{"Username":"<token>","Secret":"s"}"#).unwrap(),
            None
        );
        assert!(helper_answer(b"credentials not found").is_err());
    }

    #[test]
    fn plain_http_is_for_loopback_and_named_hosts_only() {
        assert!(plain_http("localhost:5000", &[]));
        assert!(plain_http("127.0.0.1:5000", &[]));
        assert!(plain_http("127.8.9.10", &[]));
        assert!(plain_http("[::1]:5000", &[]));
        assert!(!plain_http("10.0.0.1:5000", &[]));
        assert!(!plain_http("registry.example.com", &[]));
        assert!(plain_http(
            "registry.lan:5000",
            &["registry.lan:5000".to_owned()]
        ));
        assert!(!plain_http(
            "registry.lan:5001",
            &["registry.lan:5000".to_owned()]
        ));
    }
}
