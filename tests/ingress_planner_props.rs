//! Property tests of the endpoints → Ingress planner, through the public API.
//!
//! The cluster is modelled as a `Vec<Value>` of Ingresses: creates add the body with the fields
//! a server sets, merge patches follow RFC 7386, deletes remove by name. The caller's part is
//! played as the real command does it: list the managed Ingresses (`app=web,identifier`), plan,
//! then hand each updater the live object of its name.
// Helpers outside `#[test]` functions are not covered by `allow-unwrap-in-tests`; here a
// failed unwrap is a failed test, which is what we want.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use kubectl_appupdate::endpoints_file::{self, EndpointsFile};
use kubectl_appupdate::ingress_planner::{
    APP_LABEL, BackendPort, DesiredIngress, IDENTIFIER_LABEL, Inherited, SNIPPET_ANNOTATION,
    desired_ingresses, inherited_from, normalize_scopes, plan_ingresses,
};
use kubectl_appupdate::plan::{Action, ObjectChange, PatchType, Write};
use proptest::prelude::*;
use serde_json::{Value, json};

const APP: &str = "web";
const NS: &str = "shop";
const PORT: BackendPort = BackendPort::Number(8080);

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

fn desired(spec: &Spec, inherited: &Inherited) -> Vec<DesiredIngress> {
    desired_ingresses(APP, &parse(spec), &PORT, inherited).unwrap()
}

/// The managed Ingresses, as `kubectl get ingress -l app=web,identifier` would list them.
fn managed(cluster: &[Value]) -> Vec<Value> {
    let mut v: Vec<Value> = cluster
        .iter()
        .filter(|o| {
            o["metadata"]["labels"][APP_LABEL] == json!(APP)
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

/// Stores a created object the way the API server does.
fn server_create(cluster: &mut Vec<Value>, mut body: Value, rv: &mut u64) {
    *rv += 1;
    let name = body["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(
        !cluster.iter().any(|o| o["metadata"]["name"] == json!(name)),
        "create of an existing name {name}"
    );
    let meta = &mut body["metadata"];
    meta["uid"] = json!(format!("uid-{name}-{rv}"));
    meta["resourceVersion"] = json!(rv.to_string());
    meta["generation"] = json!(1);
    meta["creationTimestamp"] = json!("2026-11-30T11:48:26Z");
    meta["managedFields"] = json!([{"manager": "kubectl-appupdate", "operation": "Update"}]);
    body["status"] = json!({"loadBalancer": {}});
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

/// Plans `spec` against the cluster: (changes, in updater order).
fn plan(cluster: &[Value], spec: &Spec) -> Vec<ObjectChange> {
    let live = managed(cluster);
    let d = desired(spec, &inherited_from(&live));
    plan_ingresses(APP, d, &live)
        .iter()
        .map(|u| {
            let obj = live
                .iter()
                .find(|o| o["metadata"]["name"].as_str() == Some(u.name()));
            u.plan(NS, obj).unwrap()
        })
        .collect()
}

/// Applies planned changes to the model in the apply order: creates, updates, deletes.
fn apply(cluster: &mut Vec<Value>, changes: &[ObjectChange], rv: &mut u64) {
    let mut ordered: Vec<&ObjectChange> = changes.iter().filter(|c| c.is_change()).collect();
    ordered.sort_by_key(|c| c.action().phase(c.kind));
    for c in ordered {
        let pos = cluster
            .iter()
            .position(|o| o["metadata"]["name"].as_str() == Some(c.name.as_str()));
        match (c.write.as_ref().unwrap(), pos) {
            (Write::Create { body }, None) => server_create(cluster, body.clone(), rv),
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
}

/// A cluster converged on `spec`, with decorations a real cluster would have: a host and TLS on
/// the first managed Ingress, a foreign label and annotation on every managed one, an
/// unmanaged `app=web` Ingress and another app's Ingress.
fn decorated_cluster(spec: &Spec, host: bool) -> (Vec<Value>, u64) {
    let mut cluster = vec![
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "other", "namespace": NS, "uid": "u-other",
                         "resourceVersion": "1", "labels": {"app": "web"}},
            "spec": {"rules": [{"http": {"paths": [{"path": "/other", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
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
    let inherited = if host {
        Inherited {
            ingress_class_name: Some("nginx".into()),
            hosts: vec!["shop.example.com".into()],
            tls: Some(json!([{"hosts": ["shop.example.com"], "secretName": "shop-tls"}])),
        }
    } else {
        Inherited::default()
    };
    for d in desired(spec, &inherited) {
        let mut body = d.create_body(NS);
        body["metadata"]["labels"]["team"] = json!("payments");
        body["metadata"]["annotations"]["example.com/owner"] = json!("alice");
        body["spec"]["rules"][0]["futureRuleField"] = json!(true);
        server_create(&mut cluster, body, &mut rv);
    }
    (cluster, rv)
}

fn without_server_fields(cluster: &[Value], name: &str) -> Value {
    let mut o = cluster
        .iter()
        .find(|o| o["metadata"]["name"] == json!(name))
        .cloned()
        .unwrap();
    if let Some(m) = o["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    o
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
    /// Every endpoint is served by exactly one path of exactly one desired Ingress, and that
    /// Ingress is the one of its scope set; no Ingress has a path nobody asked for.
    #[test]
    fn every_endpoint_lands_in_exactly_one_ingress_path(spec in endpoints()) {
        let d = desired(&spec, &Inherited::default());
        for (path, scopes) in &spec {
            let full = format!("/{APP}{path}");
            let hits: Vec<&DesiredIngress> = d
                .iter()
                .filter(|g| g.http_paths.iter().any(|p| p["path"] == json!(full)))
                .collect();
            prop_assert_eq!(hits.len(), 1, "{} served by {} ingresses", full, hits.len());
            prop_assert_eq!(&hits[0].scopes, &normalize_scopes(scopes));
            let count = hits[0].http_paths.iter().filter(|p| p["path"] == json!(full)).count();
            prop_assert_eq!(count, 1);
        }
        let total: usize = d.iter().map(|g| g.http_paths.len()).sum();
        prop_assert_eq!(total, spec.len());
        let ids: BTreeSet<&str> = d.iter().map(|g| g.identifier.as_str()).collect();
        prop_assert_eq!(ids.len(), d.len());
    }

    /// Reordering the endpoints, or the scopes of an endpoint, changes neither the desired
    /// Ingresses nor the plan against the same cluster.
    #[test]
    fn shuffled_input_plans_the_same(
        (spec, other, start) in endpoints().prop_flat_map(|s| {
            (Just(s.clone()), shuffled(s), endpoints())
        })
    ) {
        prop_assert_eq!(
            desired(&spec, &Inherited::default()),
            desired(&other, &Inherited::default())
        );
        let (cluster, _) = decorated_cluster(&start, true);
        prop_assert_eq!(plan(&cluster, &spec), plan(&cluster, &other));
    }

    /// A cluster that already holds the desired Ingresses, as a server stores them, plans no
    /// change — also with paths stored in another order, with hosts, TLS and foreign fields.
    #[test]
    fn a_converged_state_plans_nothing(spec in endpoints(), host in any::<bool>(), reverse in any::<bool>()) {
        let (mut cluster, _) = decorated_cluster(&spec, host);
        if reverse {
            for o in &mut cluster {
                if let Some(paths) = o["spec"]["rules"][0]["http"]["paths"].as_array_mut() {
                    paths.reverse();
                }
            }
        }
        for c in plan(&cluster, &spec) {
            prop_assert_eq!(c.action(), Action::Unchanged, "{:?}", c);
            prop_assert!(c.fields.is_empty() && c.write.is_none());
        }
    }

    /// Applying the plan to the model yields exactly the desired set of managed Ingresses,
    /// leaves unmanaged ones and foreign fields alone, and then plans nothing.
    #[test]
    fn applying_a_plan_yields_the_desired_set(
        before in endpoints(),
        after in endpoints(),
        host in any::<bool>(),
    ) {
        let (mut cluster, mut rv) = decorated_cluster(&before, host);
        let other_before = without_server_fields(&cluster, "other");
        let shop_before = without_server_fields(&cluster, "shop-x");
        let inherited = inherited_from(&managed(&cluster));

        let changes = plan(&cluster, &after);
        apply(&mut cluster, &changes, &mut rv);

        let want = desired(&after, &inherited);
        let have = managed(&cluster);
        prop_assert_eq!(have.len(), want.len());
        for d in &want {
            let found: Vec<&Value> = have
                .iter()
                .filter(|o| o["metadata"]["labels"][IDENTIFIER_LABEL] == json!(d.identifier))
                .collect();
            prop_assert_eq!(found.len(), 1);
            let o = found[0];
            prop_assert_eq!(&o["metadata"]["labels"][APP_LABEL], &json!(APP));
            prop_assert_eq!(&o["metadata"]["annotations"][SNIPPET_ANNOTATION], &json!(d.snippet));
            let rules = o["spec"]["rules"].as_array().unwrap();
            prop_assert!(!rules.is_empty());
            for rule in rules {
                let mut paths: Vec<String> = rule["http"]["paths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                let mut wanted: Vec<String> = d.http_paths.iter().map(|p| p.to_string()).collect();
                paths.sort();
                wanted.sort();
                prop_assert_eq!(paths, wanted);
                if !inherited.hosts.is_empty() {
                    prop_assert_eq!(&rule["host"], &json!("shop.example.com"));
                }
            }
            // Inherited when there was a sibling; preserved when it was updated.
            if !inherited.hosts.is_empty() {
                prop_assert_eq!(&o["spec"]["ingressClassName"], &json!("nginx"));
                prop_assert_eq!(&o["spec"]["tls"][0]["secretName"], &json!("shop-tls"));
            }
        }
        // Foreign fields on Ingresses that were updated survive.
        for o in &have {
            if o["metadata"]["labels"].get("team").is_some() {
                prop_assert_eq!(&o["metadata"]["annotations"]["example.com/owner"], &json!("alice"));
                prop_assert_eq!(&o["spec"]["rules"][0]["futureRuleField"], &json!(true));
            }
        }
        prop_assert_eq!(without_server_fields(&cluster, "other"), other_before);
        prop_assert_eq!(without_server_fields(&cluster, "shop-x"), shop_before);

        for c in plan(&cluster, &after) {
            prop_assert_eq!(c.action(), Action::Unchanged, "{:?}", c);
        }
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
