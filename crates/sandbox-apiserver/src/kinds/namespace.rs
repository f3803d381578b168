//! Namespace (`v1`, cluster-scoped): the `kubernetes.io/metadata.name` label and `Active` phase
//! by default, the `kubernetes` finalizer on create (kept on update), DNS-1123 label names, the
//! `status.phase` field selector, deletion through `Terminating`, and the printer's columns.

use serde_json::{Value, json};

use super::table::{age, age_column, column, name_column, st};
use super::{Deletion, Kind, Subresource, UpdateValidation, map_mut, map_mut_in, set_default};
use crate::model::ApiResource;
use crate::model::names::NameRule;
use crate::model::schema;

pub struct Namespace;

/// Namespaces: the store checks that a namespaced object's namespace exists through this kind.
pub static NAMESPACE: Namespace = Namespace;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "namespaces",
    kind: "Namespace",
    list_kind: "NamespaceList",
    namespaced: false,
};

impl Kind for Namespace {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::NAMESPACE
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Dns1123Label
    }

    fn default(&self, obj: &mut Value) {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !name.is_empty()
            && let Some(meta) = map_mut(obj, "metadata")
            && let Some(labels) = map_mut_in(meta, "labels")
        {
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
        if let Some(status) = map_mut(obj, "status") {
            set_default(status, "phase", json!("Active"));
        }
    }

    fn prepare_create(&self, obj: &mut Value) {
        if let Some(status) = map_mut(obj, "status") {
            status.insert("phase".into(), json!("Active"));
        }
        if let Some(spec) = map_mut(obj, "spec") {
            let has = spec
                .get("finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == "kubernetes"));
            if !has {
                let mut list = spec
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                list.push(json!("kubernetes"));
                spec.insert("finalizers".into(), Value::Array(list));
            }
        }
    }

    fn prepare_update(&self, new: &mut Value, old: &Value) {
        // spec.finalizers only change through the finalize subresource.
        let old_fin = old.pointer("/spec/finalizers").cloned();
        if let Some(spec) = map_mut(new, "spec") {
            match old_fin {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[Subresource::Status, Subresource::Finalize]
    }

    fn update_validation(&self) -> UpdateValidation {
        UpdateValidation::ObjectThenMetaUpdate
    }

    fn field_labels(&self) -> &'static [&'static str] {
        &["status.phase"]
    }

    fn field_value(&self, obj: &Value, label: &str) -> Option<String> {
        match label {
            "status.phase" => obj
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        }
    }

    fn deletion(&self) -> Deletion {
        Deletion::Namespace
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column("Status", "string", "", "The status of the namespace", 0),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        vec![
            json!(st(obj, "/metadata/name")),
            json!(st(obj, "/status/phase")),
            json!(age(obj, now)),
        ]
    }
}
