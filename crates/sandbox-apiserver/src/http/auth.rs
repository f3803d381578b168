//! Authentication (bearer tokens, random per instance) and authorization (the RBAC the
//! sandbox's identities would have): who is asking, and may they.

use std::collections::{BTreeMap, HashMap};

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::request::RequestInfo;
use crate::model::status::{self, StatusBody};

/// The identities the sandbox knows (bearer tokens are random per instance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Identity {
    /// Everything (like `system:masters`); kubeconfig context `sandbox`.
    Admin,
    /// The built-in `view` ClusterRole: get/list/watch on what it grants (Deployments,
    /// Services, HPAs, Ingresses, ConfigMaps, namespaces… but not IngressClasses, Secrets or
    /// custom resources), 403 on every write (dry runs too); context `sandbox-readonly`.
    ReadOnly,
    /// Authenticated, no RBAC bindings: only discovery; context `sandbox-noperm`.
    NoPerm,
    /// A token the server does not know: 401; context `sandbox-invalid`.
    Invalid,
}

impl Identity {
    /// The user name the server reports (`User "readonly" cannot …`).
    pub fn user_name(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::ReadOnly => "readonly",
            Identity::NoPerm => "noperm",
            Identity::Invalid => "invalid-token",
        }
    }
}

/// The bearer tokens of an instance.
pub struct Tokens {
    by_token: HashMap<String, Identity>,
    of: HashMap<Identity, String>,
    /// Plain HTTP: requests without credentials act as admin (client-go never sends bearer
    /// tokens over plain HTTP, like the removed insecure port of old API servers).
    anonymous_is_admin: bool,
}

impl Tokens {
    /// A random token for each identity; `tls: false` lets requests without one act as admin.
    pub fn generate(tls: bool) -> Self {
        let mut of = HashMap::new();
        for id in [
            Identity::Admin,
            Identity::ReadOnly,
            Identity::NoPerm,
            Identity::Invalid,
        ] {
            of.insert(
                id,
                format!(
                    "{}{}",
                    uuid::Uuid::new_v4().simple(),
                    uuid::Uuid::new_v4().simple()
                ),
            );
        }
        let by_token = of
            .iter()
            .filter(|(id, _)| **id != Identity::Invalid)
            .map(|(id, t)| (t.clone(), *id))
            .collect();
        Tokens {
            by_token,
            of,
            anonymous_is_admin: !tls,
        }
    }

    /// The token of an identity (`Invalid`: one the server rejects).
    pub fn token(&self, id: Identity) -> String {
        self.of.get(&id).cloned().unwrap_or_default()
    }

    /// Who sends these headers: `None` for anonymous, `Invalid` for a token nobody has.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        match headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            None if self.anonymous_is_admin => Some(Identity::Admin),
            None => None,
            Some(v) => match v
                .strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
            {
                Some(t) => Some(
                    self.by_token
                        .get(t.trim())
                        .copied()
                        .unwrap_or(Identity::Invalid),
                ),
                None => Some(Identity::Invalid),
            },
        }
    }
}

/// The user name in messages (`system:anonymous` without credentials).
pub fn user_name(id: Option<Identity>) -> &'static str {
    id.map(Identity::user_name).unwrap_or("system:anonymous")
}

/// Who a request acts as: the authenticated identity, or the one it impersonates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
    /// The user's uid (`""`: none).
    pub uid: String,
    /// Extra attributes (impersonated with `Impersonate-Extra-<key>`).
    pub extra: BTreeMap<String, Vec<String>>,
}

const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const ANONYMOUS: &str = "system:anonymous";

impl User {
    /// The user an authenticated identity is (`None`: anonymous).
    pub fn of(id: Option<Identity>) -> User {
        let (name, groups): (&str, &[&str]) = match id {
            Some(Identity::Admin) => ("admin", &[MASTERS, AUTHENTICATED]),
            Some(i @ (Identity::ReadOnly | Identity::NoPerm)) => (i.user_name(), &[AUTHENTICATED]),
            Some(Identity::Invalid) => ("invalid-token", &[]),
            None => (ANONYMOUS, &[UNAUTHENTICATED]),
        };
        // The token users' uids, as the reference server's token file gives them.
        let uid = match id {
            Some(Identity::Admin | Identity::ReadOnly | Identity::NoPerm) => format!("uid-{name}"),
            _ => String::new(),
        };
        User {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            uid,
            extra: BTreeMap::new(),
        }
    }

    /// The user as an `authentication.k8s.io/v1` UserInfo (what a SelfSubjectReview reports).
    pub fn info(&self) -> Value {
        let mut m = serde_json::Map::new();
        if !self.name.is_empty() {
            m.insert("username".into(), Value::String(self.name.clone()));
        }
        if !self.uid.is_empty() {
            m.insert("uid".into(), Value::String(self.uid.clone()));
        }
        if !self.groups.is_empty() {
            m.insert("groups".into(), serde_json::json!(self.groups));
        }
        if !self.extra.is_empty() {
            m.insert("extra".into(), serde_json::json!(self.extra));
        }
        Value::Object(m)
    }

    fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
}

/// One RBAC PolicyRule.
struct Rule {
    api_groups: &'static [&'static str],
    resources: &'static [&'static str],
    verbs: &'static [&'static str],
}

const READ: &[&str] = &["get", "list", "watch"];

/// The built-in `view` ClusterRole of v1.28 (aggregated), as the real server serves it: no
/// Secrets, no IngressClasses, nothing from CRDs (Gateway API routes).
const VIEW: &[Rule] = &[
    Rule {
        api_groups: &[""],
        resources: &[
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
            "namespaces",
        ],
        verbs: READ,
    },
    Rule {
        api_groups: &["discovery.k8s.io"],
        resources: &["endpointslices"],
        verbs: READ,
    },
    Rule {
        api_groups: &["apps"],
        resources: &[
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        verbs: READ,
    },
    Rule {
        api_groups: &["autoscaling"],
        resources: &[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ],
        verbs: READ,
    },
    Rule {
        api_groups: &["batch"],
        resources: &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        verbs: READ,
    },
    Rule {
        api_groups: &["extensions"],
        resources: &[
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
        verbs: READ,
    },
    Rule {
        api_groups: &["policy"],
        resources: &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        verbs: READ,
    },
    Rule {
        api_groups: &["networking.k8s.io"],
        resources: &["ingresses", "ingresses/status", "networkpolicies"],
        verbs: READ,
    },
];

/// `system:basic-user`, bound to every authenticated user.
const BASIC_USER: &[Rule] = &[
    Rule {
        api_groups: &["authorization.k8s.io"],
        resources: &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        verbs: &["create"],
    },
    Rule {
        api_groups: &["authentication.k8s.io"],
        resources: &["selfsubjectreviews"],
        verbs: &["create"],
    },
];

/// `system:discovery` (authenticated users): discovery, OpenAPI, health and version.
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// `system:public-info-viewer` (everyone, anonymous included): health and version.
const PUBLIC_INFO_URLS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// RBAC's decision for a resource request: `verb` on `resource` (with `/subresource`) in
/// `group`.
fn may(user: &User, verb: &str, group: &str, resource: &str, sub: &str) -> bool {
    resource_decision(user, verb, group, resource, sub).is_some()
}

/// RBAC's reason for allowing through a ClusterRoleBinding.
fn allowed_by(binding: &str, role: &str, subject: &str) -> Option<String> {
    Some(format!(
        "RBAC: allowed by ClusterRoleBinding \"{binding}\" of ClusterRole \"{role}\" to {subject}"
    ))
}

/// The authorizers' decision on a resource request: `None` when nothing allows it, else the
/// reason (none for `system:masters`, which a privileged-group authorizer lets through before
/// RBAC).
fn resource_decision(
    user: &User,
    verb: &str,
    group: &str,
    resource: &str,
    sub: &str,
) -> Option<Option<String>> {
    if user.in_group(MASTERS) {
        return Some(None);
    }
    let full = if sub.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{sub}")
    };
    let matches = |rules: &[Rule]| {
        rules.iter().any(|r| {
            r.api_groups.contains(&group)
                && r.resources.contains(&full.as_str())
                && r.verbs.contains(&verb)
        })
    };
    if user.name == "readonly" && matches(VIEW) {
        return Some(allowed_by("readonly-view", "view", "User \"readonly\""));
    }
    if user.in_group(AUTHENTICATED) && matches(BASIC_USER) {
        return Some(allowed_by(
            "system:basic-user",
            "system:basic-user",
            "Group \"system:authenticated\"",
        ));
    }
    None
}

fn may_url(user: &User, verb: &str, path: &str) -> bool {
    url_decision(user, verb, path).is_some()
}

/// [`resource_decision`] for a non-resource path.
fn url_decision(user: &User, verb: &str, path: &str) -> Option<Option<String>> {
    if user.in_group(MASTERS) {
        return Some(None);
    }
    if verb != "get" {
        return None;
    }
    let listed = |urls: &[&str]| {
        urls.iter().any(|u| match u.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => *u == path,
        })
    };
    for g in [AUTHENTICATED, UNAUTHENTICATED] {
        if user.in_group(g) && listed(PUBLIC_INFO_URLS) {
            return Some(allowed_by(
                "system:public-info-viewer",
                "system:public-info-viewer",
                &format!("Group \"{g}\""),
            ));
        }
    }
    if user.in_group(AUTHENTICATED) && listed(DISCOVERY_URLS) {
        return Some(allowed_by(
            "system:discovery",
            "system:discovery",
            "Group \"system:authenticated\"",
        ));
    }
    None
}

/// A SelfSubjectAccessReview's status for `user`: the spec's resource or non-resource
/// attributes through the same decision as requests (RBAC never denies outright).
pub fn access_review(user: &User, spec: &Value) -> Value {
    let decision = match spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        Some(ra) => {
            let s = |f: &str| ra.get(f).and_then(Value::as_str).unwrap_or("");
            resource_decision(user, s("verb"), s("group"), s("resource"), s("subresource"))
        }
        None => {
            let na = spec.get("nonResourceAttributes").unwrap_or(&Value::Null);
            let s = |f: &str| na.get(f).and_then(Value::as_str).unwrap_or("");
            url_decision(user, s("verb"), s("path"))
        }
    };
    match decision {
        None => serde_json::json!({"allowed": false}),
        Some(None) => serde_json::json!({"allowed": true}),
        Some(Some(reason)) => serde_json::json!({"allowed": true, "reason": reason}),
    }
}

/// Authorization: `Err` with RBAC's 403 when `user` may not do what `info` (or, for a
/// non-resource request, `verb` on `path`) describes.
pub fn authorize(
    user: &User,
    info: &RequestInfo,
    verb: &str,
    path: &str,
) -> Result<(), StatusBody> {
    if !info.resource_request {
        if !may_url(user, verb, path) {
            return Err(status::forbidden_path(&user.name, verb, path));
        }
        return Ok(());
    }
    if !may(
        user,
        &info.verb,
        &info.group,
        &info.resource,
        &info.subresource,
    ) {
        return Err(forbidden(&user.name, info));
    }
    Ok(())
}

/// RBAC's 403 for a resource request.
pub fn forbidden(user: &str, info: &RequestInfo) -> StatusBody {
    status::forbidden(
        user,
        &info.verb,
        &info.group,
        &info.resource,
        &info.subresource,
        &info.namespace,
        if info.name.is_empty() {
            &info.selector_name
        } else {
            &info.name
        },
    )
}

/// One thing a request asks to impersonate (an `ObjectReference` in the real filter).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Impersonation {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Impersonation {
    /// `%v` of the ObjectReference (the 500 message quotes the list).
    fn go_value(&self) -> String {
        const AUTHN: &str = "authentication.k8s.io/v1";
        let (kind, ns, name, api_version, field_path) = match self {
            Impersonation::User(n) => ("User", "", n.as_str(), "", ""),
            Impersonation::ServiceAccount { namespace, name } => {
                ("ServiceAccount", namespace.as_str(), name.as_str(), "", "")
            }
            Impersonation::Group(n) => ("Group", "", n.as_str(), "", ""),
            Impersonation::Extra { key, value } => {
                ("UserExtra", "", value.as_str(), AUTHN, key.as_str())
            }
            Impersonation::Uid(u) => ("UID", "", u.as_str(), AUTHN, ""),
        };
        format!("{{{kind} {ns} {name}  {api_version}  {field_path}}}")
    }

    /// The RBAC attributes of the `impersonate` check: (group, resource, subresource,
    /// namespace, name).
    fn attributes(&self) -> (&'static str, &'static str, String, String, String) {
        match self {
            Impersonation::User(n) => ("", "users", String::new(), String::new(), n.clone()),
            Impersonation::ServiceAccount { namespace, name } => (
                "",
                "serviceaccounts",
                String::new(),
                namespace.clone(),
                name.clone(),
            ),
            Impersonation::Group(n) => ("", "groups", String::new(), String::new(), n.clone()),
            Impersonation::Extra { key, value } => (
                "authentication.k8s.io",
                "userextras",
                key.clone(),
                String::new(),
                value.clone(),
            ),
            Impersonation::Uid(u) => (
                "authentication.k8s.io",
                "uids",
                String::new(),
                String::new(),
                u.clone(),
            ),
        }
    }
}

/// `serviceaccount.SplitUsername`: `system:serviceaccount:<namespace>:<name>`.
fn split_service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    if name.contains(':')
        || !crate::model::names::is_dns1123_label(ns).is_empty()
        || !crate::model::names::is_dns1123_subdomain(name).is_empty()
    {
        return None;
    }
    Some((ns.to_string(), name.to_string()))
}

/// `%`-unescaping of an extra's key (`url.PathUnescape`); the key as sent when it is malformed.
fn unescape_extra_key(key: &str) -> String {
    let b = key.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: Option<&u8>| c.and_then(|c| (*c as char).to_digit(16));
            match (hex(b.get(i + 1)), hex(b.get(i + 2))) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => return key.to_string(),
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// Why impersonation refused a request.
#[derive(Debug)]
pub enum ImpersonationError {
    /// Groups, extras or a uid without a user: the filter's plain-text 500.
    Internal(String),
    /// The requestor may not impersonate one of them: RBAC's 403.
    Forbidden(StatusBody),
}

/// The impersonation filter (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`): `Ok(None)`
/// when the request impersonates nobody, `Ok(Some(user))` to act as, or why not. Every
/// requested attribute must be granted to `requestor` by the `impersonate` verb, in the
/// filter's order: user (or service account), groups, extras, uid. `request_uri` is the path
/// and query, as the 500 message quotes it.
pub fn impersonate(
    requestor: &User,
    headers: &HeaderMap,
    request_uri: &str,
) -> Result<Option<User>, ImpersonationError> {
    let mut requests = Vec::new();
    let requested_user = headers
        .get("Impersonate-User")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !requested_user.is_empty() {
        requests.push(match split_service_account(requested_user) {
            Some((namespace, name)) => Impersonation::ServiceAccount { namespace, name },
            None => Impersonation::User(requested_user.to_string()),
        });
    }
    let groups: Vec<String> = headers
        .get_all("Impersonate-Group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    requests.extend(groups.iter().cloned().map(Impersonation::Group));
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-") {
            requests.push(Impersonation::Extra {
                key: unescape_extra_key(key),
                value: value.to_str().unwrap_or("").to_string(),
            });
        }
    }
    let uid = headers
        .get("Impersonate-Uid")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !uid.is_empty() {
        requests.push(Impersonation::Uid(uid.to_string()));
    }
    if requests.is_empty() {
        return Ok(None);
    }
    if requested_user.is_empty() {
        let listed: Vec<String> = requests.iter().map(Impersonation::go_value).collect();
        return Err(ImpersonationError::Internal(format!(
            "Internal Server Error: {}: requested [{}] without impersonating a user\n",
            status::go_quote(request_uri),
            listed.join(" ")
        )));
    }
    let mut name = String::new();
    let mut user_groups: Vec<String> = Vec::new();
    let mut user_uid = String::new();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &requests {
        let (group, resource, sub, namespace, target) = r.attributes();
        if !may(requestor, "impersonate", group, resource, &sub) {
            return Err(ImpersonationError::Forbidden(status::forbidden(
                &requestor.name,
                "impersonate",
                group,
                resource,
                &sub,
                &namespace,
                &target,
            )));
        }
        match r {
            Impersonation::User(n) => name = n.clone(),
            Impersonation::ServiceAccount { namespace, name: n } => {
                name = format!("system:serviceaccount:{namespace}:{n}");
                if groups.is_empty() {
                    user_groups.push("system:serviceaccounts".into());
                    user_groups.push(format!("system:serviceaccounts:{namespace}"));
                }
            }
            Impersonation::Group(g) => user_groups.push(g.clone()),
            Impersonation::Extra { key, value } => {
                extra.entry(key.clone()).or_default().push(value.clone());
            }
            Impersonation::Uid(u) => user_uid = u.clone(),
        }
    }
    if name != ANONYMOUS {
        if !user_groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
        {
            user_groups.push(AUTHENTICATED.into());
        }
    } else if !user_groups.iter().any(|g| g == UNAUTHENTICATED) {
        user_groups.push(UNAUTHENTICATED.into());
    }
    Ok(Some(User {
        name,
        groups: user_groups,
        uid: user_uid,
        extra,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap_or(http::header::ACCEPT),
                http::HeaderValue::from_str(v).unwrap_or(http::HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn admin_may_impersonate_and_then_acts_as_the_impersonated_user() {
        let admin = User::of(Some(Identity::Admin));
        let as_readonly = impersonate(&admin, &headers(&[("Impersonate-User", "readonly")]), "/x")
            .ok()
            .flatten();
        assert_eq!(
            as_readonly,
            Some(User {
                name: "readonly".into(),
                groups: vec![AUTHENTICATED.into()],
                uid: String::new(),
                extra: BTreeMap::new(),
            })
        );
        let u = as_readonly.unwrap_or_else(|| User::of(None));
        assert!(may(&u, "get", "apps", "deployments", ""));
        assert!(!may(&u, "patch", "apps", "deployments", ""));
        assert!(!may(&u, "get", "", "secrets", ""));
        assert!(!may(&u, "list", "networking.k8s.io", "ingressclasses", ""));
    }

    #[test]
    fn a_group_without_a_user_is_the_filters_internal_error() {
        let admin = User::of(Some(Identity::Admin));
        match impersonate(
            &admin,
            &headers(&[("Impersonate-Group", "system:masters")]),
            "/apis/apps/v1/namespaces/a/deployments/web",
        ) {
            Err(ImpersonationError::Internal(m)) => assert_eq!(
                m,
                "Internal Server Error: \"/apis/apps/v1/namespaces/a/deployments/web\": requested [{Group  system:masters    }] without impersonating a user\n"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_user_without_the_impersonate_verb_is_refused_with_rbacs_message() {
        let ro = User::of(Some(Identity::ReadOnly));
        match impersonate(&ro, &headers(&[("Impersonate-User", "admin")]), "/x") {
            Err(ImpersonationError::Forbidden(s)) => assert_eq!(
                s.message,
                "users \"admin\" is forbidden: User \"readonly\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            ),
            other => panic!("{other:?}"),
        }
        match impersonate(
            &ro,
            &headers(&[("Impersonate-User", "system:serviceaccount:ns:default")]),
            "/x",
        ) {
            Err(ImpersonationError::Forbidden(s)) => assert_eq!(
                s.message,
                "serviceaccounts \"default\" is forbidden: User \"readonly\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\""
            ),
            other => panic!("{other:?}"),
        }
    }
}
