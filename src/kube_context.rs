//! Kubeconfig → a kube client, the namespace and the context name, the way kubectl resolves
//! them: `--kubeconfig`, else `KUBECONFIG` (files merged, first wins, missing files skipped),
//! else `~/.kube/config`; `--context`/`--cluster`/`--user` override; the namespace is `-n`, else
//! the context's, else `default`. Exec credential plugins and client certificates are kube's.
//!
//! Error messages never include credential or certificate data: kube's errors are translated
//! into our own words, naming files, contexts, clusters and users only.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError};

use crate::error::AppError;
use crate::settings::{ClusterSelection, KubeconfigSource};

/// A ready client and where it points.
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
    pub context: String,
    /// The API server URL (for messages; carries no credentials).
    pub server: String,
    pub request_timeout: Option<std::time::Duration>,
}

fn read_one(path: &Path) -> Result<Kubeconfig, AppError> {
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(io, _) => AppError::Kubeconfig(format!(
            "cannot read kubeconfig {}: {}",
            path.display(),
            io_reason(&io)
        )),
        KubeconfigError::Parse(err) => {
            let at = err
                .location()
                .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                .unwrap_or_default();
            AppError::Kubeconfig(format!(
                "kubeconfig {} is not a valid kubeconfig{at}; fix the file or point --kubeconfig elsewhere",
                path.display()
            ))
        }
        other => AppError::Kubeconfig(format!(
            "kubeconfig {} cannot be used: {}",
            path.display(),
            describe_kubeconfig_error(&other)
        )),
    })
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".into(),
        _ => e.to_string(),
    }
}

/// Loads and merges the kubeconfig files; returns the merged config and the files used.
pub fn load_kubeconfig(source: &KubeconfigSource) -> Result<(Kubeconfig, Vec<PathBuf>), AppError> {
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
                    Some(m) => m.merge(next).map_err(|e| {
                        AppError::Kubeconfig(format!(
                            "cannot merge kubeconfig {}: {}",
                            p.display(),
                            describe_kubeconfig_error(&e)
                        ))
                    })?,
                });
            }
            match merged {
                Some(m) => Ok((m, used)),
                None => Err(AppError::Kubeconfig(format!(
                    "none of the files in KUBECONFIG exists ({}); set KUBECONFIG or pass --kubeconfig",
                    paths
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        KubeconfigSource::Home(path) => {
            if !path.exists() {
                return Err(AppError::Kubeconfig(format!(
                    "no kubeconfig found: {} does not exist and KUBECONFIG is not set; pass --kubeconfig",
                    path.display()
                )));
            }
            Ok((read_one(path)?, vec![path.clone()]))
        }
        KubeconfigSource::Nowhere => Err(AppError::Kubeconfig(
            "no kubeconfig found: KUBECONFIG and HOME are not set; pass --kubeconfig".into(),
        )),
    }
}

fn load_data_reason(e: &LoadDataError) -> String {
    match e {
        // The decoder's message would quote bytes of the (possibly secret) data.
        LoadDataError::DecodeBase64(_) => "the data is not valid base64".into(),
        LoadDataError::ReadFile(io, path) => {
            format!("cannot read {}: {}", path.display(), io_reason(io))
        }
        LoadDataError::NoBase64DataOrFile => "neither data nor a file is given".into(),
    }
}

/// Describes a kubeconfig error without any of the data it was loading.
pub fn describe_kubeconfig_error(e: &KubeconfigError) -> String {
    match e {
        KubeconfigError::CurrentContextNotSet => "it has no current-context".into(),
        KubeconfigError::KindMismatch | KubeconfigError::ApiVersionMismatch => {
            "the files have different kinds or apiVersions".into()
        }
        KubeconfigError::LoadContext(name) => format!("context {name:?} does not exist"),
        KubeconfigError::LoadClusterOfContext(name) => format!("cluster {name:?} does not exist"),
        KubeconfigError::FindPath => "no kubeconfig path".into(),
        KubeconfigError::ReadConfig(io, path) => {
            format!("cannot read {}: {}", path.display(), io_reason(io))
        }
        KubeconfigError::Parse(_) => "it is not valid YAML".into(),
        KubeconfigError::MissingClusterUrl => "the cluster has no server URL".into(),
        KubeconfigError::ParseClusterUrl(_) => "the cluster's server URL is not a valid URL".into(),
        KubeconfigError::ParseProxyUrl(_) => "the proxy URL is not a valid URL".into(),
        KubeconfigError::LoadCertificateAuthority(d) => {
            format!("certificate-authority: {}", load_data_reason(d))
        }
        KubeconfigError::LoadClientCertificate(d) => {
            format!("client-certificate: {}", load_data_reason(d))
        }
        KubeconfigError::LoadClientKey(d) => format!("client-key: {}", load_data_reason(d)),
        KubeconfigError::ParseCertificates(_) => "the certificate data is not valid PEM".into(),
        #[allow(unreachable_patterns)]
        _ => "it cannot be used".into(),
    }
}

fn names<T>(items: &[T], name: impl Fn(&T) -> &String) -> String {
    let mut v: Vec<&str> = items.iter().map(|i| name(i).as_str()).collect();
    v.sort_unstable();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Resolves the kubeconfig and builds a client. Makes no request.
pub async fn connect(sel: &ClusterSelection) -> Result<Connection, AppError> {
    let (kubeconfig, files) = load_kubeconfig(&sel.kubeconfig)?;
    let where_ = files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");

    let context_name = match sel
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
    {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(AppError::Kubeconfig(format!(
                "kubeconfig {where_} has no current context; pass --context (contexts: {})",
                names(&kubeconfig.contexts, |c| &c.name)
            )));
        }
    };
    let Some(context) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
    else {
        return Err(AppError::Kubeconfig(format!(
            "context {context_name:?} does not exist in kubeconfig {where_} (contexts: {})",
            names(&kubeconfig.contexts, |c| &c.name)
        )));
    };
    let cluster_name = sel.cluster.clone().unwrap_or(context.cluster.clone());
    if !kubeconfig.clusters.iter().any(|c| c.name == cluster_name) {
        return Err(AppError::Kubeconfig(format!(
            "cluster {cluster_name:?} (context {context_name:?}) does not exist in kubeconfig {where_} (clusters: {})",
            names(&kubeconfig.clusters, |c| &c.name)
        )));
    }
    if let Some(user) = &sel.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(AppError::Kubeconfig(format!(
            "user {user:?} does not exist in kubeconfig {where_} (users: {})",
            names(&kubeconfig.auth_infos, |u| &u.name)
        )));
    }
    // A context naming a user that is not there would silently run as system:anonymous.
    if sel.user.is_none()
        && let Some(user) = context.user.as_ref().filter(|u| !u.is_empty())
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(AppError::Kubeconfig(format!(
            "user {user:?} (context {context_name:?}) does not exist in kubeconfig {where_} (users: {})",
            names(&kubeconfig.auth_infos, |u| &u.name)
        )));
    }
    let namespace = sel
        .namespace
        .clone()
        .or(context.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());

    let options = KubeConfigOptions {
        context: Some(context_name.clone()),
        cluster: sel.cluster.clone(),
        user: sel.user.clone(),
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            AppError::Kubeconfig(format!(
                "kubeconfig {where_}, context {context_name:?}: {}",
                describe_kubeconfig_error(&e)
            ))
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
    let server = config.cluster_url.to_string();
    let client = crate::transport::client(config).map_err(|e| {
        AppError::Kubeconfig(format!(
            "cannot set up a client for context {context_name:?}: {}",
            crate::error::one_line(&client_setup_reason(&e))
        ))
    })?;
    Ok(Connection {
        client,
        namespace,
        context: context_name,
        server,
        request_timeout: sel.request_timeout,
    })
}

fn client_setup_reason(e: &kube::Error) -> String {
    // Credential errors (exec plugins) carry command lines and output: describe them ourselves.
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(auth) = err.downcast_ref::<kube::client::AuthError>() {
            return format!(
                "cannot get credentials ({})",
                crate::error::describe_auth_error(auth)
            );
        }
        cur = err.source();
    }
    // TLS set-up errors name what is wrong (e.g. an invalid private key) without the data.
    let chain = crate::error::error_chain(e);
    let text = chain.join(": ");
    if text.to_lowercase().contains("key") {
        "the client key cannot be used (check client-key-data / client-key)".into()
    } else if text.to_lowercase().contains("certificate") || text.to_lowercase().contains("pem") {
        "the certificate data cannot be used (check certificate-authority-data / client-certificate-data)".into()
    } else {
        chain.first().cloned().unwrap_or_default()
    }
}
