//! Saved plans (`--plan-out FILE`, `kubectl appupdate apply FILE`): a plan as a file that is
//! reviewed in one place and applied, exactly as it is, in another.
//!
//! Pure: [`render`] turns plans into the file's text, [`parse`] turns the text back into plans
//! (or one clear error); reading and writing the file is the caller's.
//!
//! # The file
//!
//! ```json
//! {
//!   "schema": "kubectl-appupdate.plan-file/v1",
//!   "checksum": "sha256:…",
//!   "content": {
//!     "createdAt": "2026-12-01T07:00:00Z",
//!     "tool": "kubectl-appupdate 0.1.0",
//!     "clusters": [
//!       {
//!         "context": "prod", "server": "https://…", "namespace": "shop", "app": "web",
//!         "source": {"type": "update"},
//!         "plan": { …the `-o json` document… },
//!         "objects": [ {"updater": {"type": "…", "spec": {…}}, "change": {…}} ]
//!       }
//!     ]
//!   }
//! }
//! ```
//!
//! `clusters` holds one plan per cluster (one today): a change run over several contexts saves
//! one file for all of them. Each plan carries where it was computed (context, server URL,
//! namespace), the `-o json` document for reviewers and pipelines, and for each object what
//! applying needs: the approved change — its guarded fields, the views the diff shows, and the
//! write with the `resourceVersion` and `uid` it was computed from — and the updater that
//! computed it, which re-plans the object against the object as it is when the file is applied
//! (the approved-diff guard, [`crate::plan::recheck`], then decides).
//!
//! `checksum` is SHA-256 over `content` in a canonical form (object keys sorted, no
//! whitespace), so re-indenting the file keeps it valid while any change of a value, a
//! truncation or an edit by hand is refused. It guards against accidents, not against someone
//! who means harm: keep plan files where only the pipeline can change them.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::history::{Source, tool};
use crate::output;
use crate::plan::{ObjectChange, Plan, Planned, SavedUpdater, Updater};
use crate::routes;
use crate::undo;
use crate::updaters::{AutoscalerUpdater, DeploymentUpdater, SAVED_AUTOSCALER, SAVED_DEPLOYMENT};

/// The file's schema; any other is refused.
pub const SCHEMA: &str = "kubectl-appupdate.plan-file/v1";

/// Where a plan was computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub context: String,
    /// The API server URL.
    pub server: String,
    /// When, RFC 3339 (UTC).
    pub created_at: String,
}

/// One cluster's plan as read back from a file.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    pub context: String,
    pub server: String,
    pub source: Source,
    pub plan: Plan,
}

/// A plan file as read: when it was made, and one plan per cluster.
#[derive(Clone, Debug)]
pub struct PlanFile {
    pub created_at: String,
    pub tool: String,
    pub clusters: Vec<ClusterPlan>,
}

/// Why a plan cannot be saved or a file cannot be applied. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanFileError {
    #[error(
        "{file} is not a complete plan file ({what} at line {line}, column {column}); it may be truncated: make it again with --plan-out"
    )]
    NotJson {
        file: String,
        what: &'static str,
        line: usize,
        column: usize,
    },
    #[error(
        "{file} is a plan file of schema {found:?}; this kubectl-appupdate applies {SCHEMA:?} files only: make the plan again with this version"
    )]
    Schema { file: String, found: String },
    #[error(
        "{file} was changed after it was written (its checksum does not match its content): a saved plan is applied exactly as written or not at all; make it again with --plan-out"
    )]
    Checksum { file: String },
    #[error("{file} cannot be applied: {why}; make it again with --plan-out")]
    Invalid { file: String, why: String },
    #[error(
        "cannot save the plan: {reference} was planned by an updater that cannot be saved; apply it directly instead"
    )]
    NotSavable { reference: String },
}

/// Why a saved plan is not applied here or now. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SavedPlanError {
    #[error("{0}")]
    OtherTarget(String),
    #[error(
        "{file} was made {age} ago ({created}), longer ago than --max-plan-age {max}; make a new plan"
    )]
    TooOld {
        file: String,
        age: String,
        created: String,
        max: String,
    },
    #[error("{file} has no valid creation time ({created:?}), so --max-plan-age cannot be checked")]
    NoTime { file: String, created: String },
}

// ---- the file as serialised ----

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    schema: String,
    checksum: String,
    content: Value,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContentDoc {
    created_at: String,
    tool: String,
    clusters: Vec<ClusterDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClusterDoc {
    context: String,
    server: String,
    namespace: String,
    app: String,
    source: Source,
    /// The `-o json` document (for people and pipelines; applying uses `objects`).
    plan: Value,
    objects: Vec<ObjectDoc>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectDoc {
    updater: SavedUpdater,
    change: ObjectChange,
}

/// `value` with every object's keys sorted, as compact JSON: what the checksum is over.
fn canonical(value: &Value) -> Vec<u8> {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

fn checksum(content: &Value) -> String {
    let digest = Sha256::digest(canonical(content));
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The text of a plan file holding `plans` (one per cluster), each with where it was computed.
pub fn render(plans: &[(&Plan, &Origin, &Source)]) -> Result<String, PlanFileError> {
    let created_at = plans
        .first()
        .map(|(_, o, _)| o.created_at.clone())
        .unwrap_or_default();
    let mut clusters = Vec::with_capacity(plans.len());
    for (plan, origin, source) in plans {
        let mut objects = Vec::with_capacity(plan.objects.len());
        for p in &plan.objects {
            let updater = p.updater.save().ok_or_else(|| PlanFileError::NotSavable {
                reference: p.change.reference(),
            })?;
            objects.push(ObjectDoc {
                updater,
                change: ObjectChange::clone(&p.change),
            });
        }
        clusters.push(ClusterDoc {
            context: origin.context.clone(),
            server: origin.server.clone(),
            namespace: plan.namespace.clone(),
            app: plan.app.clone(),
            source: (*source).clone(),
            plan: serde_json::to_value(output::document(plan)).unwrap_or(Value::Null),
            objects,
        });
    }
    let content = serde_json::to_value(ContentDoc {
        created_at,
        tool: tool(),
        clusters,
    })
    .map_err(|e| PlanFileError::Invalid {
        file: "the plan".into(),
        why: e.to_string(),
    })?;
    let doc = FileDoc {
        schema: SCHEMA.to_owned(),
        checksum: checksum(&content),
        content,
    };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(text)
}

/// The updater a saved plan names, ready to re-plan its object.
pub fn load_updater(saved: &SavedUpdater) -> Result<Arc<dyn Updater>, String> {
    fn de<T: serde::de::DeserializeOwned>(spec: &Value) -> Result<T, String> {
        serde_json::from_value(spec.clone()).map_err(|e| e.to_string())
    }
    let s = &saved.spec;
    Ok(match saved.kind.as_str() {
        SAVED_DEPLOYMENT => Arc::new(de::<DeploymentUpdater>(s)?),
        SAVED_AUTOSCALER => Arc::new(de::<AutoscalerUpdater>(s)?),
        other => match routes::load_updater(other, s).or_else(|| undo::load_updater(other, s)) {
            Some(u) => u?,
            None => return Err(format!("unknown updater type {other:?}")),
        },
    })
}

/// Reads a plan file's text. `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<PlanFile, PlanFileError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| PlanFileError::NotJson {
        file: file.to_owned(),
        what: match e.classify() {
            serde_json::error::Category::Eof => "it ends early",
            serde_json::error::Category::Syntax => "not JSON",
            _ => "not a plan file",
        },
        line: e.line(),
        column: e.column(),
    })?;
    let found = doc["schema"].as_str().unwrap_or_default();
    if found != SCHEMA {
        return Err(PlanFileError::Schema {
            file: file.to_owned(),
            found: if found.is_empty() {
                "none".into()
            } else {
                found.to_owned()
            },
        });
    }
    let invalid = |why: String| PlanFileError::Invalid {
        file: file.to_owned(),
        why,
    };
    let doc: FileDoc = serde_json::from_value(doc).map_err(|e| invalid(e.to_string()))?;
    if doc.checksum != checksum(&doc.content) {
        return Err(PlanFileError::Checksum {
            file: file.to_owned(),
        });
    }
    let content: ContentDoc =
        serde_json::from_value(doc.content).map_err(|e| invalid(e.to_string()))?;
    if content.clusters.is_empty() {
        return Err(invalid("it holds no plan".into()));
    }
    let mut clusters = Vec::with_capacity(content.clusters.len());
    for c in content.clusters {
        let mut objects = Vec::with_capacity(c.objects.len());
        for o in c.objects {
            let reference = o.change.reference();
            if o.change.namespace != c.namespace {
                return Err(invalid(format!(
                    "{reference} is in namespace {:?}, not the plan's {:?}",
                    o.change.namespace, c.namespace
                )));
            }
            let updater =
                load_updater(&o.updater).map_err(|why| invalid(format!("{reference}: {why}")))?;
            if updater.name() != o.change.name {
                return Err(invalid(format!(
                    "{reference} was planned for an object named {:?}",
                    updater.name()
                )));
            }
            objects.push(Planned {
                updater,
                change: Arc::new(o.change),
            });
        }
        clusters.push(ClusterPlan {
            context: c.context.clone(),
            server: c.server,
            source: c.source,
            plan: Plan::new(c.app, c.namespace, c.context, objects),
        });
    }
    Ok(PlanFile {
        created_at: content.created_at,
        tool: content.tool,
        clusters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, Base, FieldChange, Kind, PatchType, Write};
    use crate::updaters::{AutoscalerUpdate, ChangeCause, ContainerUpdate};
    use serde_json::json;

    fn plan() -> Plan {
        let deploy = DeploymentUpdater {
            name: "web".into(),
            container: None,
            update: ContainerUpdate {
                image: Some("r/web:2".into()),
            },
            cause: Some(ChangeCause {
                revision: Some(3),
                undo_of: None,
            }),
        };
        let live = json!({"metadata": {"name": "web", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:1"}]}}}});
        let change = deploy.plan("shop", Some(&live)).unwrap();
        let hpa = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: Some(3),
                max_replicas: None,
            },
        };
        let live_hpa = json!({"metadata": {"name": "web", "resourceVersion": "8", "uid": "u-2"},
            "spec": {"minReplicas": 2, "maxReplicas": 5}});
        let hpa_change = hpa.plan("shop", Some(&live_hpa)).unwrap();
        Plan::new(
            "web".into(),
            "shop".into(),
            "prod".into(),
            vec![
                Planned {
                    updater: Arc::new(deploy),
                    change: change.into(),
                },
                Planned {
                    updater: Arc::new(hpa),
                    change: hpa_change.into(),
                },
            ],
        )
    }

    fn origin() -> Origin {
        Origin {
            context: "prod".into(),
            server: "https://k8s.example:6443/".into(),
            created_at: "2026-12-01T07:00:00Z".into(),
        }
    }

    fn saved() -> String {
        render(&[(&plan(), &origin(), &Source::Update)]).unwrap()
    }

    #[test]
    fn a_saved_plan_reads_back_as_the_same_plan() {
        let file = parse(&saved(), "plan.json").unwrap();
        assert_eq!(file.created_at, "2026-12-01T07:00:00Z");
        assert_eq!(file.clusters.len(), 1);
        let c = &file.clusters[0];
        assert_eq!(
            (c.context.as_str(), c.server.as_str()),
            ("prod", "https://k8s.example:6443/")
        );
        assert_eq!(c.source, Source::Update);
        let original = plan();
        let read: Vec<&ObjectChange> = c.plan.changes().collect();
        let want: Vec<&ObjectChange> = original.changes().collect();
        assert_eq!(read, want);
        // The updaters come back too: they re-plan to the same change, with the change-cause
        // as it was planned when the plan was saved (its revision included).
        let live = json!({"metadata": {"name": "web", "resourceVersion": "7", "uid": "u-1"},
            "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:1"}]}}}});
        let again = c.plan.objects[0].updater.plan("shop", Some(&live)).unwrap();
        assert_eq!(&again, want[0]);
        assert_eq!(
            again.write,
            Some(Write::Patch {
                base: Base::new("7", "u-1").unwrap(),
                patch_type: PatchType::Strategic,
                body: json!({
                    "metadata": {"annotations": {
                        "kubernetes.io/change-cause": "kubectl-appupdate: image r/web:1 → r/web:2 (revision 3)"
                    }},
                    "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "r/web:2"}]}}}
                }).into(),
            })
        );
    }

    #[test]
    fn the_file_holds_the_json_document_for_reviewers() {
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let plan = &doc["content"]["clusters"][0]["plan"];
        assert_eq!(plan["schema"], output::SCHEMA_VERSION);
        assert_eq!(plan["summary"]["update"], 2);
    }

    #[test]
    fn reindenting_keeps_a_file_valid() {
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let compact = serde_json::to_string(&doc).unwrap();
        assert!(parse(&compact, "plan.json").is_ok());
    }

    #[test]
    fn an_edited_value_is_refused_by_the_checksum() {
        let text = saved().replace("r/web:2", "r/web:3");
        assert_eq!(
            parse(&text, "plan.json").unwrap_err().to_string(),
            "plan.json was changed after it was written (its checksum does not match its content): a saved plan is applied exactly as written or not at all; make it again with --plan-out"
        );
    }

    #[test]
    fn a_truncated_file_is_refused_in_one_line() {
        let text = saved();
        let cut = &text[..text.len() / 2];
        let err = parse(cut, "plan.json").unwrap_err().to_string();
        assert!(
            err.starts_with("plan.json is not a complete plan file (it ends early at line"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        let err = parse("", "plan.json").unwrap_err().to_string();
        assert!(err.contains("it ends early"), "{err}");
    }

    #[test]
    fn another_schema_is_refused() {
        let text = saved().replace(SCHEMA, "kubectl-appupdate.plan-file/v2");
        assert_eq!(
            parse(&text, "p.json").unwrap_err().to_string(),
            "p.json is a plan file of schema \"kubectl-appupdate.plan-file/v2\"; this kubectl-appupdate applies \"kubectl-appupdate.plan-file/v1\" files only: make the plan again with this version"
        );
        // The -o json document is not a plan file.
        let err = parse(r#"{"schema": "kubectl-appupdate.plan/v1"}"#, "p.json").unwrap_err();
        assert!(matches!(err, PlanFileError::Schema { .. }));
    }

    #[test]
    fn an_empty_base_does_not_load() {
        // A file whose checksum matches but whose write is unconditional.
        let doc: Value = serde_json::from_str(&saved()).unwrap();
        let mut content = doc["content"].clone();
        content["clusters"][0]["objects"][0]["change"]["write"]["base"]["resourceVersion"] =
            json!("");
        let forged = json!({"schema": SCHEMA, "checksum": checksum(&content), "content": content});
        let err = parse(&forged.to_string(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("resourceVersion and uid must not be empty"),
            "{err}"
        );
    }

    #[test]
    fn field_changes_and_actions_survive() {
        let c = FieldChange::new("spec.maxReplicas", None, Some(json!(9)));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(serde_json::from_value::<FieldChange>(v).unwrap(), c);
        assert_eq!(
            serde_json::to_value(Action::Delete).unwrap(),
            json!("delete")
        );
        assert_eq!(
            serde_json::to_value(Kind::Ingress).unwrap(),
            json!("Ingress")
        );
    }
}
