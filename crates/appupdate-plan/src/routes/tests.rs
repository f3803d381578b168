//! Unit tests of the route planner: what every style shares, the nginx-snippet style (the
//! original format, byte for byte), and the nginx-auth and gateway styles.

use super::ingress::{
    DesiredIngress, IngressRemoval, IngressUpdater, desired_ingress, focused_view as ingress_view,
};
use super::nginx_snippet::{
    NginxSnippet, SNIPPET_ANNOTATION, configuration_snippet, snippet_scopes,
};
use super::refs::ServiceRef;
use super::*;
use crate::updaters::Updater;
use appupdate_model::endpoints_file::Endpoint;
use appupdate_model::names;
use appupdate_model::plan::{
    Action, Base, FieldChange, ObjectChange, PatchType, Recheck, RouteInfo, Write, recheck,
};
use appupdate_model::refs::ObjectRef;
use pretty_assertions::assert_eq;
use serde_json::json;

type Inherited = Attachment;

fn inherited_from(live: &[Value]) -> Attachment {
    Attachment::of_ingress_siblings(live)
}

fn ingress_name(app: &str, id: &str) -> Result<String, PlanError> {
    route_name(Kind::Ingress, app, id)
}

fn focused_view(obj: &Value, ns: &str, name: &str) -> Value {
    ingress_view(obj, ns, name, &[SNIPPET_ANNOTATION])
}

fn ctx(attachment: &Attachment) -> RouteContext {
    let mut c = RouteContext::new("web", BackendPort::Number(80));
    c.attachment = attachment.clone();
    c
}

/// The snippet-style updaters for already computed desired Ingresses.
fn plan_ingresses(_app: &str, d: Vec<DesiredIngress>, live: &[Value]) -> Vec<Updater> {
    let groups: Vec<ScopeGroup> = d
        .iter()
        .map(|x| ScopeGroup {
            scopes: x.scopes.clone(),
            identifier: x.identifier.clone(),
            paths: x.paths.clone(),
        })
        .collect();
    let m = match_live("web", Kind::Ingress, &groups, live);
    let mut out: Vec<Updater> = Vec::new();
    for (x, n) in d.into_iter().zip(m.groups) {
        out.push(Updater::Ingress(IngressUpdater {
            style: RouteStyle::NginxSnippet,
            name: n.unwrap_or_else(|| x.name.clone()),
            desired: x,
        }));
    }
    for n in m.extra {
        out.push(Updater::IngressRemoval(IngressRemoval::new("web", n)));
    }
    out
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

fn file(entries: &[(&str, &[&str])]) -> EndpointsFile {
    EndpointsFile {
        endpoints: entries
            .iter()
            .enumerate()
            .map(|(i, (p, sc))| Endpoint {
                path: (*p).to_owned(),
                scopes: s(sc),
                line: i + 2,
            })
            .collect(),
    }
}

fn desired(entries: &[(&str, &[&str])], inherited: &Inherited) -> Vec<DesiredIngress> {
    let c = ctx(inherited);
    scope_groups(&file(entries))
        .iter()
        .map(|g| desired_ingress(&NginxSnippet, &c, g).unwrap())
        .collect()
}

/// The change the single group of `entries` (no inherited settings) plans against `live`.
fn planned_against(entries: &[(&str, &[&str])], live: &Value) -> ObjectChange {
    let d = desired(entries, &Inherited::default());
    plan_ingresses("web", d, std::slice::from_ref(live))[0]
        .plan("shop", Some(live))
        .unwrap()
}

fn http_path(p: &str) -> Value {
    json!({"path": p, "pathType": "Prefix",
           "backend": {"service": {"name": "web", "port": {"number": 80}}}})
}

/// The fixture 30/31 annotation texts, byte for byte.
const FIXTURE_30_SNIPPET: &str = "rewrite ^/web/(.*)$ /$1 break;\n";
const FIXTURE_31_SNIPPET: &str = "set $scopes \"admin user\";\nauth_request /external-auth;\nauth_request_set $user_id $upstream_http_user_id;\nauth_request_set $user_scopes $upstream_http_user_scopes;\nproxy_set_header User-Id $user_id;\nproxy_set_header User-Scopes $user_scopes;\nrewrite ^/web/(.*)$ /$1 break;\n";

/// A live Ingress as the server stores it (fixture 31's response shape), with the given
/// identifier, snippet and paths, plus whatever `extra` merges in.
fn live(name: &str, identifier: &str, snippet: &str, paths: &[&str]) -> Value {
    json!({
        "kind": "Ingress",
        "apiVersion": "networking.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": format!("uid-{name}"),
            "resourceVersion": "203",
            "generation": 1,
            "creationTimestamp": "2026-11-30T11:48:26Z",
            "labels": {"app": "web", "identifier": identifier},
            "annotations": {SNIPPET_ANNOTATION: snippet},
            "managedFields": [{"manager": "curl", "operation": "Update"}]
        },
        "spec": {
            "ingressClassName": "nginx",
            "rules": [{"http": {"paths": paths.iter().map(|p| http_path(p)).collect::<Vec<_>>()}}]
        },
        "status": {"loadBalancer": {}}
    })
}

#[test]
fn identifier_fixed_vectors() {
    assert_eq!(scope_identifier(&[]), "e3b0c44298fc1c14");
    assert_eq!(scope_identifier(&s(&["user"])), "04f8996da763b7a9");
    assert_eq!(scope_identifier(&s(&["admin", "user"])), "4f515e078b8f8861");
    assert_eq!(scope_identifier(&s(&["user", "admin"])), "4f515e078b8f8861");
    assert_eq!(
        scope_identifier(&s(&["user", "admin", "user"])),
        "4f515e078b8f8861"
    );
    assert_eq!(
        scope_identifier(&s(&[
            "read",
            "write",
            "admin",
            "orders:write",
            "https://example.com/auth/x",
            "user",
            "api.read",
            "z-1"
        ])),
        "a33421533a5ed598"
    );
}

#[test]
fn identifiers_are_valid_label_values() {
    for scopes in [s(&[]), s(&["user"]), s(&["a", "b", "c"])] {
        let id = scope_identifier(&scopes);
        assert_eq!(id.len(), 16);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }
}

#[test]
fn names_are_app_dash_identifier_and_checked() {
    assert_eq!(
        ingress_name("web", "04f8996da763b7a9").unwrap(),
        "web-04f8996da763b7a9"
    );
    assert_eq!(
        ingress_name("shop.web", "04f8996da763b7a9").unwrap(),
        "shop.web-04f8996da763b7a9"
    );
    assert_eq!(
        ingress_name("Web_App", "04f8996da763b7a9")
            .unwrap_err()
            .to_string(),
        "ingress.networking.k8s.io/Web_App-04f8996da763b7a9: the Ingress name derived from the application name \"Web_App\" is not a valid DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters); the application name must be one too"
    );
    assert!(ingress_name(&"a".repeat(237), "04f8996da763b7a9").is_err());
    assert!(ingress_name(&"a".repeat(236), "04f8996da763b7a9").is_ok());
    assert!(!names::is_dns1123_subdomain("a..b"));
    assert!(!names::is_dns1123_subdomain("-a"));
}

#[test]
fn backend_port_rule() {
    let svc = |ports: Value| json!({"spec": {"ports": ports}});
    assert_eq!(
        backend_port(&svc(json!([{"port": 80, "targetPort": 8080}])), "web").unwrap(),
        BackendPort::Number(80)
    );
    assert_eq!(
        backend_port(
            &svc(json!([{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}])),
            "web"
        )
        .unwrap(),
        BackendPort::Number(8080)
    );
    assert_eq!(
        backend_port(
            &svc(json!([{"name": "grpc", "port": 9000}, {"name": "metrics", "port": 9090}])),
            "web"
        )
        .unwrap(),
        BackendPort::Number(9000)
    );
    assert_eq!(
        backend_port(&svc(json!([])), "web")
            .unwrap_err()
            .to_string(),
        "service/web: has no ports, so the routes have no port to send traffic to; add a port to the Service"
    );
    assert_eq!(
        backend_port(&json!({"spec": {}}), "web")
            .unwrap_err()
            .to_string(),
        "service/web: has no ports, so the routes have no port to send traffic to; add a port to the Service"
    );
    assert_eq!(
        backend_port(&svc(json!([{"port": "http"}])), "web")
            .unwrap_err()
            .to_string(),
        "service/web: has a port without a valid number (\"http\"); fix the Service"
    );
}

#[test]
fn snippets_match_the_fixtures_byte_for_byte() {
    assert_eq!(configuration_snippet("web", &[]), FIXTURE_30_SNIPPET);
    assert_eq!(
        configuration_snippet("web", &s(&["user", "admin", "user"])),
        FIXTURE_31_SNIPPET
    );
    assert_eq!(
        configuration_snippet("my.app", &[]),
        "rewrite ^/my\\.app/(.*)$ /$1 break;\n"
    );
    assert_eq!(snippet_scopes(FIXTURE_31_SNIPPET), s(&["admin", "user"]));
    assert_eq!(snippet_scopes(FIXTURE_30_SNIPPET), Vec::<String>::new());
}

#[test]
fn endpoints_are_grouped_by_scope_set() {
    let d = desired(
        &[
            ("/unprotected", &[]),
            ("/protected/user", &["user"]),
            ("/protected/admin", &["user", "admin"]),
            ("/health", &[]),
            ("/protected/ops", &["admin", "user", "user"]),
        ],
        &Inherited::default(),
    );
    let summary: Vec<(String, String, Vec<String>, Vec<String>)> = d
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                g.identifier.clone(),
                g.scopes.clone(),
                g.paths.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "web-04f8996da763b7a9".into(),
                "04f8996da763b7a9".into(),
                s(&["user"]),
                s(&["/protected/user"])
            ),
            (
                "web-4f515e078b8f8861".into(),
                "4f515e078b8f8861".into(),
                s(&["admin", "user"]),
                s(&["/protected/admin", "/protected/ops"])
            ),
            (
                "web-e3b0c44298fc1c14".into(),
                "e3b0c44298fc1c14".into(),
                s(&[]),
                s(&["/health", "/unprotected"])
            ),
        ]
    );
    assert_eq!(
        d[2].http_paths(&NginxSnippet),
        vec![http_path("/web/health"), http_path("/web/unprotected")]
    );
    assert_eq!(d[1].annotations[SNIPPET_ANNOTATION], FIXTURE_31_SNIPPET);
}

#[test]
fn an_empty_file_desires_nothing() {
    assert!(desired(&[], &Inherited::default()).is_empty());
}

#[test]
fn create_sends_the_whole_object() {
    let d = desired(
        &[("/protected/admin", &["admin", "user"])],
        &Inherited::default(),
    );
    let updaters = plan_ingresses("web", d, &[]);
    assert_eq!(updaters.len(), 1);
    let c = updaters[0].plan("shop", None).unwrap();
    assert_eq!(c.action(), Action::Create);
    assert_eq!(c.name, "web-4f515e078b8f8861");
    assert_eq!(c.live, None);
    let body = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "web-4f515e078b8f8861",
            "namespace": "shop",
            "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
            "annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}
        },
        "spec": {"rules": [{"http": {"paths": [http_path("/web/protected/admin")]}}]}
    });
    assert_eq!(
        c.write,
        Some(Write::Create {
            body: body.clone().into()
        })
    );
    assert_eq!(
        c.after.as_ref().map(|v| v.get().into_owned()),
        Some(focused_view(&body, "shop", "web-4f515e078b8f8861"))
    );
    assert_eq!(
        c.fields,
        vec![
            FieldChange::new("metadata.labels[app]", None, Some(json!("web"))),
            FieldChange::new(
                "metadata.labels[identifier]",
                None,
                Some(json!("4f515e078b8f8861"))
            ),
            FieldChange::new(
                "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]",
                None,
                Some(json!(FIXTURE_31_SNIPPET))
            ),
            FieldChange::new(
                "spec.rules[0].http.paths",
                None,
                Some(json!([http_path("/web/protected/admin")]))
            ),
        ]
    );
    assert_eq!(
        c.route,
        Some(RouteInfo {
            style: RouteStyle::NginxSnippet,
            identifier: "4f515e078b8f8861".into(),
            scopes: s(&["admin", "user"]),
            paths: s(&["/protected/admin"]),
            paths_before: Vec::new(),
            foreign: Vec::new(),
        })
    );
}

#[test]
fn new_ingresses_inherit_class_hosts_and_tls_from_the_first_sibling() {
    let mut a = live("web-b", "x1", FIXTURE_30_SNIPPET, &["/web/a"]);
    a["spec"] = json!({
        "ingressClassName": "internal",
        "rules": [{"host": "b.example.com", "http": {"paths": []}}]
    });
    let mut b = live("web-a", "x2", FIXTURE_30_SNIPPET, &["/web/b"]);
    b["spec"] = json!({
        "ingressClassName": "nginx",
        "rules": [
            {"host": "shop.example.com", "http": {"paths": []}},
            {"host": "www.example.com", "http": {"paths": []}},
            {"host": "shop.example.com", "http": {"paths": []}}
        ],
        "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
    });
    let mut unmanaged = live("aaa", "x3", "", &[]);
    unmanaged["metadata"]["labels"] = json!({"app": "web"});
    let inherited = inherited_from(&[a, b, unmanaged]);
    assert_eq!(
        inherited,
        Inherited {
            ingress_class: Some("nginx".into()),
            hosts: s(&["shop.example.com", "www.example.com"]),
            tls: Some(json!([{"hosts": ["shop.example.com"], "secretName": "shop-tls"}])),
            ..Inherited::default()
        }
    );
    assert_eq!(inherited_from(&[]), Inherited::default());

    let d = desired(&[("/x", &[])], &inherited);
    let c = IngressUpdater {
        style: RouteStyle::NginxSnippet,
        name: d[0].name.clone(),
        desired: d[0].clone(),
    }
    .plan("shop", None)
    .unwrap();
    let Some(Write::Create { body }) = c.write else {
        panic!("not a create")
    };
    assert_eq!(
        body["spec"],
        json!({
            "ingressClassName": "nginx",
            "rules": [
                {"host": "shop.example.com", "http": {"paths": [http_path("/web/x")]}},
                {"host": "www.example.com", "http": {"paths": [http_path("/web/x")]}}
            ],
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
        })
    );
    let paths: Vec<&str> = c.fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths[3..],
        [
            "spec.rules[host=shop.example.com].http.paths",
            "spec.rules[host=www.example.com].http.paths"
        ]
    );
}

#[test]
fn a_converged_ingress_is_unchanged_even_with_paths_in_another_order() {
    let d = desired(
        &[("/unprotected", &[]), ("/health", &[])],
        &Inherited::default(),
    );
    // Fixture 30 lists the paths in file order, not sorted.
    let l = live(
        "web-public",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/unprotected", "/web/health"],
    );
    let updaters = plan_ingresses("web", d, std::slice::from_ref(&l));
    assert_eq!(updaters.len(), 1);
    assert_eq!(updaters[0].name(), "web-public");
    let c = updaters[0].plan("shop", Some(&l)).unwrap();
    assert_eq!(c.action(), Action::Unchanged);
    assert!(c.fields.is_empty() && c.write.is_none());
    assert_eq!(c.after, c.before);
}

#[test]
fn a_changed_rule_keeps_its_fields_in_their_order_and_the_views_keep_theirs() {
    let mut l = live("web-admin", "4f515e078b8f8861", FIXTURE_31_SNIPPET, &[]);
    l["spec"] = json!({
        "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}],
        "rules": [
            {"futureRuleField": true, "http": {"paths": [http_path("/web/old")], "futureHttpField": 1},
             "host": "shop.example.com"},
            {"host": "www.example.com", "http": null},
            {"host": "api.example.com"}
        ],
        "ingressClassName": "nginx"
    });
    let c = planned_against(&[("/protected/admin", &["admin", "user"])], &l);
    let paths = serde_json::to_string(&json!([http_path("/web/protected/admin")])).unwrap();
    let Some(Write::Patch { body, .. }) = &c.write else {
        panic!("not a patch: {:?}", c.write)
    };
    // Serialised, so that the order of the keys is compared too: `paths` is replaced where it
    // was, a non-object `http` where it was, a missing one appended.
    assert_eq!(
        serde_json::to_string(body).unwrap(),
        format!(
            r#"{{"spec":{{"rules":[{{"futureRuleField":true,"http":{{"paths":{paths},"futureHttpField":1}},"host":"shop.example.com"}},{{"host":"www.example.com","http":{{"paths":{paths}}}}},{{"host":"api.example.com","http":{{"paths":{paths}}}}}]}}}}"#
        )
    );
    // Read together, the after-view is made from the before-view read once: the same views.
    let (before, after) = c.views();
    assert_eq!(before.as_deref(), Some(&*c.before.as_ref().unwrap().get()));
    assert_eq!(after.as_deref(), Some(&*c.after.as_ref().unwrap().get()));
    assert_ne!(before, after);
    // Both views are in the focused order whatever the live object's order.
    for view in [
        c.before.as_ref().unwrap().get(),
        c.after.as_ref().unwrap().get(),
    ] {
        let keys: Vec<&str> = view["spec"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["ingressClassName", "rules", "tls"]);
    }
    assert_eq!(
        serde_json::to_string(&c.after.as_ref().unwrap().get()["spec"]["rules"]).unwrap(),
        format!(
            r#"[{{"host":"shop.example.com","http":{{"paths":{paths}}}}},{{"host":"www.example.com","http":{{"paths":{paths}}}}},{{"host":"api.example.com","http":{{"paths":{paths}}}}}]"#
        )
    );
}

#[test]
fn update_patches_only_owned_parts_and_keeps_everything_else() {
    let mut l = live(
        "web-admin",
        "4f515e078b8f8861",
        FIXTURE_31_SNIPPET,
        &["/web/protected/admin"],
    );
    l["metadata"]["labels"]["team"] = json!("payments");
    l["metadata"]["annotations"]["cert-manager.io/cluster-issuer"] = json!("letsencrypt");
    l["spec"] = json!({
        "ingressClassName": "nginx",
        "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}},
        "futureField": {"x": 1},
        "rules": [
            {"host": "shop.example.com", "futureRuleField": true,
             "http": {"futureHttpField": 1, "paths": [http_path("/web/protected/admin")]}},
            {"host": "www.example.com",
             "http": {"paths": [http_path("/web/protected/admin"), http_path("/web/protected/ops")]}}
        ],
        "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
    });
    let d = desired(
        &[
            ("/protected/admin", &["admin", "user"]),
            ("/protected/ops", &["user", "admin"]),
        ],
        &Inherited::default(),
    );
    let updaters = plan_ingresses("web", d, std::slice::from_ref(&l));
    assert_eq!(updaters.len(), 1);
    let c = updaters[0].plan("shop", Some(&l)).unwrap();
    assert_eq!(c.action(), Action::Update);
    assert_eq!(c.name, "web-admin");
    assert_eq!(c.live.as_ref().unwrap().uid(), "uid-web-admin");
    let both = json!([
        http_path("/web/protected/admin"),
        http_path("/web/protected/ops")
    ]);
    // Only the first rule changes; the second already has both paths.
    assert_eq!(
        c.fields,
        vec![FieldChange::new(
            "spec.rules[host=shop.example.com].http.paths",
            Some(json!([http_path("/web/protected/admin")])),
            Some(both.clone())
        )]
    );
    assert_eq!(
        c.write,
        Some(Write::Patch {
            base: Base::new("203", "uid-web-admin").unwrap(),
            patch_type: PatchType::Merge,
            body: json!({"spec": {"rules": [
                {"host": "shop.example.com", "futureRuleField": true,
                 "http": {"futureHttpField": 1, "paths": both.clone()}},
                {"host": "www.example.com", "http": {"paths": both.clone()}}
            ]}})
            .into()
        })
    );
    assert_eq!(
        c.after.as_ref().unwrap().get()["spec"],
        json!({
            "ingressClassName": "nginx",
            "rules": [
                {"host": "shop.example.com", "http": {"paths": both.clone()}},
                {"host": "www.example.com", "http": {"paths": both}}
            ],
            "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
        })
    );
    // The view shows only the owned labels and annotation.
    assert_eq!(
        c.before.as_ref().unwrap().get()["metadata"],
        json!({
            "name": "web-admin",
            "namespace": "shop",
            "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
            "annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}
        })
    );
    assert_eq!(
        c.route.unwrap().paths,
        s(&["/protected/admin", "/protected/ops"])
    );
}

#[test]
fn update_rewrites_a_changed_snippet_as_a_merge_key() {
    let l = live(
        "web-admin",
        "4f515e078b8f8861",
        "rewrite ^/web/(.*)$ /$1 last;\n",
        &["/web/protected/admin"],
    );
    let c = planned_against(&[("/protected/admin", &["admin", "user"])], &l);
    assert_eq!(
        c.fields,
        vec![FieldChange::new(
            "metadata.annotations[nginx.ingress.kubernetes.io/configuration-snippet]",
            Some(json!("rewrite ^/web/(.*)$ /$1 last;\n")),
            Some(json!(FIXTURE_31_SNIPPET))
        )]
    );
    assert_eq!(
        c.write,
        Some(Write::Patch {
            base: Base::new("203", "uid-web-admin").unwrap(),
            patch_type: PatchType::Merge,
            body: json!({"metadata": {"annotations": {SNIPPET_ANNOTATION: FIXTURE_31_SNIPPET}}})
                .into()
        })
    );
}

#[test]
fn an_ingress_without_rules_gets_one_without_host() {
    let mut l = live("web-public", "e3b0c44298fc1c14", FIXTURE_30_SNIPPET, &[]);
    l["spec"] = json!({"ingressClassName": "nginx"});
    let c = planned_against(&[("/a", &[])], &l);
    assert_eq!(
        c.fields,
        vec![FieldChange::new(
            "spec.rules[0].http.paths",
            None,
            Some(json!([http_path("/web/a")]))
        )]
    );
    assert_eq!(
        c.write,
        Some(Write::Patch {
            base: Base::new("203", "uid-web-public").unwrap(),
            patch_type: PatchType::Merge,
            body: json!({"spec": {"rules": [{"http": {"paths": [http_path("/web/a")]}}]}}).into()
        })
    );
}

#[test]
fn removed_groups_are_deleted_and_unmanaged_ingresses_ignored() {
    let public = live(
        "web-public",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/a"],
    );
    let admin = live(
        "web-admin",
        "4f515e078b8f8861",
        FIXTURE_31_SNIPPET,
        &["/web/protected/admin", "/web/protected/ops"],
    );
    let mut other = live("other", "", "", &["/other"]);
    other["metadata"]["labels"] = json!({"app": "web"});
    let mut foreign = live("shop-x", "4f515e078b8f8861", "", &["/shop"]);
    foreign["metadata"]["labels"]["app"] = json!("shop");
    let all = [public.clone(), admin.clone(), other, foreign];
    let d = desired(&[("/a", &[])], &Inherited::default());
    let updaters = plan_ingresses("web", d, &all);
    let names: Vec<&str> = updaters.iter().map(|u| u.name()).collect();
    assert_eq!(names, ["web-public", "web-admin"]);

    let c = updaters[1].plan("shop", Some(&admin)).unwrap();
    assert_eq!(c.action(), Action::Delete);
    assert_eq!(
        c.write,
        Some(Write::Delete {
            base: Base::new("203", "uid-web-admin").unwrap()
        })
    );
    assert_eq!(c.after, None);
    let view = focused_view(&admin, "shop", "web-admin");
    assert_eq!(
        c.before.as_ref().map(|v| v.get().into_owned()),
        Some(view.clone())
    );
    assert_eq!(c.fields, vec![FieldChange::new(".", Some(view), None)]);
    assert_eq!(
        c.route,
        Some(RouteInfo {
            style: RouteStyle::NginxSnippet,
            identifier: "4f515e078b8f8861".into(),
            scopes: s(&["admin", "user"]),
            paths: Vec::new(),
            paths_before: s(&["/protected/admin", "/protected/ops"]),
            foreign: Vec::new(),
        })
    );
    let gone = updaters[1].plan("shop", None).unwrap();
    assert_eq!(gone.action(), Action::Unchanged);
    assert!(gone.write.is_none());
}

#[test]
fn several_live_ingresses_with_one_identifier_keep_one() {
    let a = live(
        "web-zzz",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/a"],
    );
    let b = live(
        "web-aaa",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/a"],
    );
    let c = live(
        "web-e3b0c44298fc1c14",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/a"],
    );
    let d = desired(&[("/a", &[])], &Inherited::default());
    // Each updater planned against the live object of its name: the one kept is already
    // converged, the others are deleted.
    let fates = |live: &[Value]| -> Vec<String> {
        plan_ingresses("web", d.clone(), live)
            .iter()
            .map(|u| {
                let obj = live.iter().find(|o| name_of(o) == Some(u.name()));
                let change = u.plan("shop", obj).unwrap();
                format!("{}:{}", u.name(), change.action())
            })
            .collect()
    };
    assert_eq!(
        fates(&[a.clone(), b.clone(), c]),
        [
            "web-e3b0c44298fc1c14:unchanged",
            "web-aaa:delete",
            "web-zzz:delete"
        ]
    );
    assert_eq!(fates(&[a, b]), ["web-aaa:unchanged", "web-zzz:delete"]);
}

#[test]
fn an_updater_refuses_an_object_that_is_not_this_groups_ingress() {
    let d = desired(&[("/a", &[])], &Inherited::default());
    let u = IngressUpdater {
        style: RouteStyle::NginxSnippet,
        name: d[0].name.clone(),
        desired: d[0].clone(),
    };
    let mut l = live(&d[0].name, "e3b0c44298fc1c14", "", &[]);
    l["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(
        u.plan("shop", Some(&l)).unwrap_err().to_string(),
        "ingress.networking.k8s.io/web-e3b0c44298fc1c14: exists but is not the managed Ingress of this scope group (it lacks the labels app=web and identifier=e3b0c44298fc1c14), so it is left alone; rename or remove it and run again"
    );
}

#[test]
fn the_guard_sees_competing_changes_to_owned_parts() {
    let l = live(
        "web-public",
        "e3b0c44298fc1c14",
        FIXTURE_30_SNIPPET,
        &["/web/a"],
    );
    let d = desired(&[("/a", &[]), ("/b", &[])], &Inherited::default());
    let u = &plan_ingresses("web", d, std::slice::from_ref(&l))[0];
    let approved = u.plan("shop", Some(&l)).unwrap();
    assert_eq!(approved.action(), Action::Update);

    // A foreign label changed: the same change proceeds.
    let mut relabelled = l.clone();
    relabelled["metadata"]["labels"]["team"] = json!("x");
    relabelled["metadata"]["resourceVersion"] = json!("300");
    assert!(matches!(
        recheck(&approved, u.plan("shop", Some(&relabelled)).unwrap()),
        Recheck::Proceed(_)
    ));
    // Someone else changed the paths: tripped.
    let mut moved = l.clone();
    moved["spec"]["rules"][0]["http"]["paths"] = json!([http_path("/web/c")]);
    assert!(matches!(
        recheck(&approved, u.plan("shop", Some(&moved)).unwrap()),
        Recheck::Tripped(_)
    ));
    // Someone already wrote the desired paths.
    let mut done = l.clone();
    done["spec"]["rules"][0]["http"]["paths"] = json!([http_path("/web/a"), http_path("/web/b")]);
    assert_eq!(
        recheck(&approved, u.plan("shop", Some(&done)).unwrap()),
        Recheck::AlreadyDone
    );

    // A delete trips when the owned view changed, proceeds when only foreign parts did.
    let r = IngressRemoval::new("web", "web-public");
    let approved = r.plan("shop", Some(&l)).unwrap();
    assert!(matches!(
        recheck(&approved, r.plan("shop", Some(&relabelled)).unwrap()),
        Recheck::Proceed(_)
    ));
    assert!(matches!(
        recheck(&approved, r.plan("shop", Some(&moved)).unwrap()),
        Recheck::Tripped(_)
    ));
}

// ---- every style, through plan_routes ----

mod styles {
    use super::super::refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef};
    use super::super::*;
    use appupdate_model::endpoints_file;
    use appupdate_model::plan::{Action, FieldChange, ObjectChange, RouteStyle, Write};
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};
    use std::sync::Arc;

    const FILE: &str = "endpoints:
  - path: /health
  - path: /protected/admin
    scopes: [user, admin]
";

    fn service() -> Value {
        json!({"spec": {"ports": [{"name": "http", "port": 80}]}})
    }

    fn class(name: &str, default: bool) -> Value {
        let mut c =
            json!({"metadata": {"name": name}, "spec": {"controller": "k8s.io/ingress-nginx"}});
        if default {
            c["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: "true"});
        }
        c
    }

    fn flags(style: Option<RouteStyle>) -> RouteFlags {
        RouteFlags {
            style,
            ..RouteFlags::default()
        }
    }

    fn auth_flags() -> RouteFlags {
        RouteFlags {
            style: Some(RouteStyle::NginxAuth),
            auth_url: Some(AuthUrl::parse("http://oauth.auth.svc:8080/verify").unwrap()),
            ingress_class: Some("nginx".into()),
            ..RouteFlags::default()
        }
    }

    fn gateway_flags() -> RouteFlags {
        RouteFlags {
            style: Some(RouteStyle::Gateway),
            gateway: Some(ObjectRef::parse("gateways/public").unwrap()),
            auth_service: Some(ServiceRef::parse("auth/oauth:8080").unwrap()),
            ..RouteFlags::default()
        }
    }

    struct Live {
        ingresses: Vec<Value>,
        httproutes: Listing,
        policies: Listing,
        classes: Option<Vec<Value>>,
    }

    impl Live {
        fn empty() -> Live {
            Live {
                ingresses: Vec::new(),
                httproutes: Listing::Items(Vec::new()),
                policies: Listing::NotServed,
                classes: Some(vec![class("nginx", true)]),
            }
        }
    }

    fn run(
        text: &str,
        flags: &RouteFlags,
        live: &Live,
    ) -> Result<(Vec<ObjectChange>, RoutesPlan), PlanError> {
        let file = endpoints_file::parse(text, "e.yaml").unwrap();
        let svc = service();
        let routes = LiveRoutes {
            service: &svc,
            ingresses: &live.ingresses,
            httproutes: &live.httproutes,
            security_policies: &live.policies,
            ingress_classes: live.classes.as_deref(),
            gateway_support: None,
        };
        let planned = plan_routes("web", &file, flags, &routes)?;
        let changes = planned
            .updaters
            .iter()
            .map(|(u, obj)| u.plan("shop", obj.and_then(|at| routes.get(at))).unwrap())
            .collect();
        Ok((changes, planned.summary))
    }

    fn err(text: &str, flags: &RouteFlags, live: &Live) -> String {
        run(text, flags, live).unwrap_err().to_string()
    }

    /// The objects a first exposure creates, as the server would store them.
    fn created(text: &str, flags: &RouteFlags) -> Vec<Value> {
        let (changes, _) = run(text, flags, &Live::empty()).unwrap();
        changes
            .into_iter()
            .map(|c| {
                let Some(Write::Create { body }) = c.write else {
                    panic!("not a create: {c:?}")
                };
                let mut body = Arc::unwrap_or_clone(body);
                let name = body["metadata"]["name"].as_str().unwrap().to_owned();
                body["metadata"]["uid"] = json!(format!("uid-{name}"));
                body["metadata"]["resourceVersion"] = json!("7");
                body
            })
            .collect()
    }

    #[test]
    fn the_scope_token_is_base64url_of_the_sorted_scopes() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            scope_token(&s(&["user", "admin", "user"])),
            "YWRtaW4gdXNlcg"
        );
        assert_eq!(scope_token(&s(&["user"])), "dXNlcg");
        let odd = s(&["..", "https://example.com/auth/x", "orders:write", "."]);
        let token = scope_token(&odd);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{token}"
        );
        assert_eq!(scopes_of_token(&token), Some(normalize_scopes(&odd)));
        assert_eq!(scopes_of_token("not base64!"), None);
    }

    #[test]
    fn nginx_auth_ingresses_carry_only_high_risk_or_lower_annotations() {
        let bodies = created(FILE, &auth_flags());
        assert_eq!(
            bodies[0]["metadata"]["annotations"],
            json!({
                "nginx.ingress.kubernetes.io/auth-response-headers": "User-Id,User-Scopes",
                "nginx.ingress.kubernetes.io/auth-url": "http://oauth.auth.svc:8080/verify?scopes=YWRtaW4gdXNlcg",
                "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
                "nginx.ingress.kubernetes.io/use-regex": "true",
            })
        );
        assert_eq!(
            bodies[0]["spec"],
            json!({
                "ingressClassName": "nginx",
                "rules": [{"http": {"paths": [{
                    "path": "/web/(protected/admin(?:/.*)?)$",
                    "pathType": "ImplementationSpecific",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}
                }]}}]
            })
        );
        // The public group needs no auth service.
        assert_eq!(
            bodies[1]["metadata"]["annotations"],
            json!({
                "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
                "nginx.ingress.kubernetes.io/use-regex": "true",
            })
        );
        for b in &bodies {
            assert!(!b.to_string().contains("snippet"), "{b}");
        }
    }

    #[test]
    fn an_update_removes_every_ingress_nginx_annotation_its_style_does_not_write() {
        const AUTH_SNIPPET: &str = "nginx.ingress.kubernetes.io/auth-snippet";
        const BODY_SIZE: &str = "nginx.ingress.kubernetes.io/proxy-body-size";
        const SNIPPET: &str = "nginx.ingress.kubernetes.io/configuration-snippet";
        let mut live = Live::empty();
        live.ingresses = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        let taken = &mut live.ingresses[0]["metadata"]["annotations"];
        taken[AUTH_SNIPPET] = json!("return 200;");
        taken[BODY_SIZE] = json!("8m");
        taken["example.com/owner"] = json!("ops");
        let snippet = taken[SNIPPET].clone();
        let (changes, _) = run(FILE, &flags(None), &live).unwrap();
        let c = &changes[0];
        assert_eq!(c.action(), Action::Update);
        let removed = [
            format!("metadata.annotations[{AUTH_SNIPPET}]"),
            format!("metadata.annotations[{BODY_SIZE}]"),
        ];
        assert_eq!(
            c.fields,
            vec![
                FieldChange::new(&removed[0], Some(json!("return 200;")), None),
                FieldChange::new(&removed[1], Some(json!("8m")), None),
            ]
        );
        // A merge patch that removes them; another owner's annotation is kept.
        let Some(Write::Patch { body, .. }) = &c.write else {
            panic!("{c:?}")
        };
        assert_eq!(
            **body,
            json!({"metadata": {"annotations": {AUTH_SNIPPET: null, BODY_SIZE: null}}})
        );
        assert_eq!(c.route.as_ref().unwrap().foreign, removed);
        // Shown: in the before-view, gone from the after-view.
        let (before, after) = c.views();
        assert_eq!(
            before.unwrap()["metadata"]["annotations"],
            json!({AUTH_SNIPPET: "return 200;", SNIPPET: snippet, BODY_SIZE: "8m"})
        );
        assert_eq!(
            after.unwrap()["metadata"]["annotations"],
            json!({SNIPPET: snippet})
        );
        // The route that carries nothing else is left alone.
        assert_eq!(changes[1].action(), Action::Unchanged);
        assert!(changes[1].route.as_ref().unwrap().foreign.is_empty());

        // Rewritten into nginx-auth, the snippet goes as the old style's own annotation: not
        // one the route carried besides its style.
        let (changes, _) = run(FILE, &auth_flags(), &live).unwrap();
        let c = &changes[0];
        assert!(
            c.fields
                .iter()
                .any(|f| f.path == format!("metadata.annotations[{SNIPPET}]") && f.after.is_none()),
            "{:?}",
            c.fields
        );
        assert_eq!(c.route.as_ref().unwrap().foreign, removed);
        assert!(changes[1].route.as_ref().unwrap().foreign.is_empty());
    }

    #[test]
    fn an_update_removes_every_httproute_filter_its_style_does_not_write() {
        let mut live = Live::empty();
        let mut routes = created(FILE, &gateway_flags());
        // The scoped route: a mirror of every request; the public one: a header set on its
        // backend, and its rewrite given a host of someone else's.
        routes[0]["spec"]["rules"][0]["filters"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "RequestMirror",
                         "requestMirror": {"backendRef": {"name": "sniffer", "port": 80}}}));
        let public = &mut routes[1]["spec"]["rules"][0];
        public["backendRefs"][0]["filters"] = json!([{"type": "RequestHeaderModifier",
            "requestHeaderModifier": {"set": [{"name": "User-Scopes", "value": "admin"}]}}]);
        public["filters"][0]["urlRewrite"]["hostname"] = json!("evil.example.com");
        let wanted_public = created(FILE, &gateway_flags())[1]["spec"]["rules"][0].clone();
        let wanted_scoped = created(FILE, &gateway_flags())[0]["spec"]["rules"][0].clone();
        live.httproutes = Listing::Items(routes);
        let (changes, _) = run(FILE, &gateway_flags(), &live).unwrap();
        let scoped = &changes[0];
        assert_eq!(
            scoped.route.as_ref().unwrap().foreign,
            ["spec.rules[path=/web/protected/admin].filters[RequestMirror]"]
        );
        let Some(Write::Patch { body, .. }) = &scoped.write else {
            panic!("{scoped:?}")
        };
        assert_eq!(body["spec"]["rules"][0], wanted_scoped);
        let public = &changes[1];
        // A filter the style writes, changed: replaced, as any owned value.
        assert_eq!(
            public.route.as_ref().unwrap().foreign,
            ["spec.rules[path=/web/health].backendRefs[0].filters[RequestHeaderModifier]"]
        );
        let Some(Write::Patch { body, .. }) = &public.write else {
            panic!("{public:?}")
        };
        assert_eq!(body["spec"]["rules"][0], wanted_public);
        // Converged, nothing is foreign and nothing changes.
        live.httproutes = Listing::Items(created(FILE, &gateway_flags()));
        let (changes, _) = run(FILE, &gateway_flags(), &live).unwrap();
        assert!(changes.iter().all(|c| c.action() == Action::Unchanged));
    }

    #[test]
    fn gateway_routes_have_one_rule_per_path_with_rewrite_and_external_auth() {
        let bodies = created(FILE, &gateway_flags());
        assert_eq!(
            bodies[0],
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {
                    "name": "web-4f515e078b8f8861",
                    "namespace": "shop",
                    "labels": {"app": "web", "identifier": "4f515e078b8f8861"},
                    "uid": "uid-web-4f515e078b8f8861",
                    "resourceVersion": "7"
                },
                "spec": {
                    "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "gateways"}],
                    "rules": [{
                        "matches": [{"path": {"type": "PathPrefix", "value": "/web/protected/admin"}}],
                        "filters": [
                            {"type": "ExternalAuth", "externalAuth": {
                                "protocol": "HTTP",
                                "backendRef": {"group": "", "kind": "Service", "name": "oauth", "namespace": "auth", "port": 8080},
                                "http": {"path": "/scopes/YWRtaW4gdXNlcg", "allowedResponseHeaders": ["User-Id", "User-Scopes"]}
                            }},
                            {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/protected/admin"}}}
                        ],
                        "backendRefs": [{"group": "", "kind": "Service", "name": "web", "port": 80, "weight": 1}]
                    }]
                }
            })
        );
        let public = &bodies[1]["spec"]["rules"][0]["filters"];
        assert_eq!(public.as_array().unwrap().len(), 1, "{public}");
        // The root endpoint matches the app's prefix and is rewritten to "/".
        let root = created("endpoints:\n  - path: /\n", &gateway_flags());
        assert_eq!(
            root[0]["spec"]["rules"][0]["matches"][0]["path"]["value"],
            "/web"
        );
        assert_eq!(
            root[0]["spec"]["rules"][0]["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"],
            "/"
        );
    }

    #[test]
    fn a_style_that_needs_an_auth_service_or_a_gateway_says_which_flag() {
        let mut f = auth_flags();
        f.auth_url = None;
        assert_eq!(
            err(FILE, &f, &Live::empty()),
            "routes of web: the paths with scopes (admin user: /protected/admin) need an auth service, and no managed nginx-auth Ingress has one to take; give its URL with --auth-url URL"
        );
        let mut f = gateway_flags();
        f.auth_service = None;
        assert_eq!(
            err(FILE, &f, &Live::empty()),
            "routes of web: the paths with scopes (admin user: /protected/admin) need an auth service, and no managed HTTPRoute has one to take; name it with --auth-service [NAMESPACE/]NAME:PORT"
        );
        // Public paths alone need none.
        assert!(run("endpoints:\n  - path: /a\n", &f, &Live::empty()).is_ok());
        f.gateway = None;
        assert_eq!(
            err("endpoints:\n  - path: /a\n", &f, &Live::empty()),
            "routes of web: no managed HTTPRoute exists to take a Gateway from; name the Gateway the HTTPRoutes attach to with --gateway [NAMESPACE/]NAME"
        );
    }

    #[test]
    fn an_httproute_holds_at_most_sixteen_paths_per_scope_group() {
        let mut text = String::from("endpoints:\n");
        for i in 0..17 {
            text.push_str(&format!("  - path: /p{i}\n"));
        }
        assert_eq!(
            err(&text, &gateway_flags(), &Live::empty()),
            "routes of web: the scope group public has 17 paths, and an HTTPRoute holds at most 16 (one rule per path); publish fewer paths with these scopes, e.g. one prefix for several"
        );
        assert!(run(&text, &auth_flags(), &Live::empty()).is_ok());
    }

    #[test]
    fn the_default_ingress_class_is_read_only_without_a_sibling_and_reported() {
        let file = endpoints_file::parse(FILE, "e.yaml").unwrap();
        let none = Listing::Items(Vec::new());
        assert!(needs_ingress_classes(
            "web",
            &file,
            &flags(None),
            &[],
            &none
        ));
        assert!(!needs_ingress_classes(
            "web",
            &file,
            &auth_flags(),
            &[],
            &none
        ));
        assert!(!needs_ingress_classes(
            "web",
            &file,
            &gateway_flags(),
            &[],
            &none
        ));
        let sibling = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        assert!(!needs_ingress_classes(
            "web",
            &file,
            &flags(None),
            &sibling,
            &none
        ));

        let (changes, summary) = run(FILE, &flags(None), &Live::empty()).unwrap();
        assert_eq!(
            summary.notes,
            vec![
                "Route style nginx-snippet, the default: web has no managed routes yet (choose another with --routes).".to_owned(),
                "New Ingresses get the IngressClass nginx, the cluster's default (ingressclass.kubernetes.io/is-default-class): web has no managed Ingress to take a class from and --ingress-class was not given.".to_owned(),
            ]
        );
        for c in &changes {
            assert_eq!(
                c.after.as_ref().unwrap().get()["spec"]["ingressClassName"],
                "nginx"
            );
        }

        let mut live = Live::empty();
        live.classes = Some(vec![class("internal", false), class("public", false)]);
        assert_eq!(
            err(FILE, &flags(None), &live),
            "routes of web: no managed Ingress exists to take an IngressClass from and the cluster has no default IngressClass (IngressClasses: internal, public), so no controller would serve new Ingresses; choose one with --ingress-class NAME"
        );
        live.classes = Some(vec![class("a", true), class("b", true)]);
        assert_eq!(
            err(FILE, &flags(None), &live),
            "routes of web: no managed Ingress exists to take an IngressClass from and 2 IngressClasses are marked default (a, b); choose one with --ingress-class NAME"
        );
    }

    #[test]
    fn the_style_is_read_from_what_is_live() {
        for f in [
            flags(Some(RouteStyle::NginxSnippet)),
            auth_flags(),
            gateway_flags(),
        ] {
            let style = f.style.unwrap();
            let bodies = created(FILE, &f);
            let mut live = Live::empty();
            if style == RouteStyle::Gateway {
                live.httproutes = Listing::Items(bodies);
            } else {
                live.ingresses = bodies;
            }
            let (changes, summary) = run(FILE, &RouteFlags::default(), &live).unwrap();
            assert_eq!(summary.style, style);
            assert_eq!(summary.live_styles, vec![style]);
            assert!(summary.notes.is_empty(), "{:?}", summary.notes);
            assert!(
                changes.iter().all(|c| c.action() == Action::Unchanged),
                "{changes:?}"
            );
        }
    }

    #[test]
    fn routes_in_two_styles_need_an_explicit_choice() {
        let mut live = Live::empty();
        live.ingresses = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        live.httproutes = Listing::Items(created(FILE, &gateway_flags()));
        assert_eq!(
            err(FILE, &RouteFlags::default(), &live),
            "routes of web: the managed routes are in several styles (nginx-snippet: web-4f515e078b8f8861, web-e3b0c44298fc1c14; gateway: web-4f515e078b8f8861, web-e3b0c44298fc1c14); choose the style to keep with --routes nginx-snippet|nginx-auth|gateway"
        );
        let (changes, summary) = run(FILE, &gateway_flags(), &live).unwrap();
        assert!(summary.is_migration());
        let actions: Vec<(Kind, Action)> = changes.iter().map(|c| (c.kind, c.action())).collect();
        assert_eq!(
            actions,
            vec![
                (Kind::Ingress, Action::Delete),
                (Kind::Ingress, Action::Delete),
                (Kind::HttpRoute, Action::Unchanged),
                (Kind::HttpRoute, Action::Unchanged),
            ]
        );
    }

    #[test]
    fn a_flag_of_another_style_than_the_live_one_is_refused() {
        let mut live = Live::empty();
        live.ingresses = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        let f = RouteFlags {
            gateway: Some(ObjectRef::parse("public").unwrap()),
            ..RouteFlags::default()
        };
        assert_eq!(
            err(FILE, &f, &live),
            "routes of web: --gateway applies to the gateway route style, but the style is nginx-snippet (read from the live routes); drop --gateway, or change the style with --routes"
        );
    }

    #[test]
    fn a_cluster_without_the_gateway_api_has_no_httproutes_unless_they_are_wanted() {
        let mut live = Live::empty();
        live.httproutes = Listing::NotServed;
        assert!(run(FILE, &auth_flags(), &live).is_ok());
        assert_eq!(
            err(FILE, &gateway_flags(), &live),
            "routes of web: the cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes; install the Gateway API CRDs (experimental channel for ExternalAuth), or choose --routes nginx-auth"
        );
        live.httproutes = Listing::Forbidden;
        assert_eq!(
            err(FILE, &gateway_flags(), &live),
            "routes of web: listing HTTPRoutes is forbidden, and the gateway style must see the live ones; ask for list permission on httproutes.gateway.networking.k8s.io"
        );
        let (_, summary) = run(FILE, &auth_flags(), &live).unwrap();
        assert_eq!(
            summary.notes,
            vec!["HTTPRoutes could not be listed (forbidden), so managed HTTPRoutes of web, if any, are left out of this plan.".to_owned()]
        );
    }

    #[test]
    fn nginx_snippet_to_nginx_auth_rewrites_each_ingress_in_place() {
        let mut live = Live::empty();
        live.ingresses = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        let (changes, summary) = run(FILE, &auth_flags(), &live).unwrap();
        assert_eq!(
            summary.notes,
            vec!["Migrating the routes of web from nginx-snippet to nginx-auth: each Ingress is rewritten in place, one write each.".to_owned()]
        );
        assert!(changes.iter().all(|c| c.action() == Action::Update));
        let Some(Write::Patch { body, .. }) = &changes[0].write else {
            panic!()
        };
        assert_eq!(
            body["metadata"]["annotations"],
            json!({
                "nginx.ingress.kubernetes.io/auth-response-headers": "User-Id,User-Scopes",
                "nginx.ingress.kubernetes.io/auth-url": "http://oauth.auth.svc:8080/verify?scopes=YWRtaW4gdXNlcg",
                "nginx.ingress.kubernetes.io/configuration-snippet": null,
                "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
                "nginx.ingress.kubernetes.io/use-regex": "true",
            })
        );
        assert_eq!(
            body["spec"]["rules"][0]["http"]["paths"][0]["path"],
            "/web/(protected/admin(?:/.*)?)$"
        );
        // Same paths, so no route waits for another: every rewrite is in the first round.
        let order = appupdate_model::plan::write_order(&changes);
        assert!(order.rounds.iter().all(|r| *r == Some(0)), "{order:?}");
        let route = changes[0].route.as_ref().unwrap();
        assert_eq!(route.paths, route.paths_before);
        assert_eq!(route.style, RouteStyle::NginxAuth);
    }

    #[test]
    fn the_auth_service_and_gateway_are_inherited_from_live_routes() {
        let mut live = Live::empty();
        live.ingresses = created(FILE, &auth_flags());
        let (changes, _) = run(FILE, &flags(None), &live).unwrap();
        assert!(changes.iter().all(|c| c.action() == Action::Unchanged));
        let more = "endpoints:\n  - path: /x\n    scopes: [ops]\n";
        let (changes, _) = run(more, &flags(None), &live).unwrap();
        let create = changes
            .iter()
            .find(|c| c.action() == Action::Create)
            .unwrap();
        assert_eq!(
            create.after.as_ref().unwrap().get()["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-url"],
            "http://oauth.auth.svc:8080/verify?scopes=b3Bz"
        );

        let mut live = Live::empty();
        live.httproutes = Listing::Items(created(FILE, &gateway_flags()));
        let (changes, _) = run(more, &flags(None), &live).unwrap();
        let create = changes
            .iter()
            .find(|c| c.action() == Action::Create)
            .unwrap();
        let Some(Write::Create { body }) = &create.write else {
            panic!()
        };
        assert_eq!(body["spec"]["parentRefs"][0]["name"], "public");
        assert_eq!(
            body["spec"]["rules"][0]["filters"][0]["externalAuth"]["backendRef"]["name"],
            "oauth"
        );
    }

    #[test]
    fn explicit_attachment_flags_apply_to_the_live_routes_too() {
        let mut live = Live::empty();
        live.ingresses = created(FILE, &flags(Some(RouteStyle::NginxSnippet)));
        let f = RouteFlags {
            ingress_class: Some("internal".into()),
            hosts: vec!["shop.example.com".into()],
            tls_secret: Some("shop-tls".into()),
            ..RouteFlags::default()
        };
        let (changes, _) = run(FILE, &f, &live).unwrap();
        let paths: Vec<&str> = changes[0].fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.ingressClassName",
                "spec.rules[].host",
                "spec.rules[host=shop.example.com].http.paths",
                "spec.tls"
            ]
        );
        let Some(Write::Patch { body, .. }) = &changes[0].write else {
            panic!()
        };
        assert_eq!(body["spec"]["ingressClassName"], "internal");
        assert_eq!(body["spec"]["rules"][0]["host"], "shop.example.com");
        assert_eq!(
            body["spec"]["tls"],
            json!([{"hosts": ["shop.example.com"], "secretName": "shop-tls"}])
        );

        let mut live = Live::empty();
        live.httproutes = Listing::Items(created(FILE, &gateway_flags()));
        let f = RouteFlags {
            gateway: Some(ObjectRef::parse("gateways/internal").unwrap()),
            hosts: vec!["shop.example.com".into()],
            ..RouteFlags::default()
        };
        let (changes, _) = run(FILE, &f, &live).unwrap();
        let paths: Vec<&str> = changes[0].fields.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["spec.parentRefs", "spec.hostnames"]);
    }

    #[test]
    fn a_refused_snippet_names_the_styles_without_one() {
        let webhook = "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request: nginx.ingress.kubernetes.io/configuration-snippet annotation cannot be used. Snippet directives are disabled by the Ingress administrator";
        assert!(
            refusal_hint(RouteStyle::NginxSnippet, webhook)
                .unwrap()
                .contains("--routes nginx-auth (auth-url and rewrite-target annotations) or --routes gateway")
        );
        let risky = "annotation group ConfigurationSnippet contains risky annotation based on ingress configuration";
        assert!(refusal_hint(RouteStyle::NginxSnippet, risky).is_some());
        assert!(
            refusal_hint(
                RouteStyle::NginxAuth,
                "annotation nginx.ingress.kubernetes.io/auth-url is too risky for environment"
            )
            .unwrap()
            .contains("--routes gateway")
        );
        assert_eq!(refusal_hint(RouteStyle::Gateway, webhook), None);
        assert_eq!(
            refusal_hint(RouteStyle::NginxSnippet, "quota exceeded"),
            None
        );
    }

    #[test]
    fn the_guard_sees_competing_changes_to_an_httproutes_owned_parts() {
        use appupdate_model::plan::{Recheck, recheck};
        let mut live = Live::empty();
        live.httproutes = Listing::Items(created(FILE, &gateway_flags()));
        let more = "endpoints:
  - path: /health
  - path: /metrics
  - path: /protected/admin
    scopes: [user, admin]
";
        let file = endpoints_file::parse(more, "e.yaml").unwrap();
        let svc = service();
        let routes = LiveRoutes {
            service: &svc,
            ingresses: &[],
            httproutes: &live.httproutes,
            security_policies: &live.policies,
            ingress_classes: None,
            gateway_support: None,
        };
        let planned = plan_routes("web", &file, &RouteFlags::default(), &routes).unwrap();
        let (u, obj) = planned
            .updaters
            .iter()
            .find(|(u, _)| u.name() == "web-e3b0c44298fc1c14")
            .unwrap();
        let public = obj.and_then(|at| routes.get(at)).unwrap().clone();
        let approved = u.plan("shop", Some(&public)).unwrap();
        assert_eq!(approved.action(), Action::Update);
        assert_eq!(
            approved
                .fields
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["spec.rules[path=/web/metrics]"]
        );
        // A foreign label and a rule's own extra field: the same change proceeds, and the
        // extra field is kept in the write.
        let mut relabelled = public.clone();
        relabelled["metadata"]["labels"]["team"] = json!("x");
        relabelled["spec"]["rules"][0]["timeouts"] = json!({"request": "5s"});
        let fresh = u.plan("shop", Some(&relabelled)).unwrap();
        let Some(Write::Patch { body, .. }) = &fresh.write else {
            panic!()
        };
        assert_eq!(
            body["spec"]["rules"][0]["timeouts"],
            json!({"request": "5s"})
        );
        assert!(matches!(recheck(&approved, fresh), Recheck::Proceed(_)));
        // Someone else added the rule: nothing left to do.
        let Some(Write::Patch { body, .. }) = &approved.write else {
            panic!()
        };
        let mut done = public.clone();
        done["spec"]["rules"] = body["spec"]["rules"].clone();
        assert_eq!(
            recheck(&approved, u.plan("shop", Some(&done)).unwrap()),
            Recheck::AlreadyDone
        );
        // Someone changed the rule of a path this run writes: tripped.
        let mut moved = done.clone();
        moved["spec"]["rules"][1]["backendRefs"][0]["port"] = json!(81);
        assert!(matches!(
            recheck(&approved, u.plan("shop", Some(&moved)).unwrap()),
            Recheck::Tripped(_)
        ));
    }
}

#[test]
fn paths_are_the_same_entries_in_any_order_and_as_many_times() {
    use super::ingress::{same_entries_by, same_value};
    let same_entries = |l: &[Value], d: &[Value]| same_entries_by(l, d, same_value);
    let (a, b, c) = (
        json!({"path": "/a"}),
        json!({"path": "/b"}),
        json!({"path": "/c"}),
    );
    assert!(same_entries(
        &[a.clone(), b.clone()],
        &[a.clone(), b.clone()]
    ));
    assert!(same_entries(
        &[b.clone(), a.clone()],
        &[a.clone(), b.clone()]
    ));
    assert!(same_entries(&[], &[]));
    assert!(!same_entries(
        &[a.clone(), a.clone()],
        &[a.clone(), b.clone()]
    ));
    assert!(!same_entries(
        &[a.clone(), b.clone()],
        &[a.clone(), c.clone()]
    ));
    assert!(!same_entries(
        std::slice::from_ref(&a),
        &[a.clone(), a.clone()]
    ));
}

/// A JSON value of small objects (keys from a few, so that two values often share keys, in any
/// order), arrays, strings and numbers.
fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        (0..3i64).prop_map(Value::from),
        prop::sample::select(vec!["a", "b", "/web/x"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec!["path", "pathType", "backend", "port"]),
                    inner
                ),
                0..4
            )
            .prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                )
            }),
        ]
    })
}

/// `value` with the keys of every object in reverse order: equal, in another order.
fn reordered(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reordered(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reordered).collect()),
        other => other.clone(),
    }
}

/// `value` with the first key of every object renamed (`path` ↔ `port`, else to `path`) where
/// the object has no key of the new name: a different value with the same shape.
fn renamed(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let first = m.keys().next().cloned();
            let to = |k: &str| if k == "path" { "port" } else { "path" };
            Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let key = match &first {
                            Some(f) if f == k && !m.contains_key(to(k)) => to(k).to_owned(),
                            _ => k.clone(),
                        };
                        (key, renamed(v))
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(renamed).collect()),
        other => other.clone(),
    }
}

proptest::proptest! {
    /// The ordered comparison of paths decides exactly as serde_json's equality, whatever the
    /// order of the keys.
    #[test]
    fn same_value_is_json_equality(a in json_value(), b in json_value()) {
        use super::ingress::same_value;
        proptest::prop_assert_eq!(same_value(&a, &b), a == b);
        proptest::prop_assert!(same_value(&a, &reordered(&a)));
        proptest::prop_assert_eq!(same_value(&reordered(&a), &b), a == b);
        // An `http.paths` entry is recognised without being built.
        use super::ingress::{http_path_entry, is_http_path_entry};
        let entry = http_path_entry("/web/a".into(), "Prefix", &b);
        proptest::prop_assert!(is_http_path_entry(&reordered(&entry), "/web/a", "Prefix", &b));
        proptest::prop_assert_eq!(
            is_http_path_entry(&a, "/web/a", "Prefix", &b),
            a == entry
        );
        let mut other = entry.clone();
        other["pathType"] = json!("Exact");
        proptest::prop_assert!(!is_http_path_entry(&other, "/web/a", "Prefix", &b));
        other["pathType"] = json!("Prefix");
        other["path"] = json!("/web/b");
        proptest::prop_assert!(!is_http_path_entry(&other, "/web/a", "Prefix", &b));
        other["path"] = json!("/web/a");
        other["extra"] = json!(1);
        proptest::prop_assert!(!is_http_path_entry(&other, "/web/a", "Prefix", &b));
        let mut fewer = entry.clone();
        fewer.as_object_mut().map(|m| m.shift_remove("backend"));
        proptest::prop_assert!(!is_http_path_entry(&fewer, "/web/a", "Prefix", &b));
        let backend_differs = http_path_entry("/web/a".into(), "Prefix", &a);
        proptest::prop_assert_eq!(
            is_http_path_entry(&backend_differs, "/web/a", "Prefix", &b),
            a == b
        );
        let other = renamed(&a);
        proptest::prop_assert_eq!(same_value(&a, &other), a == other);
    }
}

#[test]
fn same_value_compares_keys_and_values_in_any_order() {
    use super::ingress::same_value;
    assert!(!same_value(&json!({"path": "a"}), &json!({"port": "a"})));
    assert!(same_value(
        &json!({"a": 1, "b": {"c": 2, "d": 3}}),
        &json!({"b": {"d": 3, "c": 2}, "a": 1})
    ));
    assert!(!same_value(
        &json!({"a": 1, "b": 2}),
        &json!({"b": 2, "a": 3})
    ));
    assert!(!same_value(&json!([1, 2]), &json!([2, 1])));
}

#[test]
fn an_attachment_records_only_what_a_flag_can_say() {
    let a = Attachment {
        ingress_class: Some("nginx".into()),
        hosts: vec!["a.example.com".into()],
        tls: Some(json!([{"hosts": ["a.example.com"], "secretName": "tls"}])),
        parent_refs: Some(json!([ObjectRef::parse("gw-ns/gw").unwrap().parent_ref()])),
        auth_url: None,
        auth_service: Some(ServiceRef::parse("auth/authz:8080").unwrap()),
        auth_provider: None,
    };
    let r = a.record();
    assert_eq!(r.tls_secret.as_deref(), Some("tls"));
    assert_eq!(r.gateway.as_deref(), Some("gw-ns/gw"));
    assert_eq!(r.auth_service.as_deref(), Some("auth/authz:8080"));
    let odd = Attachment {
        tls: Some(json!([{"secretName": "a"}, {"secretName": "b"}])),
        parent_refs: Some(json!([{"name": "gw", "sectionName": "https"}])),
        ..Attachment::default()
    };
    let r = odd.record();
    assert_eq!((r.tls_secret, r.gateway), (None, None));
}
