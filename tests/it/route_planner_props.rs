//! Property tests of the route planner in every style (and both auth providers of the
//! `gateway` style), through the public API.
//!
//! The cluster is modelled as a `Vec<Value>` of Ingresses, HTTPRoutes and SecurityPolicies:
//! creates add the body with the fields a server sets, merge patches follow RFC 7386, deletes
//! remove by kind and name. The caller's part is played as the real command does it: list the
//! managed objects (`app=web,identifier`), plan, then hand each updater the live object of its
//! name, and write round by round in `plan::write_order`, checking at the worst moment of every
//! round (all of the round's writes that stop serving it landed, none that start to) every path
//! that must stay served, and that no HTTPRoute serves paths with scopes without checking them
//! (its ExternalAuth filter, or a SecurityPolicy that targets it, in whatever order the round's
//! writes land).
// Helpers outside `#[test]` functions are not covered by `allow-unwrap-in-tests`; here a
// failed unwrap is a failed test, which is what we want.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use appupdate_model::endpoints_file::{self, EndpointsFile};
use appupdate_model::plan::{
    Action, AuthProvider, Kind, ObjectChange, PatchType, RouteStyle, Write, write_order,
};
use appupdate_plan::routes::refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef};
use appupdate_plan::routes::{
    self, APP_LABEL, IDENTIFIER_LABEL, Listing, LiveRoutes, gateway, ingress, normalize_scopes,
    scope_identifier, style_of,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const APP: &str = "web";
const NS: &str = "shop";

/// An endpoint as generated: path (without the app prefix) and scopes as written.
type Spec = Vec<(String, Vec<String>)>;

fn scope() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["user", "admin", "read:orders", "ops", "a.b", "x/y-z"])
        .prop_map(str::to_owned)
}

/// Distinct paths (no trailing '/', no '.'/'..' segments), each with 0–3 scopes (repeats
/// allowed).
fn endpoints() -> impl Strategy<Value = Spec> {
    prop::collection::btree_set("/[a-z0-9]{1,4}(/[a-z0-9_~-]{1,3}(\\.json)?){0,2}", 0..10)
        .prop_flat_map(|paths| {
            let n = paths.len();
            (
                Just(paths.into_iter().collect::<Vec<_>>()),
                prop::collection::vec(prop::collection::vec(scope(), 0..4), n),
            )
        })
        .prop_map(|(paths, scopes)| paths.into_iter().zip(scopes).collect())
}

/// A route style, and for `gateway` its auth provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Variant {
    style: RouteStyle,
    provider: Option<AuthProvider>,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        style: RouteStyle::NginxSnippet,
        provider: None,
    },
    Variant {
        style: RouteStyle::NginxAuth,
        provider: None,
    },
    Variant {
        style: RouteStyle::Gateway,
        provider: Some(AuthProvider::Filter),
    },
    Variant {
        style: RouteStyle::Gateway,
        provider: Some(AuthProvider::EnvoyGateway),
    },
];

fn any_style() -> impl Strategy<Value = Variant> {
    prop::sample::select(VARIANTS.to_vec())
}

/// The endpoints file text for a spec.
fn yaml(spec: &Spec) -> String {
    if spec.is_empty() {
        return "endpoints: []\n".to_owned();
    }
    let mut s = String::from("# generated\nendpoints:\n");
    for (path, scopes) in spec {
        s.push_str(&format!("  - path: {path}\n"));
        if !scopes.is_empty() {
            let quoted: Vec<String> = scopes.iter().map(|x| format!("'{x}'")).collect();
            s.push_str(&format!("    scopes: [{}]\n", quoted.join(", ")));
        }
    }
    s
}

fn parse(spec: &Spec) -> EndpointsFile {
    endpoints_file::parse(&yaml(spec), "endpoints.yaml").unwrap()
}

/// The flags a run in `v` is given: the style, the provider, and what it needs on a first
/// exposure.
fn flags(v: Variant) -> RouteFlags {
    let mut f = RouteFlags {
        style: Some(v.style),
        auth_provider: v.provider,
        ..RouteFlags::default()
    };
    match v.style {
        RouteStyle::NginxSnippet => {}
        RouteStyle::NginxAuth => {
            f.auth_url = Some(AuthUrl::parse("http://auth.auth.svc/verify").unwrap());
        }
        RouteStyle::Gateway => {
            f.gateway = Some(ObjectRef::parse("gateways/public").unwrap());
            f.auth_service = Some(ServiceRef::parse("auth/oauth:8080").unwrap());
        }
    }
    f
}

fn kind_of(o: &Value) -> Kind {
    match o["kind"].as_str() {
        Some("HTTPRoute") => Kind::HttpRoute,
        Some("SecurityPolicy") => Kind::SecurityPolicy,
        _ => Kind::Ingress,
    }
}

/// The managed objects of `kind`, as `kubectl get … -l app=web,identifier` would list them.
fn managed(cluster: &[Value], kind: Kind) -> Vec<Value> {
    let mut v: Vec<Value> = cluster
        .iter()
        .filter(|o| {
            kind_of(o) == kind
                && o["metadata"]["labels"][APP_LABEL] == json!(APP)
                && o["metadata"]["labels"].get(IDENTIFIER_LABEL).is_some()
        })
        .cloned()
        .collect();
    v.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    v
}

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": APP, "namespace": NS},
           "spec": {"ports": [{"name": "http", "port": 8080}]}})
}

fn classes() -> Vec<Value> {
    vec![
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "k8s.io/ingress-nginx"}}),
    ]
}

fn position(cluster: &[Value], kind: Kind, name: &str) -> Option<usize> {
    cluster
        .iter()
        .position(|o| kind_of(o) == kind && o["metadata"]["name"].as_str() == Some(name))
}

/// Stores a created object the way the API server does.
fn server_create(cluster: &mut Vec<Value>, mut body: Value, rv: &mut u64) {
    *rv += 1;
    let name = body["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(
        position(cluster, kind_of(&body), &name).is_none(),
        "create of an existing name {name}"
    );
    let meta = &mut body["metadata"];
    meta["uid"] = json!(format!("uid-{name}-{rv}"));
    meta["resourceVersion"] = json!(rv.to_string());
    meta["generation"] = json!(1);
    meta["creationTimestamp"] = json!("2026-11-30T11:48:26Z");
    meta["managedFields"] = json!([{"manager": "kubectl-appupdate", "operation": "Update"}]);
    body["status"] = json!({});
    cluster.push(body);
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// Plans `spec` in `style` against the cluster: the changes, in plan order. Each updater plans
/// twice, against the live object lent and given up (as the planner does, which moves parts of
/// it into the change): the two changes must be the same.
fn plan(cluster: &[Value], spec: &Spec, flags: &RouteFlags) -> Vec<ObjectChange> {
    let ingresses = managed(cluster, Kind::Ingress);
    let httproutes = Listing::Items(managed(cluster, Kind::HttpRoute));
    let policies = Listing::Items(managed(cluster, Kind::SecurityPolicy));
    let svc = service();
    let classes = classes();
    let live = LiveRoutes {
        service: &svc,
        ingresses: &ingresses,
        httproutes: &httproutes,
        security_policies: &policies,
        ingress_classes: Some(&classes),
        gateway_support: None,
    };
    routes::plan_routes(APP, &parse(spec), flags, &live)
        .unwrap()
        .updaters
        .into_iter()
        .map(|(u, at)| {
            let obj = at.and_then(|at| live.get(at));
            let lent = u.plan(NS, obj).unwrap();
            let given = u.plan_owned(NS, obj.cloned()).unwrap();
            assert_eq!(lent, given, "{}: lent and given up", u.name());
            lent
        })
        .collect()
}

/// Applies one write to the model.
fn write(cluster: &mut Vec<Value>, c: &ObjectChange, rv: &mut u64) {
    let pos = position(cluster, c.kind, &c.name);
    match (c.write.as_ref().unwrap(), pos) {
        (Write::Create { body }, None) => server_create(cluster, Value::clone(body), rv),
        (
            Write::Patch {
                patch_type: PatchType::Merge,
                body,
                ..
            },
            Some(i),
        ) => {
            *rv += 1;
            merge(&mut cluster[i], body);
            cluster[i]["metadata"]["resourceVersion"] = json!(rv.to_string());
        }
        (Write::Delete { .. }, Some(i)) => {
            cluster.remove(i);
        }
        (w, pos) => panic!("unexpected write {w:?} for {} (present: {pos:?})", c.name),
    }
}

/// Endpoint path → the scope sets of the managed routes that serve it.
fn served(cluster: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in managed(cluster, Kind::Ingress) {
        let id = o["metadata"]["labels"][IDENTIFIER_LABEL]
            .as_str()
            .unwrap()
            .to_owned();
        for p in ingress::served_paths(&o, APP) {
            out.entry(p).or_default().push(id.clone());
        }
    }
    for o in managed(cluster, Kind::HttpRoute) {
        let id = o["metadata"]["labels"][IDENTIFIER_LABEL]
            .as_str()
            .unwrap()
            .to_owned();
        for p in gateway::served_paths(&o, APP) {
            out.entry(p).or_default().push(id.clone());
        }
    }
    out
}

/// The endpoint paths a managed route serves (none for anything else).
fn paths_of(o: &Value) -> BTreeSet<String> {
    let managed = o["metadata"]["labels"][APP_LABEL] == json!(APP)
        && o["metadata"]["labels"].get(IDENTIFIER_LABEL).is_some();
    if !managed {
        return BTreeSet::new();
    }
    match kind_of(o) {
        Kind::Ingress => ingress::served_paths(o, APP).into_iter().collect(),
        Kind::HttpRoute => gateway::served_paths(o, APP).into_iter().collect(),
        _ => BTreeSet::new(),
    }
}

fn is_managed(o: &Value) -> bool {
    o["metadata"]["labels"][APP_LABEL] == json!(APP)
        && o["metadata"]["labels"].get(IDENTIFIER_LABEL).is_some()
}

/// A managed HTTPRoute of a group with scopes.
fn scoped(route: &Value) -> bool {
    is_managed(route)
        && route["metadata"]["labels"][IDENTIFIER_LABEL] != json!(scope_identifier(&[]))
}

/// Every rule of an HTTPRoute sends its requests to the auth service first.
fn checks_itself(route: &Value) -> bool {
    route["spec"]["rules"].as_array().is_some_and(|rules| {
        rules.iter().all(|r| {
            r["filters"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["type"] == "ExternalAuth"))
        })
    })
}

/// A managed SecurityPolicy that sends the requests of the HTTPRoute `route` to the auth
/// service with a scope path, failing closed.
fn guards(policy: &Value, route: &str) -> bool {
    is_managed(policy)
        && kind_of(policy) == Kind::SecurityPolicy
        && policy["spec"]["targetRefs"].as_array().is_some_and(|refs| {
            refs.iter()
                .any(|r| r["kind"] == "HTTPRoute" && r["name"] == json!(route))
        })
        && policy["spec"]["extAuth"]["failOpen"] == json!(false)
        && policy["spec"]["extAuth"]["http"]["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/scopes/"))
        && policy["spec"]["extAuth"]["http"]["backendRefs"][0]["name"].is_string()
}

fn names_of(cluster: &[Value], kind: Kind) -> BTreeSet<String> {
    cluster
        .iter()
        .filter(|o| kind_of(o) == kind)
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Whether, during a round that goes from `before` to `after` writing `writes` in any order, an
/// HTTPRoute with scopes can serve without checking them: some state it is in (before or after
/// its write) has no ExternalAuth filter while no SecurityPolicy guards it in every state that
/// policy is in (before or after its write). Returns the first such route.
fn unguarded_route(before: &[Value], after: &[Value], writes: &[&ObjectChange]) -> Option<String> {
    let states = |kind: Kind, name: &str| -> Vec<Option<Value>> {
        let at = |c: &[Value]| position(c, kind, name).map(|i| c[i].clone());
        if writes.iter().any(|c| c.kind == kind && c.name == name) {
            vec![at(before), at(after)]
        } else {
            vec![at(after)]
        }
    };
    let routes: BTreeSet<String> = names_of(before, Kind::HttpRoute)
        .union(&names_of(after, Kind::HttpRoute))
        .cloned()
        .collect();
    let policies: BTreeSet<String> = names_of(before, Kind::SecurityPolicy)
        .union(&names_of(after, Kind::SecurityPolicy))
        .cloned()
        .collect();
    for route in &routes {
        for state in states(Kind::HttpRoute, route).into_iter().flatten() {
            if !scoped(&state) || checks_itself(&state) {
                continue;
            }
            let guarded = policies.iter().any(|p| {
                states(Kind::SecurityPolicy, p)
                    .iter()
                    .all(|s| s.as_ref().is_some_and(|s| guards(s, route)))
            });
            if !guarded {
                return Some(route.clone());
            }
        }
    }
    None
}

/// Applies planned changes round by round ([`write_order`]) and checks that every path in
/// `keep` not listed as unguarded is served at the worst moment of every round: whatever order
/// the round's writes land in, some route serves it — one the round does not write, or one
/// that serves it both before and after its write. Returns the unguarded paths.
fn apply(
    cluster: &mut Vec<Value>,
    changes: &[ObjectChange],
    rv: &mut u64,
    keep: &BTreeSet<String>,
) -> Vec<String> {
    let order = write_order(changes);
    for round in 0..order.round_count() {
        let writes: Vec<&ObjectChange> = changes
            .iter()
            .zip(&order.rounds)
            .filter(|(_, r)| **r == Some(round))
            .map(|(c, _)| c)
            .collect();
        let before = cluster.clone();
        for c in &writes {
            write(cluster, c, rv);
        }
        for p in keep.iter().filter(|p| !order.unguarded.contains(p)) {
            let served = before.iter().any(|o| {
                let name = o["metadata"]["name"].as_str();
                let written = writes
                    .iter()
                    .any(|c| c.kind == kind_of(o) && Some(c.name.as_str()) == name);
                let after = position(cluster, kind_of(o), name.unwrap_or_default())
                    .map(|i| paths_of(&cluster[i]))
                    .unwrap_or_default();
                paths_of(o).contains(p) && (!written || after.contains(p))
            });
            assert!(
                served,
                "{p} may be unserved in round {round}: {:?}",
                order.rounds
            );
        }
        if let Some(route) = unguarded_route(&before, cluster, &writes) {
            panic!(
                "{route} may serve paths with scopes unchecked in round {round}: {:?}",
                order.rounds
            );
        }
    }
    order.unguarded
}

/// The endpoint paths in both `before` and `after`: those that must stay served throughout.
fn kept_paths(before: &Spec, after: &Spec) -> BTreeSet<String> {
    before
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| after.iter().any(|(q, _)| q == p))
        .collect()
}

/// A cluster converged on `spec` in `style`, with decorations a real cluster would have: a
/// foreign label and annotation and an unknown field on every managed object, an unmanaged
/// `app=web` Ingress, HTTPRoute and SecurityPolicy and another app's Ingress.
fn decorated_cluster(spec: &Spec, style: Variant) -> (Vec<Value>, u64) {
    let mut cluster = vec![
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "other", "namespace": NS, "uid": "u-other",
                         "resourceVersion": "1", "labels": {"app": "web"}},
            "spec": {"rules": [{"http": {"paths": [{"path": "/other", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
        }),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "other", "namespace": NS, "uid": "u-other-r",
                         "resourceVersion": "1", "labels": {"app": "web"}},
            "spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/other"}}]}]}
        }),
        json!({
            "apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy",
            "metadata": {"name": "other", "namespace": NS, "uid": "u-other-p",
                         "resourceVersion": "1", "labels": {"app": "web"}},
            "spec": {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "other"}]}
        }),
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop-x", "namespace": NS, "uid": "u-shop",
                         "resourceVersion": "2",
                         "labels": {"app": "shop", "identifier": "e3b0c44298fc1c14"}},
            "spec": {"rules": [{"http": {"paths": []}}]}
        }),
    ];
    let mut rv = 10;
    let changes = plan(&cluster, spec, &flags(style));
    for c in &changes {
        let Some(Write::Create { body }) = &c.write else {
            panic!("a first exposure only creates: {c:?}")
        };
        let mut body = Value::clone(body);
        body["metadata"]["labels"]["team"] = json!("payments");
        body["metadata"]["annotations"]["example.com/owner"] = json!("alice");
        body["spec"]["futureSpecField"] = json!({"x": 1});
        if kind_of(&body) == Kind::Ingress {
            body["spec"]["rules"][0]["futureRuleField"] = json!(true);
        }
        server_create(&mut cluster, body, &mut rv);
    }
    (cluster, rv)
}

fn unmanaged(cluster: &[Value]) -> Vec<Value> {
    let mut v: Vec<Value> = cluster
        .iter()
        .filter(|o| {
            o["metadata"]["labels"][APP_LABEL] != json!(APP)
                || o["metadata"]["labels"].get(IDENTIFIER_LABEL).is_none()
        })
        .cloned()
        .collect();
    for o in &mut v {
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
    }
    v
}

/// How the routes of `spec` check scopes in `v`: with the `envoy-gateway` provider, every
/// scoped HTTPRoute is without the filter and guarded by exactly one managed policy, one per
/// scoped group; with the filter, every scoped HTTPRoute has it; otherwise no managed policy.
fn check_auth(cluster: &[Value], v: Variant, spec: &Spec) -> Result<(), TestCaseError> {
    let policies = managed(cluster, Kind::SecurityPolicy);
    let scoped_groups: BTreeSet<Vec<String>> = spec
        .iter()
        .map(|(_, s)| normalize_scopes(s))
        .filter(|s| !s.is_empty())
        .collect();
    match v.provider {
        Some(AuthProvider::EnvoyGateway) => {
            prop_assert_eq!(policies.len(), scoped_groups.len());
            for r in managed(cluster, Kind::HttpRoute)
                .iter()
                .filter(|r| scoped(r))
            {
                let name = r["metadata"]["name"].as_str().unwrap();
                prop_assert!(!checks_itself(r), "{}", r);
                let guarding = policies.iter().filter(|p| guards(p, name)).count();
                prop_assert_eq!(guarding, 1, "{}", name);
                let p = policies.iter().find(|p| guards(p, name)).unwrap();
                prop_assert_eq!(&p["metadata"]["name"], &r["metadata"]["name"]);
                prop_assert_eq!(
                    &p["metadata"]["labels"][IDENTIFIER_LABEL],
                    &r["metadata"]["labels"][IDENTIFIER_LABEL]
                );
            }
        }
        Some(AuthProvider::Filter) => {
            prop_assert!(policies.is_empty());
            for r in managed(cluster, Kind::HttpRoute)
                .iter()
                .filter(|r| scoped(r))
            {
                prop_assert!(checks_itself(r), "{}", r);
            }
        }
        None => prop_assert!(policies.is_empty()),
    }
    Ok(())
}

/// Shuffles the endpoints and the scopes inside each.
fn shuffled(spec: Spec) -> impl Strategy<Value = Spec> {
    let n = spec.len();
    (
        Just(spec).prop_shuffle(),
        prop::collection::vec(any::<prop::sample::Index>(), n),
    )
        .prop_map(|(mut spec, rot)| {
            for ((_, scopes), r) in spec.iter_mut().zip(rot) {
                if !scopes.is_empty() {
                    let k = r.index(scopes.len());
                    scopes.rotate_left(k);
                }
            }
            spec
        })
}

proptest! {
    /// On a first exposure in any style, every endpoint is served by exactly one route, the
    /// one of its scope set; no route serves a path nobody asked for; identifiers and names
    /// are unique and the names are `web-<identifier>`.
    #[test]
    fn every_endpoint_lands_in_exactly_one_route(spec in endpoints(), style in any_style()) {
        let (cluster, _) = decorated_cluster(&spec, style);
        let served = served(&cluster);
        for (path, scopes) in &spec {
            let ids = served.get(path).cloned().unwrap_or_default();
            prop_assert_eq!(&ids, &vec![scope_identifier(scopes)], "{}", path);
        }
        prop_assert_eq!(served.len(), spec.len());
        let routes = managed(&cluster, routes::style(style.style).kind());
        let ids: BTreeSet<&str> = routes
            .iter()
            .map(|o| o["metadata"]["labels"][IDENTIFIER_LABEL].as_str().unwrap())
            .collect();
        prop_assert_eq!(ids.len(), routes.len());
        for o in &routes {
            let id = o["metadata"]["labels"][IDENTIFIER_LABEL].as_str().unwrap();
            prop_assert_eq!(&o["metadata"]["name"], &json!(format!("web-{id}")));
            prop_assert_eq!(style_of(kind_of(o), o), Some(style.style));
        }
        check_auth(&cluster, style, &spec)?;
    }

    /// Reordering the endpoints, or the scopes of an endpoint, does not change the plan.
    #[test]
    fn shuffled_input_plans_the_same(
        (spec, other, start) in endpoints().prop_flat_map(|s| {
            (Just(s.clone()), shuffled(s), endpoints())
        }),
        before in any_style(),
        after in any_style(),
    ) {
        let (cluster, _) = decorated_cluster(&start, before);
        prop_assert_eq!(plan(&cluster, &spec, &flags(after)), plan(&cluster, &other, &flags(after)));
    }

    /// A cluster that already holds the desired routes, as a server stores them with foreign
    /// fields added, plans no change — also with Ingress paths stored in another order, and
    /// without --routes (the style is read from what is live).
    #[test]
    fn a_converged_state_plans_nothing(spec in endpoints(), style in any_style(), reverse in any::<bool>(), explicit in any::<bool>()) {
        let (mut cluster, _) = decorated_cluster(&spec, style);
        if reverse {
            for o in cluster.iter_mut().filter(|o| kind_of(o) == Kind::Ingress) {
                if let Some(paths) = o["spec"]["rules"][0]["http"]["paths"].as_array_mut() {
                    paths.reverse();
                }
            }
        }
        let f = if explicit { flags(style) } else { RouteFlags::default() };
        for c in plan(&cluster, &spec, &f) {
            prop_assert_eq!(c.action(), Action::Unchanged, "{:?}", c);
            prop_assert!(c.fields.is_empty() && c.write.is_none());
        }
    }

    /// Applying a plan — in the same style or migrating to another — yields exactly the
    /// desired routes in the new style, keeps every path that stays served at every round,
    /// leaves unmanaged objects and foreign fields alone, and then plans nothing.
    #[test]
    fn applying_a_plan_yields_the_desired_set(
        before in endpoints(),
        after in endpoints(),
        from in any_style(),
        to in any_style(),
    ) {
        let (mut cluster, mut rv) = decorated_cluster(&before, from);
        let unmanaged_before = unmanaged(&cluster);
        let keep = kept_paths(&before, &after);

        let changes = plan(&cluster, &after, &flags(to));
        // Every route change says the scopes of its group (a history record keeps them): a
        // route without the filter that goes says its policy's, not "public".
        for c in &changes {
            if let Some(info) = &c.route {
                prop_assert_eq!(&scope_identifier(&info.scopes), &info.identifier, "{:?}", c);
            }
        }
        apply(&mut cluster, &changes, &mut rv, &keep);

        let kind = routes::style(to.style).kind();
        let other = if kind == Kind::Ingress { Kind::HttpRoute } else { Kind::Ingress };
        prop_assert!(managed(&cluster, other).is_empty());
        let have = managed(&cluster, kind);
        let groups: BTreeSet<Vec<String>> = after.iter().map(|(_, s)| normalize_scopes(s)).collect();
        prop_assert_eq!(have.len(), groups.len());
        for o in &have {
            prop_assert_eq!(style_of(kind, o), Some(to.style), "{}", o);
        }
        check_auth(&cluster, to, &after)?;
        let served = served(&cluster);
        for (path, scopes) in &after {
            prop_assert_eq!(served.get(path).cloned().unwrap_or_default(), vec![scope_identifier(scopes)]);
        }
        prop_assert_eq!(served.len(), after.len());
        // Foreign fields on routes that were updated in place survive.
        for o in &have {
            if o["metadata"]["labels"].get("team").is_some() {
                prop_assert_eq!(&o["metadata"]["annotations"]["example.com/owner"], &json!("alice"));
                prop_assert_eq!(&o["spec"]["futureSpecField"], &json!({"x": 1}));
                if kind == Kind::Ingress {
                    prop_assert_eq!(&o["spec"]["rules"][0]["futureRuleField"], &json!(true));
                }
            }
        }
        prop_assert_eq!(unmanaged(&cluster), unmanaged_before);

        for c in plan(&cluster, &after, &flags(to)) {
            prop_assert_eq!(c.action(), Action::Unchanged, "{:?}", c);
        }
        for c in plan(&cluster, &after, &RouteFlags::default()) {
            prop_assert_eq!(c.action(), Action::Unchanged, "{:?}", c);
        }
    }

    /// A new endpoints file that keeps, re-scopes and drops the endpoints of the live one and
    /// adds others, applied in the same or another style: every path served before and after
    /// is served at every moment of the run, except paths that swap routes in a cycle; and
    /// there are none of those unless two groups each give the other a path.
    #[test]
    fn paths_that_stay_are_served_throughout(
        (before, after) in endpoints().prop_flat_map(|spec| {
            let n = spec.len();
            (
                Just(spec),
                prop::collection::vec((0..4u8, prop::collection::vec(scope(), 0..3)), n),
                endpoints(),
            )
        }).prop_map(|(spec, edits, extra)| {
            let mut after: Spec = Vec::new();
            for ((path, scopes), (edit, other)) in spec.iter().zip(edits) {
                match edit {
                    0 => {}
                    1 => after.push((path.clone(), other)),
                    _ => after.push((path.clone(), scopes.clone())),
                }
            }
            for (path, scopes) in extra {
                if !after.iter().any(|(p, _)| *p == path) {
                    after.push((path, scopes));
                }
            }
            (spec, after)
        }),
        from in any_style(),
        to in any_style(),
    ) {
        let (mut cluster, mut rv) = decorated_cluster(&before, from);
        let keep = kept_paths(&before, &after);
        let changes = plan(&cluster, &after, &flags(to));
        let unguarded = apply(&mut cluster, &changes, &mut rv, &keep);
        // A path is unguarded only when it moves between two routes that are both updated in
        // place (each gives the other a path, perhaps through others): its old group still has
        // a route afterwards and its new group had one before, in the same kind.
        let groups = |spec: &Spec| -> BTreeSet<Vec<String>> {
            spec.iter().map(|(_, s)| normalize_scopes(s)).collect()
        };
        let group = |spec: &Spec, p: &str| {
            spec.iter().find(|(q, _)| q == p).map(|(_, s)| normalize_scopes(s))
        };
        for p in &unguarded {
            let (old, new) = (group(&before, p).unwrap(), group(&after, p).unwrap());
            prop_assert!(old != new, "{}", p);
            prop_assert!(groups(&after).contains(&old) && groups(&before).contains(&new), "{}", p);
            prop_assert_eq!(routes::style(from.style).kind(), routes::style(to.style).kind());
        }
        let served = served(&cluster);
        for (path, scopes) in &after {
            prop_assert_eq!(served.get(path).cloned().unwrap_or_default(), vec![scope_identifier(scopes)]);
        }
        prop_assert_eq!(served.len(), after.len());
    }

    /// Arbitrary bytes never make the parser panic, and every error is one line.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = endpoints_file::parse(&text, "fuzz.yaml") {
            let line = e.to_string();
            prop_assert!(line.starts_with("fuzz.yaml:"));
            prop_assert!(!line.contains('\n') && !line.contains('\r'));
        }
    }

    /// YAML-shaped noise gets deep into the parser; still no panic, still one line.
    #[test]
    fn yaml_shaped_noise_never_panics(
        tokens in prop::collection::vec(
            prop::sample::select(vec![
                "endpoints", "path", "scopes", ":", ": ", "-", "- ", "[", "]", "{", "}", ",",
                " ", "  ", "\n", "\t", "/a", "/b/", "'", "\"", "&a ", "*a", "!!str ", "!!binary ",
                "#", "? ", "---\n", "...\n", "<<: ", "~", "null", "true", "1e3", ".inf", "0x1F",
                "|\n", ">-\n", "%YAML 1.2\n", "\\", "é", "\u{0}", "\u{feff}", ";", "$", "..",
            ]),
            0..60,
        )
    ) {
        let text: String = tokens.concat();
        match endpoints_file::parse(&text, "-") {
            Ok(file) => {
                for e in &file.endpoints {
                    prop_assert!(e.path.starts_with('/'));
                    prop_assert!(e.line >= 1);
                }
            }
            Err(e) => {
                let line = e.to_string();
                prop_assert!(line.starts_with("<stdin>:"));
                prop_assert!(!line.contains('\n') && !line.contains('\r'));
            }
        }
    }

    /// Whatever the parser accepts is safe to paste into the nginx snippet and location.
    #[test]
    fn accepted_paths_and_scopes_carry_no_nginx_syntax(text in "endpoints:\n  - path: [ -~\t]{0,12}\n    scopes: \\[[ -~]{0,12}\\]\n") {
        if let Ok(file) = endpoints_file::parse(&text, "x") {
            for e in &file.endpoints {
                for s in std::iter::once(&e.path).chain(&e.scopes) {
                    prop_assert!(
                        !s.chars().any(|c| c.is_whitespace() || c.is_control() || ";\"'`{}$#\\%()*+?".contains(c)),
                        "{:?}", s
                    );
                }
            }
        }
    }
}
