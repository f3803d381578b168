//! Failures of requests, in the user's words: what failed, on which object, in which namespace
//! and context — one line, never a credential.
//!
//! Every value in a message — the object's reference, namespace and context, the server's
//! reason and message, a library's description — is escaped ([`Untrusted`], [`one_line`]): a
//! webhook's denial or a crafted context name cannot control the terminal.
//!
//! A server's answer ([`kube::core::Status`]) is described by its code and reason. A request
//! that got no answer is classified by the types in its error chain ([`classify`]): the I/O
//! error kinds, hyper's, h2's and rustls's errors, the transport's [`ResolveError`] — never by
//! matching error text, which a dependency upgrade may change. The text of kube's and the
//! transport's errors is not printed as is: it may quote a command line or a token.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use crate::proxy_connector::{ResolveError, find_proxy_error};
use appupdate_model::text::Untrusted;
pub use appupdate_model::text::one_line;

/// What a failed request was trying to do, for messages like
/// `cannot patch deployments.apps "web" in namespace "shop" (context "prod")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// kubectl-style reference, e.g. `deployment.apps/web`, or `ingresses.networking.k8s.io`
    /// for a list.
    pub reference: String,
    pub namespace: String,
    pub context: String,
    /// The user impersonated with `--as`, whose permissions the server checked.
    pub as_user: Option<String>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in namespace {:?} (context {:?})",
            Untrusted(&self.reference),
            Untrusted(&self.namespace),
            Untrusted(&self.context)
        )
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
            Untrusted(&target.reference),
            Untrusted(&target.namespace),
            Untrusted(&target.context)
        ),
        (401, _) => format!(
            "the cluster rejected the credentials of context {:?} (401 Unauthorized); \
             log in again or check the kubeconfig user",
            Untrusted(&target.context)
        ),
        (403, _) => match &target.as_user {
            // The impersonation itself was refused: the kubeconfig's user may not act as them.
            Some(user) if refuses_impersonation(status) => format!(
                "forbidden: context {:?} may not act as {:?} (--as): {msg}",
                Untrusted(&target.context),
                Untrusted(user)
            ),
            Some(user) => format!(
                "forbidden: {:?} (--as) cannot {verb} {target}: {msg}",
                Untrusted(user)
            ),
            None => format!("forbidden: you cannot {verb} {target}: {msg}"),
        },
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
                format!(" {}", Untrusted(reason))
            }
        ),
    }
}

/// Is this 403 the impersonation check's (the `impersonate` verb on users, groups, service
/// accounts, user extras or uids) rather than the request's own?
fn refuses_impersonation(status: &kube::core::Status) -> bool {
    status.details.as_ref().is_some_and(|d| {
        matches!(
            (d.group.as_str(), d.kind.as_str()),
            ("", "users" | "groups" | "serviceaccounts")
                | ("authentication.k8s.io", "userextras" | "uids")
        )
    })
}

/// Why a request got no answer from the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// Nothing listens at the server's address.
    Refused,
    /// A timeout of the transport (connect, read or write) ran out.
    TimedOut,
    /// The connection went away before the answer: reset, closed, a truncated message, an
    /// HTTP/2 stream reset or GOAWAY. The request may have been processed.
    ClosedEarly,
    /// The TLS handshake failed (rustls's description: an unknown certificate authority, a
    /// name mismatch…). Nothing was sent.
    Tls(String),
    /// The server's name did not resolve (the resolver's description). Nothing was sent.
    Unresolved(String),
    /// Credentials could not be obtained (an exec plugin, a token file). Nothing was sent.
    Credentials(String),
    /// Anything else: the innermost cause, on one line.
    Other(String),
}

impl Unanswered {
    /// Whether the request can have reached the server at all.
    pub fn may_have_been_sent(&self) -> bool {
        !matches!(
            self,
            Unanswered::Refused
                | Unanswered::Tls(_)
                | Unanswered::Unresolved(_)
                | Unanswered::Credentials(_)
        )
    }
}

/// The causes of `err`, outermost first. An [`io::Error`] that wraps another error is followed
/// into that error (its own `source()` skips it).
fn causes<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(err), |&e: &&'a (dyn StdError + 'static)| match e
        .downcast_ref::<io::Error>()
    {
        Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
        None => e.source(),
    })
}

/// What one cause says about an unanswered request, if anything.
fn classify_cause(e: &(dyn StdError + 'static)) -> Option<Unanswered> {
    use io::ErrorKind as K;
    if let Some(io) = e.downcast_ref::<io::Error>() {
        return match io.kind() {
            K::ConnectionRefused => Some(Unanswered::Refused),
            K::TimedOut => Some(Unanswered::TimedOut),
            // rustls reports a peer that closed without close_notify as UnexpectedEof.
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                Some(Unanswered::ClosedEarly)
            }
            _ => None,
        };
    }
    if let Some(h) = e.downcast_ref::<hyper::Error>() {
        if h.is_timeout() {
            return Some(Unanswered::TimedOut);
        }
        if h.is_canceled()
            || h.is_closed()
            || h.is_incomplete_message()
            || h.is_body_write_aborted()
        {
            return Some(Unanswered::ClosedEarly);
        }
        return None;
    }
    if let Some(h2) = e.downcast_ref::<h2::Error>() {
        // h2's error has no source: its I/O error is reached through get_io. Any other h2
        // error ended the stream or the connection with a reason (a reset, a GOAWAY).
        return match h2.get_io() {
            Some(io) => classify_cause(io),
            None => h2.reason().map(|_| Unanswered::ClosedEarly),
        };
    }
    if let Some(client) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
        // hyper-util gives a request that never got a connection (canceled, the connection's
        // channel closed) no cause of its own.
        return (!client.is_connect() && client.source().is_none())
            .then_some(Unanswered::ClosedEarly);
    }
    if e.is::<tokio::time::error::Elapsed>() {
        return Some(Unanswered::TimedOut);
    }
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(Unanswered::Tls(one_line(&tls.to_string())));
    }
    if let Some(resolve) = e.downcast_ref::<ResolveError>() {
        return Some(Unanswered::Unresolved(one_line(&resolve.to_string())));
    }
    if let Some(auth) = e.downcast_ref::<kube::client::AuthError>() {
        return Some(Unanswered::Credentials(describe_auth_error(auth)));
    }
    None
}

/// Classifies a request that got no answer by the types of the errors in its chain. When
/// several causes say something, the most telling wins: refused, timed out, closed early,
/// TLS, name resolution, credentials.
pub fn classify(err: &(dyn StdError + 'static)) -> Unanswered {
    let rank = |u: &Unanswered| match u {
        Unanswered::Refused => 0,
        Unanswered::TimedOut => 1,
        Unanswered::ClosedEarly => 2,
        Unanswered::Tls(_) => 3,
        Unanswered::Unresolved(_) => 4,
        Unanswered::Credentials(_) => 5,
        Unanswered::Other(_) => 6,
    };
    causes(err)
        .filter_map(classify_cause)
        .min_by_key(rank)
        .unwrap_or_else(|| {
            let innermost = causes(err).last().map(|e| one_line(&e.to_string()));
            Unanswered::Other(innermost.unwrap_or_else(|| "unknown error".into()))
        })
}

fn describe_transport_error(err: &kube::Error, target: &Target) -> String {
    // A proxy failure says itself which proxy did what.
    if let Some(proxy) = find_proxy_error(err) {
        return format!(
            "cannot reach the cluster of context {:?} for {}: {proxy}",
            Untrusted(&target.context),
            Untrusted(&target.reference)
        );
    }
    let what = match classify(err) {
        Unanswered::Refused => "connection refused".to_owned(),
        Unanswered::TimedOut => "the request timed out".to_owned(),
        Unanswered::ClosedEarly => {
            "the connection was closed before the response arrived".to_owned()
        }
        Unanswered::Tls(detail) => format!("TLS failure ({detail})"),
        Unanswered::Unresolved(detail) => format!("cannot resolve the server name ({detail})"),
        Unanswered::Credentials(detail) => format!("cannot get credentials ({detail})"),
        Unanswered::Other(innermost) => innermost,
    };
    format!(
        "cannot reach the cluster of context {:?} for {}: {what}",
        Untrusted(&target.context),
        Untrusted(&target.reference)
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
            format!(
                "the exec credential plugin could not be started: {}",
                one_line(&io.to_string())
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: io::ErrorKind) -> io::Error {
        io::Error::new(kind, "as the OS says it")
    }

    /// An error that wraps another, as hyper-util and kube wrap the transport's.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn StdError + Send + Sync>);

    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.1)
        }
    }

    fn wrapped(inner: impl StdError + Send + Sync + 'static) -> Wrapped {
        Wrapped("client error (Connect)", Box::new(inner))
    }

    fn forbidden(message: &str, kind: &str, name: &str) -> kube::core::Status {
        kube::core::Status::failure(message, "Forbidden")
            .with_code(403)
            .with_details(kube::core::response::StatusDetails {
                name: name.into(),
                group: String::new(),
                kind: kind.into(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            })
    }

    fn target(as_user: Option<&str>) -> Target {
        Target {
            reference: "deployment.apps/web".into(),
            namespace: "shop".into(),
            context: "prod".into(),
            as_user: as_user.map(str::to_owned),
        }
    }

    #[test]
    fn a_403_names_the_impersonated_user_when_there_is_one() {
        let s = forbidden(
            "deployments.apps \"web\" is forbidden: User \"readonly\" cannot patch resource \"deployments\"",
            "deployments",
            "web",
        );
        assert_eq!(
            describe_status(&s, "patch", &target(Some("readonly"))),
            "forbidden: \"readonly\" (--as) cannot patch deployment.apps/web in namespace \"shop\" (context \"prod\"): deployments.apps \"web\" is forbidden: User \"readonly\" cannot patch resource \"deployments\""
        );
        assert!(
            describe_status(&s, "patch", &target(None))
                .starts_with("forbidden: you cannot patch deployment.apps/web")
        );
    }

    #[test]
    fn a_refused_impersonation_says_the_context_may_not_act_as_the_user() {
        let s = forbidden(
            "users \"admin\" is forbidden: User \"readonly\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
            "users",
            "admin",
        );
        assert_eq!(
            describe_status(&s, "get", &target(Some("admin"))),
            "forbidden: context \"prod\" may not act as \"admin\" (--as): users \"admin\" is forbidden: User \"readonly\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
    }

    #[test]
    fn io_error_kinds_say_what_happened_to_the_connection() {
        for (kind, expected) in [
            (io::ErrorKind::ConnectionRefused, Unanswered::Refused),
            (io::ErrorKind::TimedOut, Unanswered::TimedOut),
            (io::ErrorKind::ConnectionReset, Unanswered::ClosedEarly),
            (io::ErrorKind::BrokenPipe, Unanswered::ClosedEarly),
            (io::ErrorKind::UnexpectedEof, Unanswered::ClosedEarly),
        ] {
            assert_eq!(classify(&wrapped(io(kind))), expected, "{kind:?}");
        }
    }

    #[test]
    fn an_error_inside_an_io_error_is_found() {
        // tokio-rustls hands rustls's error over inside an io::Error.
        let tls = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            classify(&wrapped(tls)),
            Unanswered::Tls("invalid peer certificate: UnknownIssuer".into())
        );
        let timeout = io::Error::other(Wrapped(
            "deadline",
            Box::new(io::Error::new(io::ErrorKind::TimedOut, "elapsed")),
        ));
        assert_eq!(classify(&wrapped(timeout)), Unanswered::TimedOut);
    }

    #[test]
    fn a_name_that_does_not_resolve_is_told_by_its_type() {
        let err = wrapped(ResolveError(io::Error::other(
            "failed to lookup address information: Name or service not known",
        )));
        let got = classify(&err);
        assert_eq!(
            got,
            Unanswered::Unresolved(
                "failed to lookup address information: Name or service not known".into()
            )
        );
        assert!(!got.may_have_been_sent());
    }

    #[test]
    fn http2_resets_and_goaways_close_early() {
        let reset = h2::Error::from(h2::Reason::CANCEL);
        assert_eq!(classify(&wrapped(reset)), Unanswered::ClosedEarly);
    }

    #[test]
    fn the_most_telling_cause_wins() {
        // A refused connection inside a TLS wrapper is refused.
        let err = wrapped(io::Error::new(
            io::ErrorKind::InvalidData,
            Wrapped("tls", Box::new(io(io::ErrorKind::ConnectionRefused))),
        ));
        assert_eq!(classify(&err), Unanswered::Refused);
    }

    #[test]
    fn anything_else_is_its_innermost_cause_on_one_line() {
        let err = wrapped(io::Error::other("the\nserver   said no"));
        assert_eq!(
            classify(&err),
            Unanswered::Other("the server said no".into())
        );
        assert!(classify(&err).may_have_been_sent());
    }
}
