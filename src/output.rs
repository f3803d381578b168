//! The plan as data (`-o json` / `-o yaml`) for automation.
//!
//! Same place in the pipeline as [`crate::diff_render`]: the plan is computed, then either
//! rendered for people or printed here as one document on stdout. The document has its own
//! serialisation types ([`PlanDocument`] and friends) rather than deriving from the plan's
//! internal types, so a refactoring of [`crate::plan`] cannot silently change what pipelines
//! parse. Its JSON Schema is `schema/plan.schema.json`; the README documents every field.
//!
//! Stability: `schema` names the version (`kubectl-appupdate.plan/v1`). Within v1, fields are
//! only ever added, never renamed, removed or retyped; an incompatible change bumps it to v2.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::plan::{Action, Kind, ObjectChange, Plan, RouteStyle};

/// Schema identifier; bump on any incompatible change.
pub const SCHEMA_VERSION: &str = "kubectl-appupdate.plan/v1";

/// The whole plan document.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDocument {
    /// Always [`SCHEMA_VERSION`].
    pub schema: &'static str,
    pub app: String,
    pub namespace: String,
    /// The kubeconfig context the plan was computed against.
    pub context: String,
    /// Whether anything would be created, updated or deleted.
    pub has_changes: bool,
    pub summary: SummaryDoc,
    /// With `--endpoints`: how the endpoints are published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<RoutesDoc>,
    /// Every object the run looked at, in write order, unchanged ones included.
    pub objects: Vec<ObjectDoc>,
}

/// How the plan publishes the endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutesDoc {
    /// The route style after the run: `nginx-snippet`, `nginx-auth` or `gateway`.
    pub style: RouteStyle,
    /// The styles of the managed routes live now (empty on a first exposure).
    pub live_styles: Vec<RouteStyle>,
    /// Whether live routes change style (new routes first, then the old ones go).
    pub migration: bool,
    /// What the plan decided and why, one sentence each (e.g. the IngressClass new Ingresses
    /// get).
    pub notes: Vec<String>,
}

/// Counts per action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SummaryDoc {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub unchanged: usize,
}

/// One object and what happens to it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDoc {
    pub api_version: &'static str,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `create`, `update`, `delete` or `unchanged`.
    pub action: Action,
    /// The `metadata.resourceVersion` the change was computed from (every write is
    /// conditional on it); `null` for a create.
    pub resource_version: Option<String>,
    /// The live object's uid; `null` for a create.
    pub uid: Option<String>,
    /// The values this run changes; empty when unchanged.
    pub fields: Vec<FieldDoc>,
    /// For Ingresses: the endpoints they serve, in endpoints-file terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressDoc>,
    /// For routes (Ingresses and HTTPRoutes): their style and the endpoints they serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteDoc>,
    /// The focused view of the live object the diff shows (`null` for a create).
    pub before: Option<Value>,
    /// The focused view after the change (`null` for a delete).
    pub after: Option<Value>,
}

/// One changed value. `null` means absent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldDoc {
    /// e.g. `spec.template.spec.containers[name=app].image`, `spec.maxReplicas`,
    /// `spec.rules[0].http.paths`; `.` for a whole object (an Ingress delete).
    pub path: String,
    pub before: Value,
    pub after: Value,
}

/// The endpoint view of an Ingress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressDoc {
    /// The identifier label value of the scope group.
    pub identifier: String,
    /// Sorted, de-duplicated OAuth scopes; empty for the public group.
    pub scopes: Vec<String>,
    /// Endpoint paths (as in the endpoints file, without the `/<app>` prefix) served after the
    /// change; empty for a delete.
    pub paths: Vec<String>,
    /// Endpoint paths served before the change; empty for a create.
    pub paths_before: Vec<String>,
}

/// The route view of a route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteDoc {
    /// `nginx-snippet`, `nginx-auth` or `gateway` (for a delete, the style of the route that
    /// goes).
    pub style: RouteStyle,
    /// The identifier label value of the scope group.
    pub identifier: String,
    /// Sorted, de-duplicated OAuth scopes; empty for the public group.
    pub scopes: Vec<String>,
    /// Endpoint paths served after the change; empty for a delete.
    pub paths: Vec<String>,
    /// Endpoint paths served before the change; empty for a create.
    pub paths_before: Vec<String>,
}

fn object_doc(change: &ObjectChange) -> ObjectDoc {
    let route = change.route.as_ref().map(|info| RouteDoc {
        style: info.style,
        identifier: info.identifier.clone(),
        scopes: info.scopes.clone(),
        paths: info.paths.clone(),
        paths_before: info.paths_before.clone(),
    });
    let ingress = route
        .as_ref()
        .filter(|_| change.kind == Kind::Ingress)
        .map(|r| IngressDoc {
            identifier: r.identifier.clone(),
            scopes: r.scopes.clone(),
            paths: r.paths.clone(),
            paths_before: r.paths_before.clone(),
        });
    ObjectDoc {
        api_version: change.kind.api_version(),
        kind: change.kind.to_string(),
        namespace: change.namespace.clone(),
        name: change.name.clone(),
        action: change.action(),
        resource_version: change
            .live
            .as_ref()
            .map(|b| b.resource_version().to_owned()),
        uid: change.live.as_ref().map(|b| b.uid().to_owned()),
        fields: change
            .fields
            .iter()
            .map(|f| FieldDoc {
                path: f.path.clone(),
                before: f.before.clone().unwrap_or(Value::Null),
                after: f.after.clone().unwrap_or(Value::Null),
            })
            .collect(),
        ingress,
        route,
        before: change.before.clone(),
        after: change.after.clone(),
    }
}

/// The document for `plan`.
pub fn document(plan: &Plan) -> PlanDocument {
    let s = plan.summary();
    PlanDocument {
        schema: SCHEMA_VERSION,
        app: plan.app.clone(),
        namespace: plan.namespace.clone(),
        context: plan.context.clone(),
        has_changes: s.has_changes(),
        summary: SummaryDoc {
            create: s.create,
            update: s.update,
            delete: s.delete,
            unchanged: s.unchanged,
        },
        routes: plan.routes.as_ref().map(|r| RoutesDoc {
            style: r.style,
            live_styles: r.live_styles.clone(),
            migration: r.is_migration(),
            notes: r.notes.clone(),
        }),
        objects: plan.changes().map(object_doc).collect(),
    }
}

/// Writes the plan as pretty-printed JSON and a newline.
pub fn write_json(out: &mut impl Write, plan: &Plan) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &document(plan))?;
    writeln!(out)
}

/// Writes the plan as one YAML document (same structure as the JSON).
pub fn write_yaml(out: &mut impl Write, plan: &Plan) -> io::Result<()> {
    let text = serde_saphyr::to_string(&document(plan)).map_err(io::Error::other)?;
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Base, FieldChange, Kind, RouteInfo, Write};
    use serde_json::json;

    fn change(kind: Kind, name: &str, action: Action) -> ObjectChange {
        ObjectChange {
            kind,
            namespace: "shop".into(),
            name: name.into(),
            live: (action != Action::Create)
                .then(|| Base::new("7", "u-1"))
                .flatten(),
            fields: Vec::new(),
            before: None,
            after: None,
            write: Write::sample(action),
            route: None,
        }
    }

    fn info(style: RouteStyle, paths: &[&str], before: &[&str]) -> RouteInfo {
        RouteInfo {
            style,
            identifier: "x".into(),
            scopes: vec!["admin".into()],
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            paths_before: before.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    #[test]
    fn an_update_lists_its_fields_with_before_and_after() {
        let mut c = change(Kind::HorizontalPodAutoscaler, "web", Action::Update);
        c.fields = vec![FieldChange::new(
            "spec.maxReplicas",
            Some(json!(5)),
            Some(json!(9)),
        )];
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["apiVersion"], "autoscaling/v2");
        assert_eq!(doc["kind"], "HorizontalPodAutoscaler");
        assert_eq!(doc["action"], "update");
        assert_eq!(doc["resourceVersion"], "7");
        assert_eq!(
            doc["fields"],
            json!([{"path": "spec.maxReplicas", "before": 5, "after": 9}])
        );
        assert!(doc.get("ingress").is_none());
        assert!(doc.get("route").is_none());
    }

    #[test]
    fn an_absent_value_is_null_and_a_create_has_no_resource_version() {
        let mut c = change(Kind::Ingress, "web-x", Action::Create);
        c.fields = vec![FieldChange::new(
            "metadata.labels[app]",
            None,
            Some(json!("web")),
        )];
        c.route = Some(info(RouteStyle::NginxSnippet, &["/a"], &[]));
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["resourceVersion"], Value::Null);
        assert_eq!(doc["fields"][0]["before"], Value::Null);
        assert_eq!(
            doc["ingress"],
            json!({"identifier": "x", "scopes": ["admin"], "paths": ["/a"], "pathsBefore": []})
        );
        assert_eq!(
            doc["route"],
            json!({"style": "nginx-snippet", "identifier": "x", "scopes": ["admin"], "paths": ["/a"], "pathsBefore": []})
        );
    }

    #[test]
    fn an_httproute_carries_its_style_and_no_ingress_view() {
        let mut c = change(Kind::HttpRoute, "web-x", Action::Update);
        c.route = Some(info(
            RouteStyle::Gateway,
            &["/health", "/products"],
            &["/health"],
        ));
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(doc["kind"], "HTTPRoute");
        assert!(doc.get("ingress").is_none());
        assert_eq!(doc["route"]["style"], "gateway");
        assert_eq!(doc["route"]["pathsBefore"], json!(["/health"]));
    }

    #[test]
    fn a_deleted_route_serves_nothing_after() {
        let mut c = change(Kind::Ingress, "web-user", Action::Delete);
        c.route = Some(info(RouteStyle::NginxAuth, &[], &["/protected/user"]));
        let ing = object_doc(&c).ingress.unwrap();
        assert!(ing.paths.is_empty());
        assert_eq!(ing.paths_before, vec!["/protected/user"]);
    }
}
