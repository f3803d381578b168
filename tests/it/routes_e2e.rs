//! Route styles end to end against the sandbox: a first exposure in each style and a re-run
//! that changes nothing, the default IngressClass chosen and reported (and the refusal without
//! one), migrations (new routes before old ones go; in place between the nginx styles), a path
//! moving between groups as HTTPRoutes and as Ingresses (its old route written only after its
//! new one answered, as the request log shows), an unmanaged HTTPRoute left alone, ingress-nginx
//! refusing snippets, a cluster without the Gateway API, and `-o json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::{Fault, IngressNginxWebhook, SandboxOptions, Trigger};
use serde_json::{Value, json};

const PUBLIC: &str = "web-e3b0c44298fc1c14"; // scopes []
const USER: &str = "web-04f8996da763b7a9"; // scopes [user]

const ENDPOINTS: &str = "endpoints:
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

const AUTH_URL: &str = "http://oauth.auth.svc.cluster.local:8080/verify";
const GATEWAY: [&str; 6] = [
    "--routes",
    "gateway",
    "--gateway",
    "gateways/public",
    "--auth-service",
    "auth/oauth:8080",
];

fn httproutes_path() -> String {
    format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes")
}

fn httproutes(env: &Env) -> Vec<Value> {
    let mut v = env.sb.list(&httproutes_path());
    v.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    v
}

fn names(objs: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = objs
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

/// The sandbox's demo app without its managed Ingresses (the unmanaged one stays).
fn unexposed() -> Env {
    let env = Env::new();
    for name in [PUBLIC, USER] {
        env.sb.delete(&ingress_path(name)).unwrap();
    }
    env
}

fn run(env: &Env, text: &str, extra: &[&str]) -> std::process::Output {
    let file = env.write_file("endpoints.yaml", text);
    let mut args = vec!["web", "--endpoints", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// Runs again without any route flag: the style is read from what is live.
#[track_caller]
fn assert_rerun_changes_nothing(env: &Env, text: &str) {
    let before = env.writes().len();
    let o = run(env, text, &["--yes"]);
    assert_code(&o, 0);
    assert!(stdout(&o).contains("No changes."), "{}", stdout(&o));
    assert_eq!(env.writes().len(), before, "a re-run wrote");
}

/// The writes to routes, in order (the history record, a ConfigMap, is left out).
fn write_methods(env: &Env) -> Vec<String> {
    env.writes()
        .iter()
        .filter(|w| !w.path.contains("/configmaps"))
        .map(|w| format!("{} {}", w.method, w.path.split('?').next().unwrap()))
        .collect()
}

#[test]
fn a_first_exposure_in_nginx_auth_writes_no_snippet_and_a_rerun_changes_nothing() {
    let env = unexposed();
    let o = run(
        &env,
        ENDPOINTS,
        &[
            "--routes",
            "nginx-auth",
            "--auth-url",
            AUTH_URL,
            "--ingress-class",
            "nginx",
            "--yes",
        ],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 2 to create, 0 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    let user = env.sb.get(&ingress_path(USER)).unwrap();
    assert_eq!(
        user["metadata"]["annotations"],
        json!({
            "nginx.ingress.kubernetes.io/auth-response-headers": "User-Id,User-Scopes",
            "nginx.ingress.kubernetes.io/auth-url": format!("{AUTH_URL}?scopes=dXNlcg"),
            "nginx.ingress.kubernetes.io/rewrite-target": "/$1",
            "nginx.ingress.kubernetes.io/use-regex": "true",
        })
    );
    assert_eq!(user["spec"]["ingressClassName"], "nginx");
    assert_eq!(
        user["spec"]["rules"][0]["http"]["paths"][0],
        json!({"path": "/web/(protected/user(?:/.*)?)$", "pathType": "ImplementationSpecific",
               "backend": {"service": {"name": "web", "port": {"number": 80}}}})
    );
    assert_eq!(
        paths_of(&env.sb.get(&ingress_path(PUBLIC)).unwrap()),
        ["/web/(health(?:/.*)?)$", "/web/(unprotected(?:/.*)?)$"]
    );
    assert_rerun_changes_nothing(&env, ENDPOINTS);
}

#[test]
fn a_first_exposure_in_gateway_writes_httproutes_and_a_rerun_changes_nothing() {
    let env = unexposed();
    let mut args = GATEWAY.to_vec();
    args.extend(["--host", "shop.example.com", "--yes"]);
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 2 to create, 0 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    let routes = httproutes(&env);
    assert_eq!(names(&routes), [USER, PUBLIC]);
    let user = &routes[0];
    assert_eq!(
        user["metadata"]["labels"],
        json!({"app": "web", "identifier": "04f8996da763b7a9"})
    );
    assert_eq!(user["spec"]["hostnames"], json!(["shop.example.com"]));
    assert_eq!(user["spec"]["parentRefs"][0]["name"], "public");
    let rule = &user["spec"]["rules"][0];
    assert_eq!(
        rule["matches"][0]["path"],
        json!({"type": "PathPrefix", "value": "/web/protected/user"})
    );
    assert_eq!(rule["filters"][0]["type"], "ExternalAuth");
    assert_eq!(
        rule["filters"][0]["externalAuth"]["http"]["path"],
        "/scopes/dXNlcg"
    );
    assert_eq!(
        rule["filters"][1]["urlRewrite"]["path"],
        json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": "/protected/user"})
    );
    assert_eq!(rule["backendRefs"][0]["port"], 80);
    // The Ingresses other than the unmanaged one are untouched: there were none.
    assert_eq!(names(&env.ingresses()), ["web-unmanaged"]);
    assert_rerun_changes_nothing(&env, ENDPOINTS);
}

#[test]
fn a_first_exposure_without_a_class_takes_the_default_one_and_says_so() {
    let env = unexposed();
    env.sb.create_ingress_class("nginx", true).unwrap();
    let o = run(&env, ENDPOINTS, &["--yes"]);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("New Ingresses get the IngressClass nginx, the cluster's default (ingressclass.kubernetes.io/is-default-class): web has no managed Ingress to take a class from and --ingress-class was not given."),
        "{out}"
    );
    assert!(
        out.contains("Route style nginx-snippet, the default"),
        "{out}"
    );
    for name in [PUBLIC, USER] {
        assert_eq!(
            env.sb.get(&ingress_path(name)).unwrap()["spec"]["ingressClassName"],
            "nginx"
        );
    }
    // One more read, and only on the first exposure.
    let lists = |env: &Env| {
        env.sb
            .requests()
            .iter()
            .filter(|r| {
                r.path
                    .starts_with("/apis/networking.k8s.io/v1/ingressclasses")
            })
            .count()
    };
    assert_eq!(lists(&env), 1);
    assert_rerun_changes_nothing(&env, ENDPOINTS);
    assert_eq!(lists(&env), 1);
}

#[test]
fn a_first_exposure_without_a_class_or_a_default_is_refused() {
    let env = unexposed();
    env.sb.create_ingress_class("internal", false).unwrap();
    let o = run(&env, ENDPOINTS, &["--yes"]);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        "error: routes of web: no managed Ingress exists to take an IngressClass from and the cluster has no default IngressClass (IngressClasses: internal), so no controller would serve new Ingresses; choose one with --ingress-class NAME\n"
    );
    assert!(env.writes().is_empty());
}

#[test]
fn migrating_to_gateway_creates_the_httproutes_before_it_deletes_the_ingresses() {
    let env = Env::new();
    let mut args = GATEWAY.to_vec();
    args.push("--yes");
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("Plan: 2 to create, 0 to update, 2 to delete."),
        "{out}"
    );
    assert!(
        out.contains("Migrating the routes of web from nginx-snippet to gateway: the new HTTPRoutes are created before the old routes are deleted."),
        "{out}"
    );
    let collection = httproutes_path();
    let mut writes = write_methods(&env);
    assert_eq!(writes.len(), 4, "{writes:?}");
    let (creates, deletes) = writes.split_at_mut(2);
    deletes.sort();
    assert_eq!(
        creates,
        [format!("POST {collection}"), format!("POST {collection}")]
    );
    assert_eq!(
        deletes,
        [
            format!("DELETE {}", ingress_path(USER)),
            format!("DELETE {}", ingress_path(PUBLIC))
        ]
    );
    let writes = write_methods(&env);
    let last_post = writes.iter().rposition(|w| w.starts_with("POST")).unwrap();
    let first_delete = writes.iter().position(|w| w.starts_with("DELETE")).unwrap();
    assert!(last_post < first_delete, "{writes:?}");
    assert_eq!(names(&httproutes(&env)), [USER, PUBLIC]);
    assert_eq!(names(&env.ingresses()), ["web-unmanaged"]);
    assert_rerun_changes_nothing(&env, ENDPOINTS);
}

#[test]
fn migrating_between_the_nginx_styles_rewrites_each_ingress_in_place() {
    let env = Env::new();
    let o = run(
        &env,
        ENDPOINTS,
        &["--routes", "nginx-auth", "--auth-url", AUTH_URL, "--yes"],
    );
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 0 to create, 2 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    assert!(write_methods(&env).iter().all(|w| w.starts_with("PATCH")));
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    assert!(
        public["metadata"]["annotations"]
            .get("nginx.ingress.kubernetes.io/configuration-snippet")
            .is_none()
    );
    assert_eq!(
        public["metadata"]["annotations"]["nginx.ingress.kubernetes.io/rewrite-target"],
        "/$1"
    );
    assert_eq!(public["spec"]["ingressClassName"], "nginx");
    assert_rerun_changes_nothing(&env, ENDPOINTS);
    // And back.
    let o = run(&env, ENDPOINTS, &["--routes", "nginx-snippet", "--yes"]);
    assert_code(&o, 0);
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    assert_eq!(
        public["metadata"]["annotations"],
        json!({"nginx.ingress.kubernetes.io/configuration-snippet": "rewrite ^/web/(.*)$ /$1 break;\n"})
    );
    assert_eq!(paths_of(&public), ["/web/health", "/web/unprotected"]);
}

#[test]
fn a_path_moving_between_httproutes_is_added_before_it_is_removed() {
    let env = unexposed();
    let mut args = GATEWAY.to_vec();
    args.push("--yes");
    assert_code(&run(&env, ENDPOINTS, &args), 0);
    env.sb.clear_requests();
    let moved = "endpoints:
  - path: /health
  - path: /unprotected
    scopes: [user]
  - path: /protected/user
    scopes: [user]
";
    let o = run(&env, moved, &["--yes"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 0 to create, 2 to update, 0 to delete."),
        "{}",
        stdout(&o)
    );
    let route = |n: &str| format!("PATCH {}/{n}", httproutes_path());
    assert_eq!(write_methods(&env), [route(USER), route(PUBLIC)]);
    let routes = httproutes(&env);
    let prefixes = |o: &Value| -> Vec<String> {
        o["spec"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["matches"][0]["path"]["value"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(
        prefixes(&routes[0]),
        ["/web/protected/user", "/web/unprotected"]
    );
    assert_eq!(prefixes(&routes[1]), ["/web/health"]);
    assert_rerun_changes_nothing(&env, moved);
}

/// The request log as the order of the writes: a path leaves an Ingress only after the write
/// that serves it elsewhere was answered, and what depends on nothing goes in the first write
/// round. The serving write is held in flight by the sandbox, so the independent writes (the
/// Deployment, a new group's Ingress) are seen answered while it is still open — they did not
/// wait for it — and the dependent update cannot start before it is released.
#[test]
fn a_path_leaves_its_ingress_only_after_its_new_ingress_serves_it() {
    let env = Env::new();
    // /unprotected moves from the public group to [user]; [admin] is new.
    let moved = "endpoints:
  - path: /health
  - path: /unprotected
    scopes: [user]
  - path: /protected/user
    scopes: [user]
  - path: /orders
    scopes: [admin]
";
    let file = env.write_file("endpoints.yaml", moved);
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Hold {
            method: Some("PATCH".into()),
            path_prefix: ingress_path(USER),
            count: 1,
        }),
    });
    let run = common::running::Running::start(
        &env,
        &[
            "web",
            "--image",
            "registry.example.com/web:2.0",
            "--endpoints",
            file.to_str().unwrap(),
            "--yes",
        ],
    );
    let deployment = "/apis/apps/v1/namespaces/shop/deployments/web";
    let collection = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses";
    let answered = |method: &str, path: &str| {
        env.app_writes()
            .iter()
            .any(|w| w.method == method && w.path == path && w.status != 0)
    };
    common::running::wait_until("the first write round, but for the held write", || {
        env.sb.held() == 1 && answered("PATCH", deployment) && answered("POST", collection)
    });
    assert!(
        !env.app_writes()
            .iter()
            .any(|w| w.path == ingress_path(PUBLIC)),
        "the public Ingress was written while its path's new Ingress was not: {:?}",
        env.app_writes()
    );
    env.sb.release_held();
    let (code, out, err) = run.finish();
    assert_eq!(code, 0, "--- stdout\n{out}\n--- stderr\n{err}");
    assert!(
        out.contains(&format!("ingress.networking.k8s.io/{PUBLIC} updated")),
        "{out}"
    );

    let log = env.writes();
    let find = |method: &str, path: &str| {
        log.iter()
            .find(|w| w.method == method && w.path == path)
            .unwrap_or_else(|| panic!("no {method} {path} in {log:?}"))
    };
    let serving = find("PATCH", &ingress_path(USER));
    let leaving = find("PATCH", &ingress_path(PUBLIC));
    let answered_at = serving.started_ms + serving.duration_ms;
    assert!(
        leaving.started_ms >= answered_at,
        "the public Ingress's update arrived before the [user] Ingress's update was answered: {log:?}"
    );
    // The independent writes were answered before the held one was even processed.
    for w in [find("PATCH", deployment), find("POST", collection)] {
        assert!(w.started_ms + w.duration_ms <= answered_at, "{w:?}");
        assert!(w.seq < leaving.seq, "{w:?}");
    }
    // The history record goes out with the last write round, once the first has landed.
    let record = log
        .iter()
        .find(|w| w.path.contains("/configmaps"))
        .unwrap_or_else(|| panic!("no history record in {log:?}"));
    assert!(record.started_ms >= answered_at, "{log:?}");
    assert!(record.seq > serving.seq, "{log:?}");
    assert_eq!(
        paths_of(&env.sb.get(&ingress_path(PUBLIC)).unwrap()),
        ["/web/health"]
    );
    assert_eq!(
        paths_of(&env.sb.get(&ingress_path(USER)).unwrap()),
        ["/web/protected/user", "/web/unprotected"]
    );
}

#[test]
fn an_unmanaged_httproute_with_the_app_label_is_left_alone() {
    let env = unexposed();
    let unmanaged = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web-legacy", "labels": {"app": "web"}},
        "spec": {"parentRefs": [{"name": "public", "namespace": "gateways"}],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/web/legacy"}}],
                            "backendRefs": [{"name": "web", "port": 80}]}]}
    });
    env.sb.create(&httproutes_path(), unmanaged).unwrap();
    let before = env
        .sb
        .get(&format!("{}/web-legacy", httproutes_path()))
        .unwrap();
    let mut args = GATEWAY.to_vec();
    args.push("--yes");
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    assert!(!stdout(&o).contains("web-legacy"), "{}", stdout(&o));
    let empty = "endpoints: []\n";
    let o = run(&env, empty, &["--allow-empty-endpoints", "--yes"]);
    assert_code(&o, 0);
    assert!(
        stdout(&o).contains("Plan: 0 to create, 0 to update, 2 to delete."),
        "{}",
        stdout(&o)
    );
    assert_eq!(names(&httproutes(&env)), ["web-legacy"]);
    assert_eq!(
        env.sb
            .get(&format!("{}/web-legacy", httproutes_path()))
            .unwrap(),
        before
    );
}

#[test]
fn ingress_nginx_refusing_snippets_names_the_styles_without_them() {
    for webhook in [
        IngressNginxWebhook::SnippetsDisabled,
        IngressNginxWebhook::RiskyAnnotations,
    ] {
        let env = Env::with_options(SandboxOptions {
            ingress_nginx_webhook: Some(webhook),
            ..SandboxOptions::default()
        });
        let o = run(&env, "endpoints:\n  - path: /health\n", &["--yes"]);
        assert_code(&o, 1);
        let err = stderr(&o);
        assert!(
            err.contains(
                "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request"
            ),
            "{err}"
        );
        assert!(
            err.contains("this cluster's ingress-nginx refuses snippet annotations: publish the endpoints without them with --routes nginx-auth (auth-url and rewrite-target annotations) or --routes gateway (Gateway API HTTPRoutes)"),
            "{err}"
        );
        assert!(err.contains("Nothing was changed."), "{err}");
        assert!(env.writes().is_empty(), "{webhook:?}");
        // The way out works through the same webhook.
        let o = run(
            &env,
            ENDPOINTS,
            &["--routes", "nginx-auth", "--auth-url", AUTH_URL, "--yes"],
        );
        assert_code(&o, 0);
    }
}

#[test]
fn a_cluster_without_the_gateway_api_refuses_the_gateway_style_and_serves_the_others() {
    let env = Env::with_options(SandboxOptions {
        install_crds: false,
        ..SandboxOptions::default()
    });
    let mut args = GATEWAY.to_vec();
    args.push("--yes");
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 3);
    assert_eq!(
        stderr(&o),
        "error: routes of web: the cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes; install the Gateway API CRDs (experimental channel for ExternalAuth), or choose --routes nginx-auth\n"
    );
    assert!(env.writes().is_empty());
    assert_rerun_changes_nothing(&env, ENDPOINTS);
}

#[test]
fn the_json_plan_carries_the_route_kind_and_style() {
    let env = Env::new();
    let mut args = GATEWAY.to_vec();
    args.extend(["--dry-run", "-o", "json"]);
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/plan.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(
        doc["routes"],
        json!({
            "style": "gateway",
            "authProvider": "filter",
            "liveStyles": ["nginx-snippet"],
            "migration": true,
            "notes": [
                // The sandbox has no Gateway gateways/public (tests/it/external_auth_e2e.rs).
                "Could not verify that the Gateway supports the ExternalAuth filter (HTTPRouteExtAuth) the scoped routes use: the Gateway gateways/public does not exist; make sure its controller implements ExternalAuth.",
                "Migrating the routes of web from nginx-snippet to gateway: the new HTTPRoutes are created before the old routes are deleted."
            ]
        })
    );
    let kinds: Vec<(String, String, String)> = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_owned(),
                o["action"].as_str().unwrap().to_owned(),
                o["route"]["style"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let k = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(
        kinds,
        [
            k("HTTPRoute", "create", "gateway"),
            k("HTTPRoute", "create", "gateway"),
            k("Ingress", "delete", "nginx-snippet"),
            k("Ingress", "delete", "nginx-snippet"),
        ]
    );
    let create = &doc["objects"][0];
    assert_eq!(create["apiVersion"], "gateway.networking.k8s.io/v1");
    assert!(create.get("ingress").is_none());
    assert_eq!(
        doc["objects"][2]["ingress"]["pathsBefore"],
        json!(["/protected/user"])
    );
    assert_eq!(
        doc["summary"],
        json!({"create": 2, "update": 0, "delete": 2, "unchanged": 0})
    );
}

#[test]
fn a_saved_migration_applies_exactly_and_undo_brings_the_ingresses_back() {
    let env = Env::new();
    let plan_file = env.dir.path().join("migration.json");
    let mut args = GATEWAY.to_vec();
    args.extend(["--plan-out", plan_file.to_str().unwrap()]);
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 0);
    assert!(env.writes().is_empty(), "saving a plan writes nothing");
    let o = env.run(&["apply", plan_file.to_str().unwrap(), "--yes"]);
    assert_code(&o, 0);
    assert_eq!(names(&httproutes(&env)), [USER, PUBLIC]);
    assert_eq!(names(&env.ingresses()), ["web-unmanaged"]);

    let o = env.run(&["web", "--undo", "--yes"]);
    assert_code(&o, 0);
    assert!(httproutes(&env).is_empty(), "{}", stdout(&o));
    assert_eq!(names(&env.ingresses()), [USER, PUBLIC, "web-unmanaged"]);
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    assert_eq!(
        public["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"],
        "rewrite ^/web/(.*)$ /$1 break;\n"
    );
    assert_rerun_changes_nothing(&env, ENDPOINTS);
}

/// The demo app exposed as HTTPRoutes, with nothing recorded in the request log yet.
fn exposed_as_httproutes() -> Env {
    let env = unexposed();
    let mut args = GATEWAY.to_vec();
    args.push("--yes");
    assert_code(&run(&env, ENDPOINTS, &args), 0);
    env.sb.clear_requests();
    env
}

const WITH_CATALOG: &str = "endpoints:
  - path: /catalog
  - path: /health
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
";

#[test]
fn a_competing_writer_on_an_httproutes_other_fields_is_merged_through() {
    let env = exposed_as_httproutes();
    let public = format!("{}/{PUBLIC}", httproutes_path());
    env.sb.inject(Fault::CompetingWrite {
        object_path: public.clone(),
        after: Trigger::NextRealWrite,
        mutate: Box::new(|r| {
            r["metadata"]["labels"]["team"] = json!("payments");
            r["spec"]["rules"][0]["timeouts"] = json!({"request": "5s"});
        }),
    });
    let o = run(&env, WITH_CATALOG, &["--yes"]);
    assert_code(&o, 0);
    let live = env.sb.get(&public).unwrap();
    assert_eq!(live["metadata"]["labels"]["team"], "payments");
    let rules = live["spec"]["rules"].as_array().unwrap();
    let values: Vec<&str> = rules
        .iter()
        .map(|r| r["matches"][0]["path"]["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["/web/catalog", "/web/health", "/web/unprotected"]);
    // The other writer's field on a rule this run kept is still there.
    let health = rules
        .iter()
        .find(|r| r["matches"][0]["path"]["value"] == "/web/health");
    assert_eq!(
        health.unwrap()["timeouts"],
        json!({"request": "5s"}),
        "{live}"
    );
}

#[test]
fn a_competing_writer_on_an_httproutes_rules_trips_the_guard() {
    let env = exposed_as_httproutes();
    let public = format!("{}/{PUBLIC}", httproutes_path());
    env.sb.inject(Fault::CompetingWrite {
        object_path: public.clone(),
        after: Trigger::NextRealWrite,
        mutate: Box::new(|r| {
            r["spec"]["rules"][0]["backendRefs"][0]["port"] = json!(81);
        }),
    });
    let o = run(&env, WITH_CATALOG, &["--yes"]);
    assert_code(&o, 5);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "httproute.gateway.networking.k8s.io/{PUBLIC} NOT updated"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "httproute.gateway.networking.k8s.io/{PUBLIC} NOT updated: spec.rules[path=/web/health] is now different, and the plan left it as it was; nothing was written"
        )),
        "{err}"
    );
    let live = env.sb.get(&public).unwrap();
    assert_eq!(
        live["spec"]["rules"][0]["backendRefs"][0]["port"], 81,
        "left as the other writer left it"
    );
    assert_eq!(live["spec"]["rules"].as_array().unwrap().len(), 2);
}

#[test]
fn a_user_who_may_not_list_httproutes_still_plans_ingresses_and_is_told() {
    let env = Env::new();
    let o = run(
        &env,
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /catalog\n  - path: /protected/user\n    scopes: [user]\n",
        &["--dry-run", "--context", "sandbox-readonly"],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(
        out.contains("HTTPRoutes could not be listed (forbidden), so managed HTTPRoutes of web, if any, are left out of this plan."),
        "{out}"
    );
    assert!(
        out.contains("Plan: 0 to create, 1 to update, 0 to delete."),
        "{out}"
    );
    // The gateway style must see the live HTTPRoutes: the forbidden list is the run's failure.
    let mut args = GATEWAY.to_vec();
    args.extend(["--dry-run", "--context", "sandbox-readonly"]);
    let o = run(&env, ENDPOINTS, &args);
    assert_code(&o, 1);
    assert!(
        stderr(&o).starts_with("error: forbidden: you cannot list httproutes.gateway.networking.k8s.io in namespace \"shop\" (context \"sandbox-readonly\")"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
}

/// Two paths swapping scope groups: the public Ingress gives /unprotected to [user] and takes
/// /protected/user from it. With one write per Ingress no order keeps both served, so the plan
/// says so before anything is written, and the run still ends with every path served once.
#[test]
fn paths_swapping_scope_groups_are_named_in_the_plan_and_end_up_served() {
    let env = Env::new();
    let swapped = "endpoints:
  - path: /health
  - path: /unprotected
    scopes: [user]
  - path: /protected/user
";
    let o = run(&env, swapped, &["--dry-run"]);
    assert_code(&o, 0);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        all.contains(
            "The paths /protected/user, /unprotected move between scope groups in a cycle"
        ),
        "{all}"
    );
    assert!(env.writes().is_empty());

    let o = run(&env, swapped, &["--yes"]);
    assert_code(&o, 0);
    let public = env.sb.get(&ingress_path(PUBLIC)).unwrap();
    let user = env.sb.get(&ingress_path(USER)).unwrap();
    let paths = |ing: &serde_json::Value| -> Vec<String> {
        ing["spec"]["rules"][0]["http"]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(paths(&public), ["/web/health", "/web/protected/user"]);
    assert_eq!(paths(&user), ["/web/unprotected"]);
}
