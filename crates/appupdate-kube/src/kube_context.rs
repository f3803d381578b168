//! Kubeconfig → a kube client, the namespace and the context name, the way kubectl resolves
//! them: `--kubeconfig`, else `KUBECONFIG` (files merged, first wins, missing files skipped),
//! else `~/.kube/config`; `--context`/`--cluster`/`--user` override; the namespace is `-n`, else
//! the context's, else `default`. Exec credential plugins and client certificates are kube's.
//!
//! Error messages never include credential or certificate data: kube's errors are translated
//! into our own words, naming files, contexts, clusters and users only.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::config::{KubeConfigOptions, Kubeconfig, LoadDataError};

use crate::connections::{ConnectionLimit, Sessions};
use crate::credential_policy::CredentialPolicy;
use crate::describe::{describe_auth_error, one_line};
use crate::files;
use crate::proxy;
use crate::selection::{ClusterSelection, ContextSelector, KubeconfigSource};
use appupdate_model::text::Untrusted;

/// kube's own error for a kubeconfig that cannot be loaded.
type KubeKubeconfigError = kube::config::KubeconfigError;

/// Why the kubeconfig cannot be used. The messages name files, contexts, clusters and users,
/// never data from the file; kube's error, kept as the source, is not printed.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("cannot read kubeconfig {}: {}", shown(.path), io_reason(.source))]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "kubeconfig {} is not a valid kubeconfig{}; fix the file or point --kubeconfig elsewhere",
        shown(.path),
        .at.map(|(line, column)| format!(" at line {line}, column {column}")).unwrap_or_default()
    )]
    Invalid {
        path: PathBuf,
        /// Line and column of the parse error.
        at: Option<(u64, u64)>,
        #[source]
        source: KubeKubeconfigError,
    },
    #[error("kubeconfig {} cannot be used: {}", shown(.path), describe_kubeconfig_error(.source))]
    Unusable {
        path: PathBuf,
        #[source]
        source: KubeKubeconfigError,
    },
    #[error("cannot merge kubeconfig {}: {}", shown(.path), describe_kubeconfig_error(.source))]
    Merge {
        path: PathBuf,
        #[source]
        source: KubeKubeconfigError,
    },
    #[error(
        "none of the files in KUBECONFIG exists ({}); set KUBECONFIG or pass --kubeconfig",
        list(.paths)
    )]
    NoneExists { paths: Vec<PathBuf> },
    #[error(
        "no kubeconfig found: {} does not exist and KUBECONFIG is not set; pass --kubeconfig",
        shown(.path)
    )]
    NoHomeFile { path: PathBuf },
    #[error("no kubeconfig found: KUBECONFIG and HOME are not set; pass --kubeconfig")]
    Nowhere,
    #[error(
        "no context in kubeconfig {files} matches --context-selector {:?} (the whole name must match; contexts: {contexts})",
        Untrusted(.selector)
    )]
    NoContextMatches {
        selector: String,
        files: String,
        contexts: String,
    },
    #[error("kubeconfig {files} has no current context; pass --context (contexts: {contexts})")]
    NoCurrentContext { files: String, contexts: String },
    #[error("context {:?} does not exist in kubeconfig {files} (contexts: {contexts})", Untrusted(.context))]
    NoSuchContext {
        context: String,
        files: String,
        contexts: String,
    },
    #[error(
        "cluster {:?} (context {:?}) does not exist in kubeconfig {files} (clusters: {clusters})",
        Untrusted(.cluster), Untrusted(.context)
    )]
    NoSuchCluster {
        cluster: String,
        context: String,
        files: String,
        clusters: String,
    },
    /// `--user`, or the context's user (`context` is then its name), is not in the file.
    #[error(
        "user {:?}{} does not exist in kubeconfig {files} (users: {users})",
        Untrusted(.user),
        .context.as_ref().map(|c| format!(" (context {:?})", Untrusted(c))).unwrap_or_default()
    )]
    NoSuchUser {
        user: String,
        context: Option<String>,
        files: String,
        users: String,
    },
    /// The context's namespace (no `-n`) is not a namespace name: requests to it could not
    /// even be built.
    #[error(
        "kubeconfig {files}, context {:?}: the namespace {:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63); fix the context or pass -n",
        Untrusted(.context), Untrusted(.namespace)
    )]
    InvalidNamespace {
        files: String,
        context: String,
        namespace: String,
    },
    #[error("kubeconfig {files}, context {:?}: {}", Untrusted(.context), describe_kubeconfig_error(.source))]
    Config {
        files: String,
        context: String,
        #[source]
        source: KubeKubeconfigError,
    },
    /// The cluster's `proxy-url` is not valid.
    #[error("kubeconfig {files}, cluster {:?}: {source}", Untrusted(.cluster))]
    ProxyUrl {
        files: String,
        cluster: String,
        #[source]
        source: proxy::SelectError,
    },
    /// The proxy from the environment cannot be used.
    #[error(transparent)]
    Proxy(proxy::SelectError),
    /// kubectl's credential plugin policy (kuberc) does not let the user's exec plugin run: it
    /// was not started.
    #[error("{0}")]
    CredentialPluginNotAllowed(Box<PluginRefused>),
    #[error("cannot set up a client for context {:?}: {}", Untrusted(.context), one_line(&client_setup_reason(.source)))]
    Client {
        context: String,
        #[source]
        source: kube::Error,
    },
}

/// An exec credential plugin kubectl's credential plugin policy does not allow.
#[derive(Debug)]
pub struct PluginRefused {
    pub kuberc: PathBuf,
    pub plugin: String,
    pub user: String,
    pub context: String,
    pub why: crate::credential_policy::Refusal,
}

impl std::fmt::Display for PluginRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "kuberc {} does not allow the credential plugin {:?} of user {:?} (context {:?}): {}; the plugin was not run — {}",
            shown(&self.kuberc),
            Untrusted(&self.plugin),
            Untrusted(&self.user),
            Untrusted(&self.context),
            self.why,
            self.why.what_to_do()
        )
    }
}

/// File names come from the command line and the environment: escaped, as every name in
/// these messages is.
fn shown(path: &Path) -> String {
    Untrusted(path.display().to_string()).to_string()
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| shown(p))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A ready client and where it points.
#[derive(Clone)]
pub struct Connection {
    /// Made again by the first request after the connection was closed
    /// ([`crate::transport::Client`]).
    pub client: crate::transport::Client,
    pub namespace: String,
    pub context: String,
    /// The API server URL, for messages and saved plans: its user information (a password or a
    /// token) replaced by `…` ([`appupdate_model::text::without_credentials`]).
    pub server: String,
    pub request_timeout: Option<std::time::Duration>,
    /// The proxy the connection goes through, e.g. `http://proxy.corp:3128 (HTTPS_PROXY)`
    /// (carries no credentials).
    pub proxy: Option<String>,
    /// Who the requests are made as, by the kubeconfig: `--as`, else the kubeconfig user's
    /// name (`--user`, else the context's); `None` when the context names no user.
    pub user: Option<String>,
    /// The user impersonated with `--as` (the server authorizes the requests as them).
    pub as_user: Option<String>,
    /// When the connection is open: within a session ([`crate::connections`]), each counted
    /// against the run's limit.
    pub sessions: std::sync::Arc<crate::connections::Sessions>,
}

/// Stands in for the cluster's `proxy-url` while kube loads the kubeconfig (never dialled).
const PROXY_PLACEHOLDER: &str = "http://proxy-chosen-by-kubectl-appupdate.invalid";

/// One kubeconfig file, read within its bound ([`files::FileKind::Kubeconfig`]) and loaded as
/// kube's `Kubeconfig::read_from` loads it: UTF-8, or UTF-16 behind a byte order mark; the
/// files it names relative to its directory.
fn read_one(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let path = path.to_owned();
    let text = files::read_bounded(&path, files::FileKind::Kubeconfig)
        .and_then(decode)
        .map_err(|source| KubeconfigError::Unreadable {
            path: path.clone(),
            source,
        })?;
    let mut config = match from_json(&text) {
        Some(config) => config,
        None => Kubeconfig::from_yaml(&text).map_err(|e| match e {
            KubeKubeconfigError::Parse(ref err) => KubeconfigError::Invalid {
                at: err.location().map(|l| (l.line(), l.column())),
                path: path.clone(),
                source: e,
            },
            source => KubeconfigError::Unusable {
                path: path.clone(),
                source,
            },
        })?,
    };
    if let Some(dir) = path.parent() {
        absolute_paths(&mut config, dir);
    }
    Ok(config)
}

/// A kubeconfig written as JSON (as tools that merge the kubeconfigs of a fleet often write
/// it), read with the JSON reader: kube's YAML reader took ~175 ms of CPU for a kubeconfig of
/// 2 000 clusters, all of it before the first connection, even when one context is used; the
/// JSON reader reads the same text in a fraction of that. JSON is YAML, and a JSON document the
/// YAML reader accepts is the same document read either way; what the YAML reader refuses and
/// the JSON reader would let through is left to the YAML reader: a key twice in one object
/// (the JSON reader keeps the last), text outside YAML's characters, a tab, a key whose colon
/// is on another line or far from its start (YAML's implicit keys: one line, 1 024 characters),
/// a document beyond the YAML reader's budget (nesting, nodes). Anything else — not an object,
/// more than one document, a value of another type than kube expects, any error — is `None`
/// too, and the YAML reader reads the text as it always did, its result and its messages
/// unchanged.
fn from_json(text: &str) -> Option<Kubeconfig> {
    if !text.trim_start().starts_with('{') || !plain_json_text(text) {
        return None;
    }
    let mut limits = JsonLimits { nodes: 0, depth: 0 };
    serde::de::DeserializeSeed::deserialize(
        &mut limits,
        &mut serde_json::Deserializer::from_str(text),
    )
    .ok()?;
    serde_json::from_str(text).ok()
}

/// Keys whose colon is farther than this from their opening quote go to the YAML reader (its
/// implicit keys end within 1 024 characters).
const KEY_SPAN: usize = 1000;
/// Nesting and node counts past which a document goes to the YAML reader: well within its
/// budget (serde-saphyr's defaults: a depth of 64, 250 000 nodes), so that nothing it refuses
/// for size is read here.
const JSON_DEPTH: usize = 48;
const JSON_NODES: usize = 200_000;

/// Whether `text` has only characters YAML reads (printable, no tab) and every object key's
/// colon on the key's line, within [`KEY_SPAN`] characters of its opening quote. A linear pass
/// over the text, strings followed by their escapes.
fn plain_json_text(text: &str) -> bool {
    let printable = |c: char| {
        matches!(
            c,
            '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}'
                | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}'
        ) || c >= '\u{10000}'
    };
    if !text.chars().all(printable) {
        return false;
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    // Where the last string began, and where it ended (the byte after its closing quote).
    let mut last_string: Option<(usize, usize)> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let open = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                last_string = Some((open, i));
                continue;
            }
            b':' => {
                let Some((open, close)) = last_string else {
                    return false;
                };
                let between = bytes.get(close..i).unwrap_or_default();
                if i - open > KEY_SPAN || between.iter().any(|b| matches!(b, b'\n' | b'\r')) {
                    return false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    true
}

/// A JSON document in which no object has a key twice, no deeper than [`JSON_DEPTH`] and of
/// at most [`JSON_NODES`] values and keys (what the YAML reader refuses, or may).
struct JsonLimits {
    nodes: usize,
    depth: usize,
}

impl JsonLimits {
    fn node<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.nodes += 1;
        if self.nodes > JSON_NODES || self.depth > JSON_DEPTH {
            return Err(E::custom("left to the YAML reader"));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for &mut JsonLimits {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &mut JsonLimits {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.node()
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.node()
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.node()
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.node()
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.node()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.node()
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.node()?;
        self.depth += 1;
        while seq.next_element_seed(&mut *self)?.is_some() {}
        self.depth -= 1;
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.node()?;
        self.depth += 1;
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            self.node()?;
            if !keys.insert(key) {
                return Err(serde::de::Error::custom("a key twice in one object"));
            }
            map.next_value_seed(&mut *self)?;
        }
        self.depth -= 1;
        Ok(())
    }
}

/// A kubeconfig's bytes as text: UTF-8, or UTF-16 (little or big endian) behind its byte
/// order mark, as kube reads them.
fn decode(bytes: Vec<u8>) -> std::io::Result<String> {
    let utf16 = |rest: &[u8], unit: fn([u8; 2]) -> u16| {
        let units: Vec<u16> = rest
            .chunks(2)
            .map(|c| unit([c[0], c.get(1).copied().unwrap_or(0)]))
            .collect();
        String::from_utf16(&units).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "invalid UTF-16 text")
        })
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        _ => String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
    }
}

/// The files a kubeconfig names relative to its directory `dir`, made absolute (certificates,
/// keys, token files, and exec commands that contain a path separator), as kube's
/// `Kubeconfig::read_from` does.
fn absolute_paths(config: &mut Kubeconfig, dir: &Path) {
    let fix = |file: &mut Option<String>| {
        if let Some(f) = file.as_deref()
            && Path::new(f).is_relative()
            && let Some(abs) = dir.join(f).to_str()
        {
            *file = Some(abs.to_owned());
        }
    };
    for named in &mut config.clusters {
        if let Some(cluster) = &mut named.cluster {
            fix(&mut cluster.certificate_authority);
        }
    }
    for named in &mut config.auth_infos {
        if let Some(auth) = &mut named.auth_info {
            fix(&mut auth.client_certificate);
            fix(&mut auth.client_key);
            fix(&mut auth.token_file);
            if let Some(exec) = &mut auth.exec
                && exec
                    .command
                    .as_deref()
                    .is_some_and(|c| c.contains(std::path::MAIN_SEPARATOR))
            {
                fix(&mut exec.command);
            }
        }
    }
}

fn io_reason(e: &std::io::Error) -> String {
    if files::is_too_large(e) {
        return e.to_string();
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".into(),
        _ => e.to_string(),
    }
}

/// Loads and merges the kubeconfig files; returns the merged config and the files used.
pub fn load_kubeconfig(
    source: &KubeconfigSource,
) -> Result<(Kubeconfig, Vec<PathBuf>), KubeconfigError> {
    match source {
        KubeconfigSource::Flag(path) => Ok((read_one(path)?, vec![path.clone()])),
        KubeconfigSource::Env(paths) => {
            let mut merged: Option<Kubeconfig> = None;
            let mut used = Vec::new();
            for p in paths {
                if !p.exists() {
                    continue; // client-go skips missing files listed in KUBECONFIG
                }
                let next = read_one(p)?;
                used.push(p.clone());
                merged = Some(match merged {
                    None => next,
                    Some(m) => m.merge(next).map_err(|source| KubeconfigError::Merge {
                        path: p.clone(),
                        source,
                    })?,
                });
            }
            match merged {
                Some(m) => Ok((m, used)),
                None => Err(KubeconfigError::NoneExists {
                    paths: paths.clone(),
                }),
            }
        }
        KubeconfigSource::Home(path) => {
            if !path.exists() {
                return Err(KubeconfigError::NoHomeFile { path: path.clone() });
            }
            Ok((read_one(path)?, vec![path.clone()]))
        }
        KubeconfigSource::Nowhere => Err(KubeconfigError::Nowhere),
    }
}

fn load_data_reason(e: &LoadDataError) -> String {
    match e {
        // The decoder's message would quote bytes of the (possibly secret) data.
        LoadDataError::DecodeBase64(_) => "the data is not valid base64".into(),
        LoadDataError::ReadFile(io, path) => {
            format!("cannot read {}: {}", shown(path), io_reason(io))
        }
        LoadDataError::NoBase64DataOrFile => "neither data nor a file is given".into(),
    }
}

/// Describes a kubeconfig error without any of the data it was loading.
pub fn describe_kubeconfig_error(e: &KubeKubeconfigError) -> String {
    use KubeKubeconfigError as K;
    match e {
        K::CurrentContextNotSet => "it has no current-context".into(),
        K::KindMismatch | K::ApiVersionMismatch => {
            "the files have different kinds or apiVersions".into()
        }
        K::LoadContext(name) => format!("context {:?} does not exist", Untrusted(name)),
        K::LoadClusterOfContext(name) => format!("cluster {:?} does not exist", Untrusted(name)),
        K::FindPath => "no kubeconfig path".into(),
        K::ReadConfig(io, path) => {
            format!("cannot read {}: {}", shown(path), io_reason(io))
        }
        K::Parse(_) => "it is not valid YAML".into(),
        K::MissingClusterUrl => "the cluster has no server URL".into(),
        K::ParseClusterUrl(_) => "the cluster's server URL is not a valid URL".into(),
        K::ParseProxyUrl(_) => "the proxy URL is not a valid URL".into(),
        K::LoadCertificateAuthority(d) => {
            format!("certificate-authority: {}", load_data_reason(d))
        }
        K::LoadClientCertificate(d) => {
            format!("client-certificate: {}", load_data_reason(d))
        }
        K::LoadClientKey(d) => format!("client-key: {}", load_data_reason(d)),
        K::ParseCertificates(_) => "the certificate data is not valid PEM".into(),
        #[allow(unreachable_patterns)]
        _ => "it cannot be used".into(),
    }
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &String) -> String {
    let mut v: Vec<String> = items
        .iter()
        .map(|i| Untrusted(name(i)).to_string())
        .collect();
    v.sort_unstable();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// `kubeconfig` with only the entries kube's loader looks up for `context`: that context, the
/// `cluster`, and the user named by `--user` or the context (every entry of those names, in
/// order, so that the loader finds the same first one). A run over a fleet connects once per
/// context: handing kube the whole merged kubeconfig every time copied all of it per context
/// (quadratic in the fleet's size: at 256 clusters, a fifth of the run's CPU time).
fn selected_only(
    kubeconfig: &Kubeconfig,
    entries: &Entries,
    sel: &ClusterSelection,
    context: &str,
    cluster: &str,
) -> Kubeconfig {
    let user = sel.user.as_deref().or_else(|| {
        entries
            .context(kubeconfig, context)
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.user.as_deref())
    });
    let all = |index: &HashMap<String, Vec<usize>>, name: Option<&str>| -> Vec<usize> {
        name.and_then(|n| index.get(n)).cloned().unwrap_or_default()
    };
    Kubeconfig {
        preferences: kubeconfig.preferences.clone(),
        clusters: all(&entries.clusters, Some(cluster))
            .into_iter()
            .map(|i| kubeconfig.clusters[i].clone())
            .collect(),
        auth_infos: all(&entries.users, user)
            .into_iter()
            .map(|i| kubeconfig.auth_infos[i].clone())
            .collect(),
        contexts: all(&entries.contexts, Some(context))
            .into_iter()
            .map(|i| kubeconfig.contexts[i].clone())
            .collect(),
        current_context: Some(context.to_owned()),
        extensions: kubeconfig.extensions.clone(),
        kind: kubeconfig.kind.clone(),
        api_version: kubeconfig.api_version.clone(),
        other: kubeconfig.other.clone(),
    }
}

/// Where the entries of each name are in a kubeconfig's lists, in order: made once per run, so
/// that each context of a fleet is looked up by name instead of by a scan of every entry (a
/// fleet of N clusters has N contexts, clusters and users or more: N scans of them each were
/// quadratic in the fleet's size).
#[derive(Debug, Default)]
struct Entries {
    contexts: HashMap<String, Vec<usize>>,
    clusters: HashMap<String, Vec<usize>>,
    users: HashMap<String, Vec<usize>>,
}

impl Entries {
    fn of(kubeconfig: &Kubeconfig) -> Entries {
        fn index<'a>(names: impl Iterator<Item = &'a String>) -> HashMap<String, Vec<usize>> {
            let mut map: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, name) in names.enumerate() {
                map.entry(name.clone()).or_default().push(i);
            }
            map
        }
        Entries {
            contexts: index(kubeconfig.contexts.iter().map(|c| &c.name)),
            clusters: index(kubeconfig.clusters.iter().map(|c| &c.name)),
            users: index(kubeconfig.auth_infos.iter().map(|u| &u.name)),
        }
    }

    /// The first context named `name`, as kube's loader finds it.
    fn context<'k>(
        &self,
        kubeconfig: &'k Kubeconfig,
        name: &str,
    ) -> Option<&'k kube::config::NamedContext> {
        let i = *self.contexts.get(name)?.first()?;
        kubeconfig.contexts.get(i)
    }

    /// The first user named `name`.
    fn user<'k>(
        &self,
        kubeconfig: &'k Kubeconfig,
        name: &str,
    ) -> Option<&'k kube::config::NamedAuthInfo> {
        let i = *self.users.get(name)?.first()?;
        kubeconfig.auth_infos.get(i)
    }
}

/// The context, cluster and namespace a run uses, checked against the kubeconfig.
struct Selected {
    context: String,
    cluster: String,
    namespace: String,
    user: Option<String>,
}

/// kubectl's choice of context (`--context`, else the current one), cluster (`--cluster`, else
/// the context's) and namespace (`-n`, else the context's, else `default`); every name must
/// exist in the kubeconfig, users included (a context naming a user that is not there would
/// silently run as system:anonymous).
fn select(
    kubeconfig: &Kubeconfig,
    entries: &Entries,
    sel: &ClusterSelection,
    context: Option<&str>,
    files: &str,
) -> Result<Selected, KubeconfigError> {
    let files = files.to_owned();
    let contexts = || names(&kubeconfig.contexts, |c| &c.name);
    let users = || names(&kubeconfig.auth_infos, |u| &u.name);
    let context_name = match context
        .map(str::to_owned)
        .or_else(|| kubeconfig.current_context.clone())
    {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(KubeconfigError::NoCurrentContext {
                files,
                contexts: contexts(),
            });
        }
    };
    let Some(context) = entries
        .context(kubeconfig, &context_name)
        .and_then(|c| c.context.as_ref())
    else {
        return Err(KubeconfigError::NoSuchContext {
            context: context_name,
            files,
            contexts: contexts(),
        });
    };
    let cluster = sel.cluster.clone().unwrap_or(context.cluster.clone());
    if !entries.clusters.contains_key(&cluster) {
        return Err(KubeconfigError::NoSuchCluster {
            cluster,
            context: context_name,
            files,
            clusters: names(&kubeconfig.clusters, |c| &c.name),
        });
    }
    let (user, named_by_context) = match &sel.user {
        Some(user) => (Some(user), false),
        None => (context.user.as_ref().filter(|u| !u.is_empty()), true),
    };
    if let Some(user) = user
        && !entries.users.contains_key(user)
    {
        return Err(KubeconfigError::NoSuchUser {
            user: user.clone(),
            context: named_by_context.then_some(context_name),
            files,
            users: users(),
        });
    }
    let namespace = sel
        .namespace
        .clone()
        .or(context.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    if !appupdate_model::names::is_dns1123_label(&namespace) {
        return Err(KubeconfigError::InvalidNamespace {
            files,
            context: context_name,
            namespace,
        });
    }
    Ok(Selected {
        context: context_name,
        cluster,
        namespace,
        user: user.cloned(),
    })
}

/// The kubeconfig, loaded and merged once for every context a run uses.
#[derive(Clone)]
pub struct Loaded {
    kubeconfig: Kubeconfig,
    /// Its entries by name.
    entries: Arc<Entries>,
    /// The files it came from, for messages.
    files: String,
    /// kubectl's credential plugin policy (its kuberc), read once.
    credential_policy: CredentialPolicy,
    /// How many of the clients built from it may have a connection open at once.
    limit: ConnectionLimit,
}

impl Loaded {
    /// Loads and merges the kubeconfig `sel` names.
    pub fn load(sel: &ClusterSelection) -> Result<Loaded, KubeconfigError> {
        let (kubeconfig, files) = load_kubeconfig(&sel.kubeconfig)?;
        Ok(Loaded {
            entries: Arc::new(Entries::of(&kubeconfig)),
            kubeconfig,
            files: list(&files),
            credential_policy: CredentialPolicy::load(&sel.credential_policy),
            limit: ConnectionLimit::unbounded(),
        })
    }

    /// The clients built from now on share `limit` (by default there is none).
    pub fn limit_connections(&mut self, limit: ConnectionLimit) {
        self.limit = limit;
    }

    /// Checks, for each of `contexts` (`None`: `sel.context`, else the current one), that the
    /// user's exec credential plugin, if any, is one kubectl's credential plugin policy lets
    /// run; before any client is built, so that a fleet is refused as a whole.
    pub fn check_credential_plugins(
        &self,
        sel: &ClusterSelection,
        contexts: &[Option<&str>],
    ) -> Result<(), KubeconfigError> {
        for context in contexts {
            let selected = select(
                &self.kubeconfig,
                &self.entries,
                sel,
                context.or(sel.context.as_deref()),
                &self.files,
            )?;
            check_plugin(
                &self.kubeconfig,
                &self.entries,
                &self.credential_policy,
                &selected,
            )?;
        }
        Ok(())
    }

    /// The contexts of a run over several clusters: every context in `named` (`--context`,
    /// `--contexts`, or a plan file's), then every other one whose name `selector` matches,
    /// in the kubeconfig's order; with neither, the current context. A named context that is
    /// not in the kubeconfig, or a selector that matches nothing, is refused.
    pub fn fleet_contexts(
        &self,
        named: &[String],
        selector: Option<&ContextSelector>,
    ) -> Result<Vec<String>, KubeconfigError> {
        let known = || names(&self.kubeconfig.contexts, |c| &c.name);
        let mut chosen: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for name in named {
            if !self.entries.contexts.contains_key(name) {
                return Err(KubeconfigError::NoSuchContext {
                    context: name.clone(),
                    files: self.files.clone(),
                    contexts: known(),
                });
            }
            if seen.insert(name) {
                chosen.push(name.clone());
            }
        }
        if let Some(selector) = selector {
            let matched: Vec<&String> = self
                .kubeconfig
                .contexts
                .iter()
                .map(|c| &c.name)
                .filter(|n| selector.matches(n))
                .collect();
            if matched.is_empty() {
                return Err(KubeconfigError::NoContextMatches {
                    selector: selector.text.clone(),
                    files: self.files.clone(),
                    contexts: known(),
                });
            }
            for name in matched {
                if seen.insert(name) {
                    chosen.push(name.clone());
                }
            }
        }
        if chosen.is_empty() {
            match self
                .kubeconfig
                .current_context
                .as_ref()
                .filter(|c| !c.is_empty())
            {
                Some(current) => chosen.push(current.clone()),
                None => {
                    return Err(KubeconfigError::NoCurrentContext {
                        files: self.files.clone(),
                        contexts: known(),
                    });
                }
            }
        }
        Ok(chosen)
    }

    /// Builds a client for `context` (`None`: `sel.context`, else the current context) whose
    /// answers' warnings go to `on_warning`. Makes no request.
    pub async fn connect(
        &self,
        sel: &ClusterSelection,
        context: Option<&str>,
        on_warning: fn(&str),
    ) -> Result<Connection, KubeconfigError> {
        connect_to(self, sel, context.or(sel.context.as_deref()), on_warning).await
    }
}

/// Resolves the kubeconfig and builds a client whose answers' warnings go to `on_warning`.
/// Makes no request.
pub async fn connect(
    sel: &ClusterSelection,
    on_warning: fn(&str),
) -> Result<Connection, KubeconfigError> {
    Loaded::load(sel)?.connect(sel, None, on_warning).await
}

/// The exec plugin of the selected user (the first entry of its name, as kube's loader finds
/// it), checked against the credential plugin policy.
fn check_plugin(
    kubeconfig: &Kubeconfig,
    entries: &Entries,
    policy: &CredentialPolicy,
    selected: &Selected,
) -> Result<(), KubeconfigError> {
    let Some(user) = &selected.user else {
        return Ok(());
    };
    let command = entries
        .user(kubeconfig, user)
        .and_then(|u| u.auth_info.as_ref())
        .and_then(|a| a.exec.as_ref())
        .and_then(|e| e.command.as_deref());
    let Some(command) = command else {
        return Ok(());
    };
    policy.check(command).map_err(|why| {
        KubeconfigError::CredentialPluginNotAllowed(Box::new(PluginRefused {
            kuberc: policy.file.clone().unwrap_or_default(),
            plugin: command.to_owned(),
            user: user.clone(),
            context: selected.context.clone(),
            why,
        }))
    })
}

async fn connect_to(
    loaded: &Loaded,
    sel: &ClusterSelection,
    context: Option<&str>,
    on_warning: fn(&str),
) -> Result<Connection, KubeconfigError> {
    let Loaded {
        kubeconfig,
        entries,
        files,
        credential_policy,
        limit,
    } = loaded;
    let files = files.to_owned();
    let selected = select(kubeconfig, entries, sel, context, &files)?;
    // Before kube sees the kubeconfig: it may run the plugin while loading it.
    check_plugin(kubeconfig, entries, credential_policy, &selected)?;
    let Selected {
        context,
        cluster,
        namespace,
        user,
    } = selected;
    let mut kubeconfig = selected_only(kubeconfig, entries, sel, &context, &cluster);

    // The cluster's proxy-url is ours to interpret (kubectl's rules, `crate::proxy`). Left
    // empty, kube would read HTTPS_PROXY itself (ignoring NO_PROXY) and fail to parse what it
    // does not understand; a placeholder keeps it from reading the environment at all.
    let proxy_url = kubeconfig
        .clusters
        .iter_mut()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.as_mut())
        .and_then(|c| c.proxy_url.replace(PROXY_PLACEHOLDER.to_owned()));

    let options = KubeConfigOptions {
        context: Some(context.clone()),
        cluster: sel.cluster.clone(),
        user: sel.user.clone(),
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| KubeconfigError::Config {
            files: files.clone(),
            context: context.clone(),
            source,
        })?;
    if let Some(user) = &sel.as_user {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !sel.as_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(sel.as_groups.clone());
    }
    if let Some(t) = sel.request_timeout {
        config.read_timeout = Some(t);
        config.write_timeout = Some(t);
        config.connect_timeout = Some(config.connect_timeout.map_or(t, |c| c.min(t)));
    }
    // A password or token in the server URL is never kept: this is the URL messages show and
    // saved plans carry (and compare).
    let server =
        appupdate_model::text::without_credentials(&config.cluster_url.to_string()).into_owned();
    config.proxy_url = None;
    let proxy = proxy::select(
        proxy_url.as_deref(),
        &proxy::Target::from_uri(&config.cluster_url),
        &sel.proxy_env,
    )
    .map_err(|source| match source {
        proxy::SelectError::InvalidProxyUrl(_) => KubeconfigError::ProxyUrl {
            files,
            cluster,
            source,
        },
        proxy::SelectError::Cgi(_) => KubeconfigError::Proxy(source),
    })?;
    let warnings = crate::transport::Warnings::new(on_warning);
    let sessions = Sessions::new(limit.clone());
    let client = crate::transport::client(config, proxy.as_ref(), Some(warnings), &sessions)
        .map_err(|source| KubeconfigError::Client {
            context: context.clone(),
            source,
        })?;
    Ok(Connection {
        client,
        namespace,
        context,
        server,
        request_timeout: sel.request_timeout,
        proxy: proxy.map(|p| p.to_string()),
        user: sel.as_user.clone().or(user),
        as_user: sel.as_user.clone(),
        sessions,
    })
}

fn client_setup_reason(e: &kube::Error) -> String {
    use kube::client::RustlsTlsError as Tls;
    // Credential errors (exec plugins) carry command lines and output: describe them ourselves.
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(auth) = err.downcast_ref::<kube::client::AuthError>() {
            return format!("cannot get credentials ({})", describe_auth_error(auth));
        }
        cur = err.source();
    }
    // TLS set-up errors say what is wrong (e.g. an invalid private key) without the data.
    const KEY: &str = "the client key cannot be used (check client-key-data / client-key)";
    const CERTIFICATES: &str = "the certificate data cannot be used (check certificate-authority-data / client-certificate-data)";
    match e {
        kube::Error::RustlsTls(
            Tls::InvalidPrivateKey(_) | Tls::MissingPrivateKey | Tls::UnknownPrivateKeyFormat,
        )
        | kube::Error::InferKubeconfig(KubeKubeconfigError::LoadClientKey(_)) => KEY.into(),
        kube::Error::RustlsTls(
            Tls::InvalidIdentityPem(_)
            | Tls::MissingCertificate
            | Tls::AddRootCertificate(_)
            | Tls::NoValidNativeRootCA(_),
        )
        | kube::Error::InferKubeconfig(
            KubeKubeconfigError::LoadClientCertificate(_)
            | KubeKubeconfigError::LoadCertificateAuthority(_)
            | KubeKubeconfigError::ParseCertificates(_),
        ) => CERTIFICATES.into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two entries named `a` in each list (a merged kubeconfig keeps both; the loader uses the
    /// first), and others around them.
    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://a-1.example"}}
- {name: b, cluster: {server: "https://b.example"}}
- {name: a, cluster: {server: "https://a-2.example"}}
users:
- {name: a, user: {token: first}}
- {name: b, user: {token: b}}
- {name: a, user: {token: second}}
contexts:
- {name: a, context: {cluster: a, user: a, namespace: one}}
- {name: b, context: {cluster: b, user: b}}
- {name: a, context: {cluster: b, user: b, namespace: two}}
- {name: lost, context: {cluster: nowhere, user: a}}
- {name: nobody, context: {cluster: a, user: missing}}
"#;

    fn selection() -> ClusterSelection {
        ClusterSelection {
            kubeconfig: KubeconfigSource::Nowhere,
            context: None,
            contexts: Vec::new(),
            context_selector: None,
            several: false,
            cluster: None,
            user: None,
            namespace: None,
            as_user: None,
            as_groups: Vec::new(),
            request_timeout: None,
            proxy_env: proxy::ProxyEnv::default(),
            credential_policy: Default::default(),
        }
    }

    #[test]
    fn a_context_is_the_first_entry_of_its_name() {
        let k = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        let entries = Entries::of(&k);
        let s = select(&k, &entries, &selection(), Some("a"), "f").unwrap();
        assert_eq!(
            (s.cluster.as_str(), s.namespace.as_str(), s.user.as_deref()),
            ("a", "one", Some("a"))
        );
        let s = select(&k, &entries, &selection(), None, "f").unwrap();
        assert_eq!(s.context, "a");
        assert!(matches!(
            select(&k, &entries, &selection(), Some("c"), "f"),
            Err(KubeconfigError::NoSuchContext { .. })
        ));
        assert!(matches!(
            select(&k, &entries, &selection(), Some("lost"), "f"),
            Err(KubeconfigError::NoSuchCluster { .. })
        ));
        assert!(matches!(
            select(&k, &entries, &selection(), Some("nobody"), "f"),
            Err(KubeconfigError::NoSuchUser { .. })
        ));
    }

    /// A JSON kubeconfig read by the JSON reader is the one kube's YAML reader reads; what
    /// only the YAML reader refuses, or what the JSON reader cannot read as kube expects, goes
    /// to the YAML reader.
    #[test]
    fn a_json_kubeconfig_reads_as_the_yaml_reader_reads_it() {
        let json = r#" {
  "apiVersion": "v1", "kind": "Config", "current-context": "a",
  "preferences": {"colors": true},
  "clusters": [
    {"name": "a", "cluster": {"server": "https://a.example:6443",
      "certificate-authority-data": "Y2E=", "tls-server-name": "a\u00e9\n",
      "extensions": [{"name": "x", "extension": {"n": 1.5, "big": 12345678901, "l": [null, true]}}]}},
    {"name": "a", "cluster": {"server": "https://second.example", "proxy-url": "socks5://p:1080"}}
  ],
  "users": [
    {"name": "a", "user": {"token": "t0k\"en", "as": "someone", "as-groups": ["g1", "g2"]}},
    {"name": "e", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
      "command": "helper", "args": ["--x"], "env": [{"name": "K", "value": "V"}],
      "interactiveMode": "Never", "provideClusterInfo": false}}}
  ],
  "contexts": [{"name": "a", "context": {"cluster": "a", "user": "a", "namespace": "one",
    "extensions": null}}],
  "extensions": [],
  "somethingElse": {"kept": ["as", "it", "is"]}
}
"#;
        let fast = from_json(json).expect("read as JSON");
        let yaml = Kubeconfig::from_yaml(json).unwrap();
        assert_eq!(
            serde_json::to_value(&fast).unwrap(),
            serde_json::to_value(&yaml).unwrap()
        );
        // A key twice: the YAML reader refuses it, and so it is left to that reader.
        let twice = r#"{"kind": "Config", "clusters": [], "clusters": []}"#;
        assert!(from_json(twice).is_none());
        assert!(Kubeconfig::from_yaml(twice).is_err());
        let nested = r#"{"clusters": [{"name": "a", "cluster": {"server": "https://a", "server": "https://b"}}]}"#;
        assert!(from_json(nested).is_none());
        // Compact JSON reads the same.
        let compact = r#"{"kind":"Config","current-context":"a","contexts":[{"name":"a","context":{"cluster":"a","user":"u"}}],"users":[{"name":"u","user":{"token":"t:1"}}]}"#;
        assert_eq!(
            serde_json::to_value(from_json(compact).expect("read as JSON")).unwrap(),
            serde_json::to_value(Kubeconfig::from_yaml(compact).unwrap()).unwrap()
        );
        // What YAML does not read as JSON does (a tab, a character outside YAML's, a colon on
        // the line after its key, a key of more than 1 024 characters, deep nesting, too many
        // nodes): left to the YAML reader, which decides as it always did.
        let long_key = format!("{{\"{}\": 1}}", "k".repeat(1100));
        let deep = format!("{{\"x\": {}1{}}}", "[".repeat(60), "]".repeat(60));
        let many = format!("{{\"x\": [{}0]}}", "0,".repeat(JSON_NODES));
        for yaml_only in [
            "{\"kind\":\t\"Config\"}",
            "{\"kind\": \"Con\u{7f}fig\"}",
            "{\"kind\"\n: \"Config\"}",
            long_key.as_str(),
            deep.as_str(),
            many.as_str(),
        ] {
            assert!(from_json(yaml_only).is_none(), "{yaml_only:.80?}");
        }
        // A colon inside a string is not a key's.
        assert!(plain_json_text("{\"a\": \"x:\\\"y\\n:z\"}"));
        // Not an object, not JSON, two documents, a value of another type: the YAML reader's.
        for other in [
            "apiVersion: v1\nkind: Config\n",
            "",
            "[]",
            "{\"kind\": \"Config\"}\n---\n{\"kind\": \"Config\"}\n",
            "{\"current-context\": 5}",
            "{kind: Config}",
        ] {
            assert!(from_json(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn only_the_entries_of_the_selected_names_are_kept_every_one_in_order() {
        let k = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        let entries = Entries::of(&k);
        let only = selected_only(&k, &entries, &selection(), "a", "a");
        let servers: Vec<_> = only
            .clusters
            .iter()
            .map(|c| c.cluster.as_ref().and_then(|c| c.server.clone()).unwrap())
            .collect();
        assert_eq!(servers, ["https://a-1.example", "https://a-2.example"]);
        let names = |v: Vec<&String>| v.into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(only.auth_infos.iter().map(|u| &u.name).collect()),
            ["a", "a"]
        );
        let namespaces: Vec<_> = only
            .contexts
            .iter()
            .map(|c| c.context.as_ref().and_then(|c| c.namespace.clone()))
            .collect();
        assert_eq!(namespaces, [Some("one".to_owned()), Some("two".to_owned())]);
        assert_eq!(only.current_context.as_deref(), Some("a"));
        // --user names the user instead of the context.
        let mut sel = selection();
        sel.user = Some("b".into());
        let only = selected_only(&k, &entries, &sel, "a", "b");
        assert_eq!(
            names(only.auth_infos.iter().map(|u| &u.name).collect()),
            ["b"]
        );
        assert_eq!(
            names(only.clusters.iter().map(|c| &c.name).collect()),
            ["b"]
        );
    }
}
