//! Admission as the sandbox emulates it: DefaultIngressClass (built into the API server) and
//! ingress-nginx's validating webhook (a sandbox option), through HTTP like a client sees them.
#![allow(clippy::unwrap_used)]

mod common;

use common::{admin, request, send_json};
use sandbox_apiserver::{IngressNginxWebhook, Sandbox, SandboxOptions};
use serde_json::{Value, json};

const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/demo/ingresses";

fn ingress(name: &str, class: Option<&str>, snippet: bool) -> Value {
    let mut obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name},
        "spec": {"rules": [{"http": {"paths": [{"path": "/web", "pathType": "Prefix",
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}});
    if let Some(c) = class {
        obj["spec"]["ingressClassName"] = json!(c);
    }
    if snippet {
        obj["metadata"]["annotations"] = json!({"nginx.ingress.kubernetes.io/configuration-snippet": "rewrite ^/web/(.*)$ /$1 break;\n"});
    }
    obj
}

fn sandbox(webhook: Option<IngressNginxWebhook>) -> Sandbox {
    let sb = Sandbox::start(SandboxOptions {
        ingress_nginx_webhook: webhook,
        ..Default::default()
    })
    .unwrap();
    sb.seed_demo_app("demo", "web").unwrap();
    sb
}

/// POST an Ingress to `demo` (`?dryRun=All` when `dry_run`).
fn create(sb: &Sandbox, obj: &Value, dry_run: bool) -> common::Resp {
    let path = if dry_run {
        format!("{INGRESSES}?dryRun=All")
    } else {
        INGRESSES.to_string()
    };
    send_json(sb, "POST", &path, "application/json", obj)
}

const SNIPPETS_DISABLED: &str = "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request: nginx.ingress.kubernetes.io/configuration-snippet annotation cannot be used. Snippet directives are disabled by the Ingress administrator";

#[test]
fn the_ingress_nginx_webhook_refuses_snippets_on_create_and_update_dry_runs_included() {
    let sb = sandbox(Some(IngressNginxWebhook::SnippetsDisabled));
    assert!(
        sb.get("/apis/networking.k8s.io/v1/ingressclasses/nginx")
            .is_some(),
        "running the webhook is having ingress-nginx installed, its IngressClass included"
    );
    for path in [INGRESSES.to_string(), format!("{INGRESSES}?dryRun=All")] {
        let r = send_json(
            &sb,
            "POST",
            &path,
            "application/json",
            &ingress("snippet", Some("nginx"), true),
        );
        assert_eq!(r.status, 400, "{}", r.text());
        let status = r.json();
        assert_eq!(
            status,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": SNIPPETS_DISABLED, "reason": "BadRequest", "code": 400})
        );
    }
    assert!(
        sb.get(&format!("{INGRESSES}/snippet")).is_none(),
        "nothing was stored"
    );

    // The demo's snippet Ingresses existed before the webhook: updating one is refused too.
    let path = format!("{INGRESSES}/web-e3b0c44298fc1c14");
    let r = send_json(
        &sb,
        "PATCH",
        &path,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"touched": "yes"}}}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], json!(SNIPPETS_DISABLED));
    assert!(
        sb.get(&path).unwrap()["metadata"]["labels"]
            .get("touched")
            .is_none()
    );

    // Without snippets, or for an Ingress ingress-nginx does not handle, nothing is refused.
    let r = create(&sb, &ingress("plain", Some("nginx"), false), false);
    assert_eq!(r.status, 201, "{}", r.text());
    let r = create(&sb, &ingress("other", Some("traefik"), true), false);
    assert_eq!(r.status, 201, "{}", r.text());
    // Deleting is not checked.
    let r = request(&sb, Some(&admin(&sb)), "DELETE", &path, &[], None);
    assert_eq!(r.status, 200);
}

#[test]
fn with_snippets_allowed_the_webhook_refuses_them_by_risk_level() {
    let sb = sandbox(Some(IngressNginxWebhook::RiskyAnnotations));
    let r = create(&sb, &ingress("snippet", Some("nginx"), true), false);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        json!(
            "admission webhook \"validate.nginx.ingress.kubernetes.io\" denied the request: annotation group ConfigurationSnippet contains risky annotation based on ingress configuration"
        )
    );
}

#[test]
fn validation_comes_before_the_webhook() {
    let sb = sandbox(Some(IngressNginxWebhook::SnippetsDisabled));
    let mut bad = ingress("Bad_Name", Some("nginx"), true);
    bad["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("web");
    let r = create(&sb, &bad, false);
    assert_eq!(r.status, 422, "{}", r.text());
}

#[test]
fn the_control_surface_turns_the_webhook_on_and_off() {
    let sb = sandbox(None);
    let r = create(&sb, &ingress("first", Some("nginx"), true), false);
    assert_eq!(r.status, 201, "no webhook, no IngressClass needed");
    let r = send_json(
        &sb,
        "PUT",
        "/sandbox/admission",
        "application/json",
        &json!({"ingressNginxWebhook": "snippets-disabled"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        common::get(&sb, "/sandbox/admission").json(),
        json!({"ingressNginxWebhook": "snippets-disabled"})
    );
    let r = create(&sb, &ingress("second", Some("nginx"), true), false);
    assert_eq!(r.status, 400);
    let r = send_json(
        &sb,
        "PUT",
        "/sandbox/admission",
        "application/json",
        &json!({"ingressNginxWebhook": "sometimes"}),
    );
    assert_eq!(r.status, 400);
    sb.set_ingress_nginx_webhook(None).unwrap();
    let r = create(&sb, &ingress("third", Some("nginx"), true), false);
    assert_eq!(r.status, 201);
}

#[test]
fn a_new_ingress_without_a_class_gets_the_default_ingress_class() {
    let sb = sandbox(None);
    let r = create(&sb, &ingress("none", None, false), false);
    assert_eq!(
        r.json()["spec"].get("ingressClassName"),
        None,
        "no default class yet"
    );
    sb.create_ingress_class("public", true).unwrap();
    let r = create(&sb, &ingress("defaulted", None, false), true);
    assert_eq!(r.status, 201);
    let created = r.json();
    assert_eq!(created["spec"]["ingressClassName"], json!("public"));
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"],
        json!({"f:rules": {}}),
        "admission sets the class after the field manager has run"
    );
    let r = create(&sb, &ingress("named", Some("internal"), false), true);
    assert_eq!(r.json()["spec"]["ingressClassName"], json!("internal"));
}

#[test]
fn custom_resources_answer_404_when_their_crds_are_not_installed() {
    let sb = Sandbox::start(SandboxOptions {
        install_crds: false,
        ..Default::default()
    })
    .unwrap();
    let r = common::get(
        &sb,
        "/apis/gateway.networking.k8s.io/v1/namespaces/demo/httproutes",
    );
    assert_eq!((r.status, r.text().as_str()), (404, "404 page not found\n"));
    let r = common::get(&sb, "/apis/networking.k8s.io/v1/ingressclasses");
    assert_eq!(r.status, 200, "IngressClasses are built in");
}
