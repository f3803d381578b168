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

use crate::ingress_planner;
use crate::plan::{Action, ObjectChange, Plan};

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
    /// Every object the run looked at, in write order, unchanged ones included.
    pub objects: Vec<ObjectDoc>,
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

fn object_doc(change: &ObjectChange, app: &str) -> ObjectDoc {
    let ingress = change.ingress.as_ref().map(|info| {
        let (paths, paths_before) = match change.action() {
            Action::Create => (info.paths.clone(), Vec::new()),
            Action::Delete => (Vec::new(), info.paths.clone()),
            Action::Update => (
                info.paths.clone(),
                change
                    .before
                    .as_ref()
                    .map(|v| ingress_planner::served_paths(v, app))
                    .unwrap_or_default(),
            ),
            Action::Unchanged => (info.paths.clone(), info.paths.clone()),
        };
        IngressDoc {
            identifier: info.identifier.clone(),
            scopes: info.scopes.clone(),
            paths,
            paths_before,
        }
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
        objects: plan.changes().map(|c| object_doc(c, &plan.app)).collect(),
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
    use crate::plan::{Base, FieldChange, IngressInfo, Kind, Write};
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
            ingress: None,
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
        let doc = serde_json::to_value(object_doc(&c, "web")).unwrap();
        assert_eq!(doc["apiVersion"], "autoscaling/v2");
        assert_eq!(doc["kind"], "HorizontalPodAutoscaler");
        assert_eq!(doc["action"], "update");
        assert_eq!(doc["resourceVersion"], "7");
        assert_eq!(
            doc["fields"],
            json!([{"path": "spec.maxReplicas", "before": 5, "after": 9}])
        );
        assert!(doc.get("ingress").is_none());
    }

    #[test]
    fn an_absent_value_is_null_and_a_create_has_no_resource_version() {
        let mut c = change(Kind::Ingress, "web-x", Action::Create);
        c.fields = vec![FieldChange::new(
            "metadata.labels[app]",
            None,
            Some(json!("web")),
        )];
        c.ingress = Some(IngressInfo {
            identifier: "x".into(),
            scopes: vec!["admin".into()],
            paths: vec!["/a".into()],
        });
        let doc = serde_json::to_value(object_doc(&c, "web")).unwrap();
        assert_eq!(doc["resourceVersion"], Value::Null);
        assert_eq!(doc["fields"][0]["before"], Value::Null);
        assert_eq!(
            doc["ingress"],
            json!({"identifier": "x", "scopes": ["admin"], "paths": ["/a"], "pathsBefore": []})
        );
    }

    #[test]
    fn an_ingress_update_shows_the_paths_before_and_after() {
        let mut c = change(Kind::Ingress, "web-public", Action::Update);
        c.before = Some(json!({"spec": {"rules": [{"http": {"paths": [
            {"path": "/web/health"}, {"path": "/web/unprotected"}
        ]}}]}}));
        c.ingress = Some(IngressInfo {
            identifier: "public".into(),
            scopes: Vec::new(),
            paths: vec!["/health".into(), "/products".into()],
        });
        let doc = object_doc(&c, "web");
        let ing = doc.ingress.unwrap();
        assert_eq!(ing.paths, vec!["/health", "/products"]);
        assert_eq!(ing.paths_before, vec!["/health", "/unprotected"]);
    }

    #[test]
    fn a_deleted_ingress_serves_nothing_after() {
        let mut c = change(Kind::Ingress, "web-user", Action::Delete);
        c.ingress = Some(IngressInfo {
            identifier: "u".into(),
            scopes: vec!["user".into()],
            paths: vec!["/protected/user".into()],
        });
        let ing = object_doc(&c, "web").ingress.unwrap();
        assert!(ing.paths.is_empty());
        assert_eq!(ing.paths_before, vec!["/protected/user"]);
    }
}
