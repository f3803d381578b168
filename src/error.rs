//! One error type for the whole run, mapped to exit codes in one place.
//!
//! Every variant renders as one line that says what went wrong, where (object, namespace,
//! context, file:line or flag) and what to do. No variant ever carries credentials: kube and
//! kubeconfig errors are translated here, never printed raw.

use std::fmt;

/// Exit codes, documented in `--help` and the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Success, or nothing to change.
    Ok = 0,
    /// Failed before any write: nothing was changed.
    Failed = 1,
    /// Changes pending (only with `--detailed-exitcode`).
    Changes = 2,
    /// Bad flags or input: nothing was changed.
    Usage = 3,
    /// Not confirmed: nothing was changed.
    NotConfirmed = 4,
    /// The approved-diff guard stopped the run.
    GuardTripped = 5,
    /// Failed after some writes: the state is mixed.
    Partial = 6,
    /// `--wait`: every change was applied, but the rollout did not complete (timed out, exceeded
    /// its progress deadline, or could not be followed).
    RolloutIncomplete = 7,
    /// Interrupted by SIGINT.
    Interrupted = 130,
    /// Terminated by SIGTERM.
    Terminated = 143,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// What a failed request was trying to do, for messages like
/// `cannot patch deployments.apps "web" in namespace "shop" (context "prod")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// kubectl-style reference, e.g. `deployment.apps/web`, or `ingresses.networking.k8s.io`
    /// for a list.
    pub reference: String,
    pub namespace: String,
    pub context: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in namespace {:?} (context {:?})",
            self.reference, self.namespace, self.context
        )
    }
}

/// Everything that can stop a run.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad flags or flag combinations.
    #[error("{0}")]
    Usage(String),
    /// Bad input file or value (endpoints file, image reference…).
    #[error("{0}")]
    Input(String),
    /// The kubeconfig cannot be used.
    #[error("{0}")]
    Kubeconfig(String),
    /// The requested change does not fit the live state (min > live max, container choice…).
    #[error("{0}")]
    Plan(String),
    /// The cluster could not be reached or answered with an error, before any write.
    #[error("{0}")]
    Cluster(String),
    /// The user said no, or could not be asked.
    #[error("{0}")]
    NotConfirmed(String),
    /// Interrupted by a signal.
    #[error("{0}")]
    Interrupted(String, ExitCode),
    /// `--wait`: the changes were applied but the rollout did not complete.
    #[error("{0}")]
    Rollout(String),
    /// Writing the output failed (e.g. a closed pipe).
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

impl AppError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            AppError::Usage(_) | AppError::Input(_) | AppError::Kubeconfig(_) => ExitCode::Usage,
            AppError::Plan(_) => ExitCode::Usage,
            AppError::Cluster(_) | AppError::Output(_) => ExitCode::Failed,
            AppError::NotConfirmed(_) => ExitCode::NotConfirmed,
            AppError::Interrupted(_, code) => *code,
            AppError::Rollout(_) => ExitCode::RolloutIncomplete,
        }
    }
}

/// Describes a kube client error in the user's language, naming the operation and the target.
/// `verb` is the RBAC verb (get, list, patch, create, delete).
pub fn describe_kube_error(err: &kube::Error, verb: &str, target: &Target) -> String {
    match err {
        kube::Error::Api(status) => describe_status(status, verb, target),
        other => describe_transport_error(other, target),
    }
}

fn describe_status(status: &kube::core::Status, verb: &str, target: &Target) -> String {
    let reason = status.reason.as_str();
    let msg = one_line(&status.message);
    match (status.code, reason) {
        (404, _) => format!(
            "{} not found in namespace {:?} (context {:?}); check the name and -n/--namespace",
            target.reference, target.namespace, target.context
        ),
        (401, _) => format!(
            "the cluster rejected the credentials of context {:?} (401 Unauthorized); \
             log in again or check the kubeconfig user",
            target.context
        ),
        (403, _) => format!(
            "forbidden: you cannot {verb} {} in namespace {:?} (context {:?}): {msg}",
            target.reference, target.namespace, target.context
        ),
        (409, "Conflict") => format!(
            "conflict on {target}: it was modified concurrently and the retries are exhausted; run again to see the new state"
        ),
        (409, "AlreadyExists") => format!("{} already exists: {msg}", target),
        (422, _) => format!("the cluster rejected the change to {target}: {msg}"),
        (code, _) => format!(
            "cannot {verb} {target}: the cluster answered {code}{}: {msg}",
            if reason.is_empty() {
                String::new()
            } else {
                format!(" {reason}")
            }
        ),
    }
}

/// The messages of an error and all its sources, outermost first.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        chain.push(e.to_string());
        cur = e.source();
    }
    chain
}

fn describe_transport_error(err: &kube::Error, target: &Target) -> String {
    // A proxy failure says itself which proxy did what.
    if let Some(proxy) = crate::proxy_connector::find_proxy_error(err) {
        return format!(
            "cannot reach the cluster of context {:?} for {}: {proxy}",
            target.context, target.reference
        );
    }
    // The most telling cause, without printing request details.
    let chain = error_chain(err);
    let all = chain.join(": ").to_lowercase();
    // A peer that closes a TLS connection mid-response (HTTP/1.1) shows up as rustls's
    // "peer closed connection without sending TLS close_notify"; it is not a TLS problem.
    let closed_early = all.contains("close_notify")
        || all.contains("unexpected eof")
        // hyper: the connection went away before the response head arrived.
        || all.contains("canceled")
        || all.contains("connection reset")
        || all.contains("connection closed")
        || all.contains("incomplete message")
        || all.contains("broken pipe")
        // HTTP/2: the server reset the stream or went away mid-exchange.
        || all.contains("stream error")
        || all.contains("error reading a body")
        || all.contains("goaway");
    let what = if all.contains("connection refused") {
        "connection refused".to_owned()
    } else if all.contains("timed out") || all.contains("timeout") || all.contains("elapsed") {
        "the request timed out".to_owned()
    } else if closed_early {
        "the connection was closed before the response arrived".to_owned()
    } else if all.contains("certificate") || all.contains("tls") || all.contains("handshake") {
        format!("TLS failure ({})", last_cause(&chain))
    } else if all.contains("dns") || all.contains("lookup") || all.contains("resolve") {
        format!("cannot resolve the server name ({})", last_cause(&chain))
    } else if let kube::Error::Auth(auth) = err {
        format!("cannot get credentials ({})", describe_auth_error(auth))
    } else {
        last_cause(&chain)
    };
    format!(
        "cannot reach the cluster of context {:?} for {}: {what}",
        target.context, target.reference
    )
}

/// Describes a credential failure without what kube's own message carries: the exec plugin's
/// command line (its arguments and environment may hold secrets such as an OIDC client
/// secret), its stdout (where a plugin prints the token) and the unparsable output quoted by
/// the parser. The plugin's stderr, which plugins write for people, is kept (first 200
/// characters, one line).
pub fn describe_auth_error(err: &kube::client::AuthError) -> String {
    use kube::client::AuthError as A;
    match err {
        A::AuthExecStart(io) => {
            format!("the exec credential plugin could not be started: {io}")
        }
        A::AuthExecRun { out, .. } => {
            let status = match out.status.code() {
                Some(code) => format!("exit status {code}"),
                None => "killed by a signal".to_owned(),
            };
            let said: String = one_line(&String::from_utf8_lossy(&out.stderr))
                .chars()
                .take(200)
                .collect();
            if said.is_empty() {
                format!("the exec credential plugin failed ({status})")
            } else {
                format!("the exec credential plugin failed ({status}): {said}")
            }
        }
        A::AuthExecParse(_) | A::ExecPluginFailed => {
            "the exec credential plugin did not print a valid ExecCredential".to_owned()
        }
        A::AuthExec(_) => "the credential command could not be run".to_owned(),
        A::InvalidBearerToken(_) => "the token is not a valid HTTP header value".to_owned(),
        A::InvalidBasicAuth(_) => {
            "the username or password is not a valid HTTP header value".to_owned()
        }
        A::ParseTokenKey(_) => "the token response is not valid JSON".to_owned(),
        // The remaining messages name only files, flags and states, never data.
        other => one_line(&other.to_string()),
    }
}

fn last_cause(chain: &[String]) -> String {
    chain
        .last()
        .map(|s| one_line(s))
        .unwrap_or_else(|| "unknown error".into())
}

/// Collapses whitespace so every message stays on one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
