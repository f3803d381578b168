//! The demo application: a Namespace, a Deployment, a Service, an HPA, two Ingresses managed
//! by kubectl-appupdate (`app=<app>`, `identifier=<id>`) and one it does not manage, created
//! through the store's create path like a client would create them.

use serde_json::{Value, json};

use crate::kinds::{
    self, INGRESS_NGINX_CLASS, INGRESS_NGINX_CONTROLLER, IS_DEFAULT_CLASS, IngressNginxWebhook,
};
use crate::model::status::{self, StatusBody};
use crate::store::{FieldValidation, Store, WriteCtx};

/// The field manager of objects the handle and the seed write.
pub const MANAGER: &str = "sandbox-control";

/// How the seed writes: like a client, as manager `sandbox-control`, but past the admission
/// webhooks (what it seeds stands for objects that existed before any was installed).
fn write_ctx() -> WriteCtx {
    WriteCtx {
        manager: MANAGER.into(),
        dry_run: false,
        field_validation: FieldValidation::Strict,
        inject_conflict: false,
        skip_webhooks: true,
    }
}

/// Create `body` (a `kind` served at `group`/`version`/`resource`) unless its name is taken.
fn create_if_missing(
    store: &Store,
    (group, version, resource): (&str, &str, &str),
    ns: &str,
    name: &str,
    body: Value,
) -> Result<(), StatusBody> {
    let k = kinds::lookup(group, version, resource)
        .ok_or_else(|| status::internal("the demo needs a kind the sandbox does not serve"))?;
    let mut st = store.write();
    if st.get_object(k, ns, name).is_some() {
        return Ok(());
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| status::bad_request(e.to_string()))?;
    st.create(k, ns, &bytes, &write_ctx()).map(|_| ())
}

/// Identifier label values as kubectl-appupdate computes them (SHA-256 of the sorted scopes,
/// first 16 hex digits): the public group and the `[user]` group.
const PUBLIC_ID: &str = "e3b0c44298fc1c14";
const USER_ID: &str = "04f8996da763b7a9";

fn snippet(app: &str, scopes: &[&str]) -> String {
    let mut s = String::new();
    if !scopes.is_empty() {
        s.push_str(&format!("set $scopes \"{}\";\n", scopes.join(" ")));
        s.push_str("auth_request /external-auth;\n");
        s.push_str("auth_request_set $user_id $upstream_http_user_id;\n");
        s.push_str("auth_request_set $user_scopes $upstream_http_user_scopes;\n");
        s.push_str("proxy_set_header User-Id $user_id;\n");
        s.push_str("proxy_set_header User-Scopes $user_scopes;\n");
    }
    s.push_str(&format!(
        "rewrite ^/{}/(.*)$ /$1 break;\n",
        app.replace('.', "\\.")
    ));
    s
}

fn ingress(
    app: &str,
    name: &str,
    labels: Value,
    annotations: Option<String>,
    paths: &[&str],
) -> Value {
    let mut meta = json!({"name": name, "labels": labels});
    if let Some(a) = annotations {
        meta["annotations"] = json!({"nginx.ingress.kubernetes.io/configuration-snippet": a});
    }
    let paths: Vec<Value> = paths
        .iter()
        .map(|p| json!({"path": format!("/{app}{p}"), "pathType": "Prefix", "backend": {"service": {"name": app, "port": {"number": 80}}}}))
        .collect();
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
        "spec": {"ingressClassName": "nginx", "rules": [{"http": {"paths": paths}}]}})
}

/// Seed the demo application `app` in `namespace` (created if needed); objects that exist
/// are left alone.
pub fn seed(store: &Store, namespace: &str, app: &str) -> Result<(), StatusBody> {
    create_if_missing(
        store,
        ("", "v1", "namespaces"),
        "",
        namespace,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )?;
    create_if_missing(
        store,
        ("apps", "v1", "deployments"),
        namespace,
        app,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/{app}:1.0"),
                        "ports": [{"name": "http", "containerPort": 8080}]}]}}}}),
    )?;
    create_if_missing(
        store,
        ("", "v1", "services"),
        namespace,
        app,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )?;
    create_if_missing(
        store,
        ("autoscaling", "v2", "horizontalpodautoscalers"),
        namespace,
        app,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": app, "labels": {"app": app}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": app}, "minReplicas": 2, "maxReplicas": 5,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
    )?;
    let ing = ("networking.k8s.io", "v1", "ingresses");
    let public = format!("{app}-{PUBLIC_ID}");
    create_if_missing(
        store,
        ing,
        namespace,
        &public,
        ingress(
            app,
            &public,
            json!({"app": app, "identifier": PUBLIC_ID}),
            Some(snippet(app, &[])),
            &["/health", "/unprotected"],
        ),
    )?;
    let user = format!("{app}-{USER_ID}");
    create_if_missing(
        store,
        ing,
        namespace,
        &user,
        ingress(
            app,
            &user,
            json!({"app": app, "identifier": USER_ID}),
            Some(snippet(app, &["user"])),
            &["/protected/user"],
        ),
    )?;
    let other = format!("{app}-unmanaged");
    create_if_missing(
        store,
        ing,
        namespace,
        &other,
        ingress(app, &other, json!({"app": app}), None, &["/legacy"]),
    )?;
    Ok(())
}

/// Create the IngressClass `name` of ingress-nginx (controller `k8s.io/ingress-nginx`),
/// annotated as the cluster's default when `default`, unless an IngressClass of that name
/// exists.
pub fn ingress_class(store: &Store, name: &str, default: bool) -> Result<(), StatusBody> {
    let mut meta = json!({"name": name});
    if default {
        meta["annotations"] = json!({IS_DEFAULT_CLASS: "true"});
    }
    create_if_missing(
        store,
        ("networking.k8s.io", "v1", "ingressclasses"),
        "",
        name,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": meta,
            "spec": {"controller": INGRESS_NGINX_CONTROLLER}}),
    )
}

/// Run (`Some`) or stop (`None`) the emulated ingress-nginx admission webhook. Running it is
/// installing ingress-nginx: its IngressClass `nginx` is created if missing (not as the
/// default), as the controller's chart does.
pub fn set_ingress_nginx_webhook(
    store: &Store,
    mode: Option<IngressNginxWebhook>,
) -> Result<(), StatusBody> {
    if mode.is_some() {
        ingress_class(store, INGRESS_NGINX_CLASS, false)?;
    }
    store.write().webhooks.ingress_nginx = mode;
    Ok(())
}
