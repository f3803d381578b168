//! `--verify-url URL`: after the writes, is auth enforced where the routes are served? The
//! pure part — the address, the requests to send, what each answer means, the lines that say
//! so. The plugin sends the requests over `appupdate_kube::probe` (no credentials, no retries,
//! a redirect never followed) and hands the answers back here.
//!
//! A route style writes what should make the routing layer ask the auth service about every
//! path with scopes; whether the layer does depends on things the API server does not check (a
//! Gateway API implementation without the experimental ExternalAuth filter accepts the route
//! and ignores the filter; an ingress controller may not read the annotations). So the plugin
//! asks the routing layer itself: one `GET` without a token (no `Authorization` header, no
//! cookie) for every path with scopes, which must be refused with **401 or 403**.
//!
//! # The requests
//!
//! * To the address given — `http://HOST[:PORT]` or `https://HOST[:PORT]`, nothing else: no
//!   user information, no path, query or fragment ([`VerifyUrl::parse`]) — never anywhere
//!   else: a redirect is not followed.
//! * The request path is the public path, `/<app><path>` (`/web/orders`, and `/web/` for `/`).
//! * For each host of the routes (the run's `--host`s, else the live routes'), with `Host:`
//!   set to it and, for `https://`, TLS with that name (server name indication and the
//!   certificate's check), as a client that resolved the name to the address would — `curl
//!   --resolve`. A wildcard host `*.example.com` is asked as `appupdate-verify.example.com`.
//!   Routes without hosts get no `Host:` override (the address's own).
//! * Public paths are not checked: they may answer anything.
//!
//! # What counts
//!
//! 401 or 403: enforced. Anything else is a failure: a 2xx (served without a token), a 3xx (a
//! redirect, its `Location` shown — a login page may well be auth, but the plugin cannot tell it
//! from a redirect elsewhere), a 404 (the route is not served there, so it was not checked), a
//! 5xx, no answer (refused, a TLS failure, a timeout), or a request the overall bound left
//! unsent. A failure exits 9.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use console::Style;

use crate::plan::{Action, Plan};
use crate::report::{Fate, Line};
use crate::text::Untrusted;

/// The bound on each request when `--request-timeout` does not set one.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on the whole verification (at least one request's bound).
pub const OVERALL: Duration = Duration::from_secs(30);
/// The label a wildcard host's `*` is asked as.
pub const WILDCARD_LABEL: &str = "appupdate-verify";

/// `--verify-url`, parsed: `http[s]://HOST[:PORT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyUrl {
    /// `http` or `https`.
    pub scheme: String,
    /// Without brackets for an IPv6 address.
    pub host: String,
    pub port: Option<u16>,
}

impl VerifyUrl {
    /// Parses `--verify-url`: http or https, a host, an optional port, and nothing else (a
    /// lone `/` is allowed). The error says what is wrong; the caller names the flag.
    pub fn parse(text: &str) -> Result<VerifyUrl, String> {
        const FORM: &str = "give the gateway's or ingress controller's address as http://HOST[:PORT] or https://HOST[:PORT]";
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "it contains whitespace or a control character; {FORM}"
            ));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(format!("it has no scheme; {FORM}"));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "the scheme {:?} is not http or https; {FORM}",
                Untrusted(&scheme)
            ));
        }
        // Anywhere, not only before the first `/`: a password may hold `/`, `?` or `#`.
        if rest.contains('@') {
            return Err(format!(
                "it has user information (…@); the requests are sent without credentials: {FORM}"
            ));
        }
        if rest.contains('#') {
            return Err(format!("it has a fragment (#…); {FORM}"));
        }
        if rest.contains('?') {
            return Err(format!(
                "it has a query (?…); the routes' paths are requested on the address alone: {FORM}"
            ));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if !path.is_empty() && path != "/" {
            return Err(format!(
                "it has a path ({:?}); the routes' paths (/APP/…) are requested on the address alone: {FORM}",
                Untrusted(path)
            ));
        }
        let parsed: http::uri::Authority = authority
            .parse()
            .map_err(|_| format!("{:?} is not a host[:port]; {FORM}", Untrusted(authority)))?;
        let host = parsed
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(format!("it has no host; {FORM}"));
        }
        // `Authority` accepts a port it cannot represent (`:99999`) or none after the colon.
        let port = match authority.rsplit_once(':') {
            Some((before, digits)) if !before.ends_with(':') && !digits.contains(']') => {
                match digits.parse::<u16>() {
                    Ok(p) if p > 0 => Some(p),
                    _ => {
                        return Err(format!(
                            "the port {:?} is not a number from 1 to 65535; {FORM}",
                            Untrusted(digits)
                        ));
                    }
                }
            }
            _ => None,
        };
        Ok(VerifyUrl { scheme, host, port })
    }

    /// `text` as a message may quote it: user information (which may hold a password)
    /// replaced by `…` ([`crate::text::without_credentials`], as every URL shown).
    pub fn redacted(text: &str) -> String {
        crate::text::without_credentials(text).into_owned()
    }

    /// `host[:port]`, an IPv6 address in brackets.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => format!("{host}:{p}"),
            None => host,
        }
    }

    /// The URL of `path` (which starts with `/`) on this address.
    pub fn with_path(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.authority())
    }

    pub fn is_https(&self) -> bool {
        self.scheme == "https"
    }
}

impl fmt::Display for VerifyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority())
    }
}

/// One request: a path with scopes, asked for one host of the routes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Probe {
    /// The `Host:` sent, and the TLS server name for `https://`; `None`: the address's own.
    pub host: Option<String>,
    /// The public path, `/<app><path>`.
    pub path: String,
}

impl Probe {
    /// `HOST/PATH` as the lines show it: the host asked for, else the address's.
    pub fn shown(&self, url: &VerifyUrl) -> String {
        let host = self.host.clone().unwrap_or_else(|| url.authority());
        format!("{}{}", Untrusted(host), Untrusted(&self.path))
    }
}

/// The requests `--verify-url` sends after `plan` is applied: every path with scopes that the
/// plan's routes serve afterwards, once per host of the routes (in the order the hosts are
/// given), paths sorted.
pub fn probes<U>(plan: &Plan<U>) -> Vec<Probe> {
    let Some(routes) = &plan.routes else {
        return Vec::new();
    };
    let paths: BTreeSet<&str> = plan
        .objects
        .iter()
        .filter_map(|p| p.change.route.as_ref().map(|r| (p.change.action(), r)))
        .filter(|(action, r)| *action != Action::Delete && !r.scopes.is_empty())
        .flat_map(|(_, r)| r.paths.iter().map(String::as_str))
        .collect();
    let hosts: Vec<Option<String>> = if routes.header.attachment.hosts.is_empty() {
        vec![None]
    } else {
        routes
            .header
            .attachment
            .hosts
            .iter()
            .map(|h| Some(asked_as(h)))
            .collect()
    };
    hosts
        .iter()
        .flat_map(|host| {
            paths.iter().map(|path| Probe {
                host: host.clone(),
                path: format!("/{}{path}", plan.app),
            })
        })
        .collect()
}

/// The name a host of the routes is asked as: itself, or for a wildcard `*.example.com` a name
/// it matches.
fn asked_as(host: &str) -> String {
    match host.strip_prefix("*.") {
        Some(domain) => format!("{WILDCARD_LABEL}.{domain}"),
        None => host.to_owned(),
    }
}

/// What came back for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP answer: its status, and `Location` for a redirect.
    Status { code: u16, location: Option<String> },
    /// No answer within the request's bound.
    TimedOut(Duration),
    /// No answer: why, in a few words (connection refused, a TLS failure, the proxy's refusal).
    Failed(String),
    /// Not sent, or cut short: the verification's overall bound ran out.
    OutOfTime(Duration),
}

impl Answer {
    /// Auth is enforced: the request without a token was refused with 401 or 403.
    pub fn enforced(&self) -> bool {
        matches!(
            self,
            Answer::Status {
                code: 401 | 403,
                ..
            }
        )
    }

    /// What the line says of the answer, in parentheses.
    fn detail(&self) -> String {
        match self {
            Answer::Status {
                code,
                location: Some(location),
            } if (300..400).contains(code) => {
                format!(
                    "HTTP {code}, redirected to {:?}",
                    Untrusted(shortened(location))
                )
            }
            Answer::Status { code, .. } => format!("HTTP {code}"),
            Answer::TimedOut(after) => format!("no answer within {}", seconds(*after)),
            Answer::Failed(why) => format!("no answer: {}", Untrusted(why)),
            Answer::OutOfTime(bound) => format!(
                "not checked: the verification's bound of {} ran out",
                seconds(*bound)
            ),
        }
    }
}

/// A `Location` in at most [`LOCATION_SHOWN`] characters, on one line.
fn shortened(location: &str) -> String {
    match location.char_indices().nth(LOCATION_SHOWN) {
        Some((end, _)) => format!("{}…", &location[..end]),
        None => location.to_owned(),
    }
}

/// The characters of a redirect's `Location` a line shows.
const LOCATION_SHOWN: usize = 200;

fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// The line of one request: `auth enforced on HOST/PATH (HTTP 401)` (done), or `auth NOT
/// enforced on HOST/PATH (HTTP 200)` — `NOT verified` when no HTTP answer came (not done).
pub fn line(url: &VerifyUrl, probe: &Probe, answer: &Answer) -> Line {
    let on = probe.shown(url);
    let detail = answer.detail();
    if answer.enforced() {
        return Line::new(
            Fate::Done,
            Style::new().green(),
            format!("auth enforced on {on} ({detail})"),
        );
    }
    let what = match answer {
        Answer::Status { .. } => "enforced",
        _ => "verified",
    };
    Line::new(
        Fate::NotDone,
        Style::new().red().bold(),
        format!("auth NOT {what} on {on} ({detail})"),
    )
}

/// The notice before the requests go out.
pub fn announce(url: &VerifyUrl, probes: &[Probe]) -> String {
    let hosts: BTreeSet<&Option<String>> = probes.iter().map(|p| &p.host).collect();
    let paths = probes.len() / hosts.len().max(1);
    let on = if hosts.len() > 1 {
        format!(" on each of {} hosts", hosts.len())
    } else {
        String::new()
    };
    format!(
        "Checking auth at {}: a request without a token to each of {paths} path{} with scopes{on} must get 401 or 403",
        Untrusted(url.to_string()),
        if paths == 1 { "" } else { "s" },
    )
}

/// The notice when the routes serve no path with scopes.
pub fn nothing_to_check(url: &VerifyUrl) -> String {
    format!(
        "No path with scopes to check at {}: every endpoint is public.",
        Untrusted(url.to_string())
    )
}

/// What can be done about routes that do not enforce auth, after this run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Afterwards {
    /// The run had nothing to change: the routes were already like this.
    NothingChanged,
    /// The run's writes are recorded: this command undoes them.
    Undo(String),
    /// The run wrote, but its history record is missing (`--history-max 0`, or it failed).
    NotRecorded,
}

/// The reason a verification fails (exit 9): how many requests were not refused, where, and
/// what to do.
pub fn failure(url: &VerifyUrl, failed: usize, total: usize, afterwards: &Afterwards) -> String {
    let what = format!(
        "auth is not enforced: {failed} of {total} request{} without a token to paths with scopes at {} {} not refused with 401 or 403 (listed above)",
        if total == 1 { "" } else { "s" },
        Untrusted(url.to_string()),
        if failed == 1 { "was" } else { "were" },
    );
    let todo = "check that the gateway or ingress controller implements the routes' auth (Gateway API: the experimental channel's ExternalAuth filter)";
    match afterwards {
        Afterwards::NothingChanged => {
            format!("{what}; this run changed nothing; {todo}")
        }
        Afterwards::Undo(command) => format!(
            "{what}; the routes this run wrote are live: undo the run with `{command}`, or {todo}"
        ),
        Afterwards::NotRecorded => format!(
            "{what}; the routes this run wrote are live and not in the history, so --undo cannot take them back: restore them by hand, or {todo}"
        ),
    }
}

/// The `--undo` command for the application in `namespace` through `context`, every value
/// quoted when a shell would need it.
pub fn undo_command(app: &str, namespace: &str, context: &str) -> String {
    format!(
        "kubectl appupdate {} -n {} --context {} --undo",
        shell_word(app),
        shell_word(namespace),
        shell_word(context)
    )
}

/// `s` as one shell word, escaped for the terminal.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,".contains(c));
    if plain {
        Untrusted(s).to_string()
    } else {
        format!("'{}'", Untrusted(s.replace('\'', r"'\''")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::{AttachmentRecord, RoutesHeader};
    use crate::plan::{ObjectChange, Planned, RouteInfo, RouteStyle, RoutesPlan};

    fn url(s: &str) -> VerifyUrl {
        VerifyUrl::parse(s).unwrap()
    }

    #[test]
    fn an_address_is_http_or_https_with_a_host_and_an_optional_port_only() {
        assert_eq!(
            url("https://203.0.113.7"),
            VerifyUrl {
                scheme: "https".into(),
                host: "203.0.113.7".into(),
                port: None
            }
        );
        let u = url("HTTP://127.0.0.1:8080/");
        assert_eq!((u.scheme.as_str(), u.port), ("http", Some(8080)));
        assert_eq!(u.to_string(), "http://127.0.0.1:8080");
        assert_eq!(
            VerifyUrl::redacted("https://user:secret@gw:8443/x"),
            "https://…@gw:8443/x"
        );
        // Everything up to the last `@`: a password may hold `/`.
        assert_eq!(
            VerifyUrl::redacted("https://user:se/cret@gw"),
            "https://…@gw"
        );
        let v6 = url("http://[::1]:8080");
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.with_path("/web/a"), "http://[::1]:8080/web/a");
        assert_eq!(url("https://gw.example.com").authority(), "gw.example.com");
        for (bad, why) in [
            ("203.0.113.7", "no scheme"),
            ("ftp://gw", "is not http or https"),
            ("https://gw/prefix", "it has a path (\"/prefix\")"),
            ("https://gw?x=1", "query"),
            ("https://gw/#top", "fragment"),
            ("https://user:pw@gw", "user information"),
            ("https://user:p/w@gw", "user information"),
            ("https://user:p?w@gw", "user information"),
            ("https://", "not a host[:port]"),
            ("https://:8080", "no host"),
            ("https://gw:99999", "the port \"99999\""),
            ("https://gw:0", "the port \"0\""),
            ("https://gw:", "the port \"\""),
            ("https://g w", "whitespace"),
            ("https://gw\u{1b}[2J", "control character"),
        ] {
            let err = VerifyUrl::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains("http://HOST[:PORT]"), "{bad}: {err}");
        }
    }

    fn route(name: &str, action: Action, scopes: &[&str], paths: &[&str]) -> Planned<()> {
        let mut c = ObjectChange::sample(name, action);
        c.route = Some(RouteInfo {
            style: RouteStyle::Gateway,
            identifier: name.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            paths: if action == Action::Delete {
                vec![]
            } else {
                paths.iter().map(|s| s.to_string()).collect()
            },
            paths_before: paths.iter().map(|s| s.to_string()).collect(),
            foreign: Vec::new(),
        });
        // The updater is not looked at: none will do.
        Planned::new((), std::sync::Arc::new(c))
    }

    fn plan(hosts: &[&str], objects: Vec<Planned<()>>) -> Plan<()> {
        let mut plan = Plan::new("web".into(), "shop".into(), "ctx".into(), objects);
        plan.routes = Some(RoutesPlan {
            style: RouteStyle::Gateway,
            live_styles: vec![],
            notes: vec![],
            header: RoutesHeader {
                attachment: AttachmentRecord {
                    hosts: hosts.iter().map(|h| h.to_string()).collect(),
                    ..AttachmentRecord::default()
                },
                ..RoutesHeader::default()
            },
        });
        plan
    }

    fn shown(probes: &[Probe]) -> Vec<String> {
        let u = url("http://10.0.0.1:8080");
        probes.iter().map(|p| p.shown(&u)).collect()
    }

    #[test]
    fn every_path_with_scopes_served_after_the_run_is_asked_once_per_host() {
        let objects = || {
            vec![
                route("public", Action::Create, &[], &["/health"]),
                route("user", Action::Update, &["user"], &["/orders", "/"]),
                route("admin", Action::Unchanged, &["admin"], &["/admin"]),
                // A deleted route serves nothing afterwards.
                route("old", Action::Delete, &["user"], &["/gone"]),
            ]
        };
        let p = probes(&plan(
            &["shop.example.com", "*.shop.example.com"],
            objects(),
        ));
        assert_eq!(
            shown(&p),
            [
                "shop.example.com/web/",
                "shop.example.com/web/admin",
                "shop.example.com/web/orders",
                "appupdate-verify.shop.example.com/web/",
                "appupdate-verify.shop.example.com/web/admin",
                "appupdate-verify.shop.example.com/web/orders",
            ]
        );
        assert_eq!(p[0].host.as_deref(), Some("shop.example.com"));
        // Without hosts: no Host override, shown with the address.
        let p = probes(&plan(&[], objects()));
        assert_eq!(p[0].host, None);
        assert_eq!(
            shown(&p),
            [
                "10.0.0.1:8080/web/",
                "10.0.0.1:8080/web/admin",
                "10.0.0.1:8080/web/orders"
            ]
        );
        // Only public paths: nothing to ask.
        let public = plan(&[], vec![route("p", Action::Create, &[], &["/a"])]);
        assert!(probes(&public).is_empty());
    }

    #[test]
    fn only_401_and_403_count_as_enforced() {
        let status = |code| Answer::Status {
            code,
            location: None,
        };
        for code in [401, 403] {
            assert!(status(code).enforced(), "{code}");
        }
        for code in [200, 204, 301, 302, 400, 404, 407, 500, 502, 503] {
            assert!(!status(code).enforced(), "{code}");
        }
        assert!(!Answer::TimedOut(Duration::from_secs(5)).enforced());
        assert!(!Answer::Failed("connection refused".into()).enforced());
        assert!(!Answer::OutOfTime(OVERALL).enforced());
    }

    #[test]
    fn each_answer_gets_one_line_that_says_what_came_back() {
        let u = url("http://10.0.0.1:8080");
        let probe = Probe {
            host: Some("shop.example.com".into()),
            path: "/web/admin".into(),
        };
        let text = |a: Answer| {
            let l = line(&u, &probe, &a);
            (l.fate, l.text)
        };
        assert_eq!(
            text(Answer::Status {
                code: 401,
                location: None
            }),
            (
                Fate::Done,
                "auth enforced on shop.example.com/web/admin (HTTP 401)".into()
            )
        );
        assert_eq!(
            text(Answer::Status {
                code: 200,
                location: None
            }),
            (
                Fate::NotDone,
                "auth NOT enforced on shop.example.com/web/admin (HTTP 200)".into()
            )
        );
        assert_eq!(
            text(Answer::Status {
                code: 302,
                location: Some("https://evil.example/\u{1b}[2J".into())
            })
            .1,
            "auth NOT enforced on shop.example.com/web/admin (HTTP 302, redirected to \"https://evil.example/\\e[2J\")"
        );
        let long = format!("https://login.example/{}", "x".repeat(500));
        assert_eq!(
            text(Answer::Status {
                code: 307,
                location: Some(long.clone())
            })
            .1,
            format!(
                "auth NOT enforced on shop.example.com/web/admin (HTTP 307, redirected to \"{}…\")",
                &long[..LOCATION_SHOWN]
            )
        );
        assert_eq!(
            text(Answer::TimedOut(Duration::from_millis(1500))).1,
            "auth NOT verified on shop.example.com/web/admin (no answer within 1.5s)"
        );
        assert_eq!(
            text(Answer::Failed("connection refused".into())).1,
            "auth NOT verified on shop.example.com/web/admin (no answer: connection refused)"
        );
        assert_eq!(
            text(Answer::OutOfTime(Duration::from_secs(30))).1,
            "auth NOT verified on shop.example.com/web/admin (not checked: the verification's bound of 30s ran out)"
        );
    }

    #[test]
    fn the_failure_says_how_many_where_and_how_to_undo() {
        let u = url("https://203.0.113.7");
        assert_eq!(
            failure(
                &u,
                1,
                3,
                &Afterwards::Undo(undo_command("web", "shop", "prod"))
            ),
            "auth is not enforced: 1 of 3 requests without a token to paths with scopes at https://203.0.113.7 was not refused with 401 or 403 (listed above); the routes this run wrote are live: undo the run with `kubectl appupdate web -n shop --context prod --undo`, or check that the gateway or ingress controller implements the routes' auth (Gateway API: the experimental channel's ExternalAuth filter)"
        );
        assert!(
            failure(&u, 1, 1, &Afterwards::NothingChanged).contains("this run changed nothing")
        );
        assert!(
            failure(&u, 1, 1, &Afterwards::NotRecorded).contains("--undo cannot take them back")
        );
        assert_eq!(
            undo_command("web", "shop", "it's \u{1b}"),
            "kubectl appupdate web -n shop --context 'it'\\''s \\e' --undo"
        );
    }
}
