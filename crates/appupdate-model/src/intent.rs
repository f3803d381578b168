//! What a run meant for the routes, in the plugin's own terms: the route style, where the routes
//! attach (class, hosts, TLS secret, Gateway, auth URL or auth Service, and for HTTPRoutes the
//! auth provider) and each scope group's scopes and paths — never an object body.
//!
//! Pure. A history record holds the routes before and after its run as two [`RouteSet`]s; an
//! undo turns the set before back into an endpoints file and route flags
//! ([`RouteSet::endpoints_file`], [`flags_to_restore`]) and plans them with the same planner
//! as an ordinary run, so an undo can only produce what an ordinary run can: the application's
//! managed routes, named and labelled by a route style.
//!
//! Everything here is read back from the cluster (a history record), so it is input from
//! whoever can write that ConfigMap: [`RouteSet::check`] validates every value with the parser
//! of the flag or file it stands for — the endpoints file's injection guard for paths and
//! scopes, the route flags' parsers for the attachment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::endpoints_file::{self, EndpointsFile};
use crate::refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef, parse_host, parse_object_name};
use crate::route_style::{AuthProvider, RouteInfo, RouteStyle};

/// The most scope groups and paths a recorded route set may hold (a record is at most
/// `appupdate_plan::history::RECORD_BUDGET` bytes gzip'd; this bounds what planning one may cost).
pub const MAX_PATHS: usize = 20_000;

/// Where routes attach and how they authenticate, as the flags that would set it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttachmentRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_class: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The TLS Secret, when the Ingresses' `spec.tls` is the one `--tls-secret` writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret: Option<String>,
    /// `[NAMESPACE/]NAME`, when the HTTPRoutes' `parentRefs` is the one `--gateway` writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    /// `[NAMESPACE/]NAME:PORT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_service: Option<String>,
    /// How HTTPRoutes check scopes (`gateway` only; records of earlier versions have none,
    /// which means `filter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_provider: Option<AuthProvider>,
}

impl AttachmentRecord {
    /// Every value parsed as its flag parses it.
    pub fn check(&self) -> Result<(), String> {
        let bad = |what: &str, why: String| Err(format!("its {what} is not valid: {why}"));
        if let Some(c) = &self.ingress_class
            && let Err(why) = parse_object_name(c)
        {
            return bad("IngressClass", why);
        }
        for h in &self.hosts {
            if let Err(why) = parse_host(h) {
                return bad("host", why);
            }
        }
        if let Some(s) = &self.tls_secret
            && let Err(why) = parse_object_name(s)
        {
            return bad("TLS secret", why);
        }
        if let Some(g) = &self.gateway
            && let Err(why) = ObjectRef::parse(g)
        {
            return bad("Gateway", why);
        }
        if let Some(u) = &self.auth_url
            && let Err(why) = AuthUrl::parse(u)
        {
            return bad("auth URL", why);
        }
        if let Some(s) = &self.auth_service
            && let Err(why) = ServiceRef::parse(s)
        {
            return bad("auth Service", why);
        }
        if self.hosts.len() > 100 {
            return Err("it names more than 100 hosts".into());
        }
        Ok(())
    }
}

/// One scope group: its scopes (sorted, distinct; none for the public group) and its paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRecord {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    pub paths: Vec<String>,
}

/// The application's routes at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSet {
    /// `None`: no managed route, or routes in several styles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<RouteStyle>,
    #[serde(default)]
    pub attachment: AttachmentRecord,
    #[serde(default)]
    pub groups: Vec<GroupRecord>,
}

/// The routes before and after a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesChange {
    pub before: RouteSet,
    pub after: RouteSet,
}

/// What a plan that publishes endpoints knows of the routes besides its objects: the style and
/// attachment before and after (the groups come from each route's [`RouteInfo`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutesHeader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style_before: Option<RouteStyle>,
    pub style: Option<RouteStyle>,
    #[serde(default)]
    pub attachment_before: AttachmentRecord,
    #[serde(default)]
    pub attachment: AttachmentRecord,
}

impl RoutesHeader {
    pub fn check(&self) -> Result<(), String> {
        self.attachment_before.check()?;
        self.attachment.check()
    }
}

/// `scopes` as a set: sorted, without duplicates — the form a scope group's scopes are kept,
/// compared and named in.
pub fn normalize_scopes(scopes: &[String]) -> Vec<String> {
    let mut set = scopes.to_vec();
    set.sort_unstable();
    set.dedup();
    set
}

/// Scope groups keyed by their scopes, paths sorted and distinct.
pub type Groups = BTreeMap<Vec<String>, Vec<String>>;

/// Adds `paths` to the group of `scopes`.
pub fn add_paths(groups: &mut Groups, scopes: &[String], paths: &[String]) {
    if paths.is_empty() {
        return;
    }
    let entry = groups.entry(normalize_scopes(scopes)).or_default();
    entry.extend(paths.iter().cloned());
    entry.sort();
    entry.dedup();
}

/// The groups a set of routes serves, from each route's [`RouteInfo`]: `after` picks the
/// paths each serves after its change (else before).
pub fn groups_of<'a>(infos: impl IntoIterator<Item = (&'a RouteInfo, bool)>) -> Groups {
    let mut groups = Groups::new();
    for (info, after) in infos {
        let paths = if after {
            &info.paths
        } else {
            &info.paths_before
        };
        add_paths(&mut groups, &info.scopes, paths);
    }
    groups
}

impl RouteSet {
    pub fn new(style: Option<RouteStyle>, attachment: AttachmentRecord, groups: Groups) -> Self {
        RouteSet {
            style,
            attachment,
            groups: groups
                .into_iter()
                .map(|(scopes, paths)| GroupRecord { scopes, paths })
                .collect(),
        }
    }

    /// The groups, keyed by their normalised scopes.
    pub fn groups(&self) -> Groups {
        let mut out = Groups::new();
        for g in &self.groups {
            add_paths(&mut out, &g.scopes, &g.paths);
        }
        out
    }

    /// The groups as an endpoints file, read through the endpoints file's own parser and guard
    /// (`source` names it in errors).
    pub fn endpoints_file(&self, source: &str) -> Result<EndpointsFile, String> {
        let total: usize = self.groups.iter().map(|g| g.paths.len()).sum();
        if total > MAX_PATHS {
            return Err(format!("it holds {total} paths, more than {MAX_PATHS}"));
        }
        let mut text = String::from("endpoints:\n");
        if total == 0 {
            text = "endpoints: []\n".into();
        }
        for g in &self.groups {
            if g.scopes.len() > 100 {
                return Err("a scope group has more than 100 scopes".into());
            }
            for p in &g.paths {
                let entry = json!({"path": p, "scopes": g.scopes});
                text.push_str("  - ");
                text.push_str(&Value::to_string(&entry));
                text.push('\n');
            }
        }
        endpoints_file::parse(&text, source).map_err(|e| e.message)
    }

    /// Every value valid (see the module docs).
    pub fn check(&self, source: &str) -> Result<(), String> {
        self.attachment.check()?;
        self.endpoints_file(source).map(|_| ())
    }
}

/// The route flags that plan `target` again from the state `now`: its style; the auth URL or
/// auth Service and the auth provider (every route of a style takes them); and each other part
/// of its attachment that differs from `now`'s (the parts the run being undone changed) — all
/// of them when `now` has no routes left to take them from. Parts that did not change are left to the planner, which
/// takes them from the live routes as any run does.
pub fn flags_to_restore(target: &RouteSet, now: &RouteSet) -> Result<RouteFlags, String> {
    let (t, n) = (&target.attachment, &now.attachment);
    let fresh = now.groups.is_empty();
    let changed = |a: &Option<String>, b: &Option<String>| {
        if a != b || fresh { a.clone() } else { None }
    };
    let style = target.style.or(now.style);
    let mut flags = RouteFlags {
        style,
        ..RouteFlags::default()
    };
    let ingress = matches!(
        style,
        Some(RouteStyle::NginxSnippet | RouteStyle::NginxAuth)
    );
    if ingress {
        flags.ingress_class = changed(&t.ingress_class, &n.ingress_class);
        flags.tls_secret = changed(&t.tls_secret, &n.tls_secret);
    }
    if t.hosts != n.hosts || fresh {
        flags.hosts = t.hosts.clone();
    }
    if style == Some(RouteStyle::Gateway) {
        if let Some(g) = changed(&t.gateway, &n.gateway) {
            flags.gateway = Some(ObjectRef::parse(&g)?);
        }
        if let Some(s) = &t.auth_service {
            flags.auth_service = Some(ServiceRef::parse(s)?);
        }
        // Routes to restore check scopes as they did; none to restore: nothing to check.
        if !target.groups.is_empty() {
            flags.auth_provider = Some(t.auth_provider.unwrap_or(AuthProvider::Filter));
        }
    }
    if style == Some(RouteStyle::NginxAuth)
        && let Some(u) = &t.auth_url
    {
        flags.auth_url = Some(AuthUrl::parse(u)?);
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(groups: &[(&[&str], &[&str])]) -> RouteSet {
        RouteSet {
            style: Some(RouteStyle::NginxAuth),
            attachment: AttachmentRecord {
                auth_url: Some("http://auth.svc/check".into()),
                ..AttachmentRecord::default()
            },
            groups: groups
                .iter()
                .map(|(s, p)| GroupRecord {
                    scopes: s.iter().map(|x| x.to_string()).collect(),
                    paths: p.iter().map(|x| x.to_string()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_route_set_reads_back_as_the_endpoints_file_it_stands_for() {
        let s = set(&[(&[], &["/a", "/b"]), (&["user"], &["/u"])]);
        let file = s.endpoints_file("revision 3").unwrap();
        let paths: Vec<(&str, Vec<String>)> = file
            .endpoints
            .iter()
            .map(|e| (e.path.as_str(), e.scopes.clone()))
            .collect();
        assert_eq!(
            paths,
            [
                ("/a", vec![]),
                ("/b", vec![]),
                ("/u", vec!["user".to_owned()])
            ]
        );
        assert!(set(&[]).endpoints_file("r").unwrap().endpoints.is_empty());
    }

    #[test]
    fn a_path_or_scope_the_endpoints_file_refuses_is_refused_here_too() {
        for bad in [
            set(&[(&[], &["/a;evil"])]),
            set(&[(&[], &["relative"])]),
            set(&[(&["us\"er"], &["/a"])]),
            set(&[(&[], &["/a"]), (&["x"], &["/a"])]),
            set(&[(&[], &["/a/../b"])]),
        ] {
            assert!(bad.check("revision 1").is_err(), "{bad:?}");
        }
        let mut s = set(&[(&[], &["/a"])]);
        s.attachment.auth_url = Some("http://x/a;proxy_pass evil".into());
        assert!(s.check("r").unwrap_err().contains("auth URL"));
        let mut s = set(&[]);
        s.attachment.ingress_class = Some("../x".into());
        assert!(s.check("r").is_err());
        let mut s = set(&[]);
        s.attachment.gateway = Some("ns/gw/x".into());
        assert!(s.check("r").is_err());
    }

    #[test]
    fn the_flags_to_restore_force_only_what_the_run_changed() {
        let mut before = set(&[(&[], &["/a"])]);
        let mut after = before.clone();
        after.attachment.auth_url = Some("http://new.svc/check".into());
        after.attachment.hosts = vec!["a.example.com".into()];
        before.attachment.ingress_class = Some("nginx".into());
        after.attachment.ingress_class = Some("nginx".into());
        let flags = flags_to_restore(&before, &after).unwrap();
        assert_eq!(flags.style, Some(RouteStyle::NginxAuth));
        assert_eq!(
            flags.auth_url.as_ref().map(AuthUrl::as_str),
            Some("http://auth.svc/check")
        );
        assert_eq!(flags.ingress_class, None);
        assert!(flags.hosts.is_empty());
        // Nothing left to take the attachment from: all of it is given.
        let gone = RouteSet {
            groups: Vec::new(),
            ..after.clone()
        };
        let flags = flags_to_restore(&before, &gone).unwrap();
        assert_eq!(flags.ingress_class.as_deref(), Some("nginx"));
    }

    #[test]
    fn the_auth_provider_is_restored_with_gateway_routes() {
        let gateway = |provider, groups: &[(&[&str], &[&str])]| RouteSet {
            style: Some(RouteStyle::Gateway),
            attachment: AttachmentRecord {
                auth_service: Some("auth/oauth:8080".into()),
                auth_provider: provider,
                ..AttachmentRecord::default()
            },
            ..set(groups)
        };
        let eg = gateway(Some(AuthProvider::EnvoyGateway), &[(&["user"], &["/u"])]);
        let filter = gateway(Some(AuthProvider::Filter), &[(&["user"], &["/u"])]);
        let older = gateway(None, &[(&["user"], &["/u"])]);
        let flags = |target: &RouteSet, now: &RouteSet| {
            flags_to_restore(target, now).unwrap().auth_provider
        };
        assert_eq!(flags(&eg, &filter), Some(AuthProvider::EnvoyGateway));
        assert_eq!(flags(&filter, &eg), Some(AuthProvider::Filter));
        // A record of an earlier version, without the provider, used the filter.
        assert_eq!(flags(&older, &eg), Some(AuthProvider::Filter));
        // No routes to restore: nothing to check; the live ones are removed as any run does.
        let none = RouteSet {
            style: None,
            ..gateway(None, &[])
        };
        assert_eq!(flags(&none, &eg), None);
        let json = serde_json::to_value(&eg.attachment).unwrap();
        assert_eq!(json["authProvider"], "envoy-gateway");
        assert!(
            serde_json::to_value(&older.attachment)
                .unwrap()
                .get("authProvider")
                .is_none()
        );
    }
}
