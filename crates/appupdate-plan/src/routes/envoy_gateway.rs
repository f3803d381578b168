//! The `envoy-gateway` auth provider of the `gateway` style (`--auth-provider envoy-gateway`):
//! a scoped group's HTTPRoute carries no `ExternalAuth` filter (the Gateway API standard
//! channel has none); instead one Envoy Gateway `SecurityPolicy` (`gateway.envoyproxy.io/v1alpha1`)
//! per scoped HTTPRoute sends each request to the auth Service first:
//!
//! ```yaml
//! apiVersion: gateway.envoyproxy.io/v1alpha1
//! kind: SecurityPolicy
//! metadata:
//!   name: web-4f515e078b8f8861          # the name of the HTTPRoute it guards
//!   labels: {app: web, identifier: 4f515e078b8f8861}
//! spec:
//!   targetRefs:
//!   - {group: gateway.networking.k8s.io, kind: HTTPRoute, name: web-4f515e078b8f8861}
//!   extAuth:
//!     failOpen: false                   # written out: an unreachable auth Service denies
//!     http:
//!       backendRefs:                    # --auth-service, else the live policies' or routes'
//!       - {group: "", kind: Service, name: oauth, namespace: auth, port: 8080, weight: 1}
//!       path: /scopes/YWRtaW4gdXNlcg    # "/scopes/" + the scope token, as the filter's
//!       headersToBackend: [User-Id, User-Scopes]
//! ```
//!
//! The auth Service sees the same request as with the filter: the path behind
//! `/scopes/<scope token>`, and its `User-Id` and `User-Scopes` answer headers reach the
//! backend. Public groups get no policy. An auth Service in another namespace needs a
//! ReferenceGrant there.
//!
//! # Failing closed
//!
//! A scoped path is never reachable without its policy: a policy is written in an earlier
//! round than a new HTTPRoute (or one that loses its filter), and deleted only after its route
//! is deleted or has its filter back ([`appupdate_model::plan::write_order`], [`Kind::guards`]). A
//! cluster that does not serve SecurityPolicies (no Envoy Gateway: the list answers 404), or a
//! user who may not list them, gets `envoy-gateway` refused before any write. A saved plan that
//! holds a scoped HTTPRoute without a filter must hold its policy too (`plan_file` checks).
//!
//! # Updates
//!
//! Owned: the `app`/`identifier` labels, `spec.targetRefs`, `spec.extAuth.failOpen` and
//! `spec.extAuth.http`'s `backendRefs`, `path` and `headersToBackend`; every other field (a
//! `jwt`, `cors` or `authorization` section someone added, the rest of `extAuth`) is kept. The
//! value the server would default (`weight: 1`) is written out; a live value counts as
//! unchanged when it holds everything planned.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::gateway::{AUTH_PATH_PREFIX, covers};
use super::refs::ServiceRef;
use super::{
    APP_LABEL, AUTH_RESPONSE_HEADERS, IDENTIFIER_LABEL, RouteContext, ScopeGroup, check_managed,
    label_fields, name_of, scope_token,
};
use appupdate_model::plan::{Base, FieldChange, Kind, ObjectChange, PatchType, PlanError, Write};

use crate::updaters::{Refusal, Updater};

/// The owned fields of a policy's spec: (readable path, JSON pointer under `spec`).
const OWNED: [(&str, &str); 5] = [
    ("spec.targetRefs", "/targetRefs"),
    ("spec.extAuth.failOpen", "/extAuth/failOpen"),
    ("spec.extAuth.http.backendRefs", "/extAuth/http/backendRefs"),
    ("spec.extAuth.http.path", "/extAuth/http/path"),
    (
        "spec.extAuth.http.headersToBackend",
        "/extAuth/http/headersToBackend",
    ),
];

/// One scoped group's SecurityPolicy as it should be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesiredPolicy {
    pub app: String,
    pub identifier: String,
    /// Sorted, de-duplicated, never empty.
    pub scopes: Vec<String>,
    /// The HTTPRoute it guards; the policy has the same name.
    pub route: String,
    /// `[NAMESPACE/]NAME:PORT` of the auth Service.
    pub auth_service: String,
}

impl DesiredPolicy {
    /// The policy of `group`'s HTTPRoute `route`; `None` for the public group or without an
    /// auth Service (the style's check refuses the latter first).
    pub fn new(ctx: &RouteContext, group: &ScopeGroup, route: &str) -> Option<DesiredPolicy> {
        let svc = ctx.attachment.auth_service.as_ref()?;
        (!group.is_public()).then(|| DesiredPolicy {
            app: ctx.app.clone(),
            identifier: group.identifier.clone(),
            scopes: group.scopes.clone(),
            route: route.to_owned(),
            auth_service: svc.to_string(),
        })
    }

    /// The owned part of the spec.
    fn spec(&self) -> Value {
        // With the weight the server would default written out, so that a converged policy
        // reads back exactly as planned.
        let backend = ServiceRef::parse(&self.auth_service)
            .map(|s| {
                let mut b = s.backend_ref();
                b["weight"] = json!(1);
                b
            })
            .unwrap_or(Value::Null);
        json!({
            "targetRefs": [{
                "group": "gateway.networking.k8s.io",
                "kind": Kind::HttpRoute.name(),
                "name": self.route,
            }],
            "extAuth": {
                "failOpen": false,
                "http": {
                    "backendRefs": [backend],
                    "path": format!("{AUTH_PATH_PREFIX}{}", scope_token(&self.scopes)),
                    "headersToBackend": AUTH_RESPONSE_HEADERS,
                },
            },
        })
    }

    /// The complete object to create, named `name`.
    fn create_body(&self, name: &str, namespace: &str) -> Value {
        json!({
            "apiVersion": Kind::SecurityPolicy.api_version(),
            "kind": Kind::SecurityPolicy.name(),
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": { APP_LABEL: self.app, IDENTIFIER_LABEL: self.identifier },
            },
            "spec": self.spec(),
        })
    }
}

/// What the diff shows of a SecurityPolicy: identity, owned labels and the owned part of its
/// spec.
pub fn focused_view(obj: &Value, namespace: &str, name: &str) -> Value {
    let mut labels = Map::new();
    for key in [APP_LABEL, IDENTIFIER_LABEL] {
        if let Some(v) = obj["metadata"]["labels"].get(key) {
            labels.insert(key.into(), v.clone());
        }
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    let mut spec = json!({});
    for (_, pointer) in OWNED {
        if let Some(v) = obj["spec"].pointer(pointer) {
            set(&mut spec, pointer, v.clone());
        }
    }
    json!({
        "apiVersion": Kind::SecurityPolicy.api_version(),
        "kind": Kind::SecurityPolicy.name(),
        "metadata": meta,
        "spec": spec,
    })
}

/// Sets the value at a JSON `pointer` of plain keys, making the objects on the way.
fn set(target: &mut Value, pointer: &str, value: Value) {
    let mut at = target;
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, key) in keys.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        let Value::Object(m) = at else { return };
        if i + 1 == keys.len() {
            m.insert((*key).to_owned(), value);
            return;
        }
        at = m.entry((*key).to_owned()).or_insert_with(|| json!({}));
    }
}

/// Creates a scoped group's SecurityPolicy, or updates the owned parts of the live one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityPolicyUpdater {
    /// The name of the HTTPRoute it guards.
    pub name: String,
    pub desired: DesiredPolicy,
}

impl SecurityPolicyUpdater {
    fn reference(&self) -> String {
        format!("{}/{}", Kind::SecurityPolicy.kubectl_name(), self.name)
    }

    fn create(&self, namespace: &str) -> ObjectChange {
        let d = &self.desired;
        let body = d.create_body(&self.name, namespace);
        let mut fields = label_fields(&d.app, &d.identifier);
        for (path, pointer) in OWNED {
            fields.push(FieldChange::new(
                path,
                None,
                body["spec"].pointer(pointer).cloned(),
            ));
        }
        ObjectChange {
            kind: Kind::SecurityPolicy,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: None,
            fields,
            before: None,
            after: Some(Arc::new(focused_view(&body, namespace, &self.name)).into()),
            write: Some(Write::Create { body: body.into() }),
            route: None,
        }
    }

    fn update(&self, namespace: &str, live: &Value) -> Result<ObjectChange, PlanError> {
        let d = &self.desired;
        check_managed(
            Kind::SecurityPolicy,
            live,
            &self.name,
            &d.app,
            &d.identifier,
        )?;
        let wanted = d.spec();
        let mut fields = Vec::new();
        let mut patch = json!({});
        let mut after = json!({
            "metadata": { "labels": live["metadata"]["labels"].clone() },
            "spec": live["spec"].clone(),
        });
        for (path, pointer) in OWNED {
            let current = live["spec"].pointer(pointer);
            let Some(want) = wanted.pointer(pointer) else {
                continue;
            };
            if current.is_some_and(|c| covers(c, want)) {
                continue;
            }
            fields.push(FieldChange::new(path, current.cloned(), Some(want.clone())));
            set(&mut patch, pointer, want.clone());
            set(&mut after["spec"], pointer, want.clone());
        }
        let write = if fields.is_empty() {
            None
        } else {
            Some(Write::Patch {
                base: Base::required(live, &self.reference())?,
                patch_type: PatchType::Merge,
                body: json!({ "spec": patch }).into(),
            })
        };
        Ok(ObjectChange {
            kind: Kind::SecurityPolicy,
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            live: Base::of(live),
            fields,
            before: Some(Arc::new(focused_view(live, namespace, &self.name)).into()),
            after: Some(Arc::new(focused_view(&after, namespace, &self.name)).into()),
            write,
            route: None,
        })
    }

    /// Refuses a saved updater (a plan file's) that is not exactly the policy the
    /// `envoy-gateway` provider makes for a scoped group of `app`: named like the route it
    /// targets, its scopes through the endpoints file's guard, its auth Service as
    /// `--auth-service` parses it. A new policy (`creates`) only under the name the style gives
    /// its route, unless the plan updates the live route of its name (`plan_file` decides).
    pub fn check_saved(&self, app: &str, creates: bool) -> Result<(), Refusal> {
        let d = &self.desired;
        super::saved_owned(&d.app, app, &self.name)?;
        if d.route != self.name {
            return Err(Refusal::TargetsAnotherRoute(d.route.clone()));
        }
        if d.scopes.is_empty() {
            return Err(Refusal::PublicPolicy);
        }
        // The scopes through the endpoints file's guard, with a path that passes it.
        super::saved_group(&d.scopes, &d.identifier, &["/".to_owned()])?;
        ServiceRef::parse(&d.auth_service).map_err(Refusal::AuthService)?;
        super::saved_name(
            Kind::SecurityPolicy,
            app,
            &d.identifier,
            &self.name,
            creates,
        )
    }
}

impl SecurityPolicyUpdater {
    /// The change against `live` (`None`: the policy does not exist).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        match live {
            None => Ok(self.create(namespace)),
            Some(live) => self.update(namespace, live),
        }
    }
}

/// Deletes a managed SecurityPolicy whose route is gone, is public, or now checks its scopes
/// another way.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityPolicyRemoval {
    pub app: String,
    pub name: String,
}

impl SecurityPolicyRemoval {
    /// Refuses a saved removal of an object that cannot be one of `app`'s policies.
    pub fn check_saved(&self, app: &str) -> Result<(), Refusal> {
        super::saved_owned(&self.app, app, &self.name)
    }

    /// The deletion of `live` (nothing to do when it is gone).
    pub fn plan(&self, namespace: &str, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
        super::deletion(
            Kind::SecurityPolicy,
            namespace,
            &self.app,
            &self.name,
            live,
            |live| (focused_view(live, namespace, &self.name), None),
        )
    }
}

/// The names of the HTTPRoutes a live managed SecurityPolicy targets.
pub fn targets(policy: &Value) -> Vec<&str> {
    policy["spec"]["targetRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            r["kind"] == Kind::HttpRoute.name() && r["group"] == "gateway.networking.k8s.io"
        })
        .filter_map(|r| r["name"].as_str())
        .collect()
}

/// The auth Service of a live managed SecurityPolicy (its first HTTP backend).
pub fn auth_service_of(policy: &Value) -> Option<ServiceRef> {
    ServiceRef::of_backend_ref(&policy["spec"]["extAuth"]["http"]["backendRefs"][0])
}

/// The scopes a live managed SecurityPolicy checks: the scope token of its HTTP path.
pub fn scopes_of(policy: &Value) -> Option<Vec<String>> {
    policy["spec"]["extAuth"]["http"]["path"]
        .as_str()?
        .strip_prefix(AUTH_PATH_PREFIX)
        .and_then(super::scopes_of_token)
        .filter(|s| !s.is_empty())
}

/// For each live HTTPRoute without the ExternalAuth filter that a live managed SecurityPolicy
/// targets, the scopes that policy checks ([`RouteContext::guarded_scopes`]).
pub fn guarded_scopes(
    routes: &[Value],
    policies: &[Value],
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    for route in routes {
        let Some(name) = name_of(route) else { continue };
        if super::gateway::has_external_auth(route) {
            continue;
        }
        if let Some(scopes) = policies
            .iter()
            .filter(|p| targets(p).contains(&name))
            .find_map(scopes_of)
        {
            out.insert(name.to_owned(), scopes);
        }
    }
    out
}

/// The SecurityPolicies of a run: with the `envoy-gateway` provider, one per scoped group, named
/// like the group's HTTPRoute (`routes`: the route name of each group, in the order of
/// `groups`); every other live managed policy is removed. Each comes with the index of the
/// live policy it starts from.
pub fn policy_updaters(
    ctx: &RouteContext,
    groups: &[ScopeGroup],
    routes: &[String],
    enforced: bool,
    live: &[Value],
) -> Vec<(Updater, Option<usize>)> {
    let index = |name: &str| live.iter().position(|p| name_of(p) == Some(name));
    let mut out: Vec<(Updater, Option<usize>)> = Vec::new();
    let mut kept = BTreeSet::new();
    if enforced {
        for (group, route) in groups.iter().zip(routes) {
            if let Some(desired) = DesiredPolicy::new(ctx, group, route) {
                kept.insert(route.as_str());
                out.push((
                    Updater::SecurityPolicy(SecurityPolicyUpdater {
                        name: route.clone(),
                        desired,
                    }),
                    index(route),
                ));
            }
        }
    }
    let mut extra: Vec<(&str, usize)> = live
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((name_of(p)?, i)))
        .filter(|(name, _)| !kept.contains(name))
        .collect();
    extra.sort();
    extra.dedup_by(|a, b| a.0 == b.0);
    for (name, i) in extra {
        out.push((
            Updater::SecurityPolicyRemoval(SecurityPolicyRemoval {
                app: ctx.app.clone(),
                name: name.to_owned(),
            }),
            Some(i),
        ));
    }
    out
}

#[cfg(test)]
mod tests;
