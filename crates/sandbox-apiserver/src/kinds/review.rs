//! SelfSubjectReview (`authentication.k8s.io/v1`): created, never stored — the answer is who
//! the request acts as (after impersonation).

use serde_json::Value;

use super::Kind;
use super::table::{age, age_column, name_column, st};
use crate::model::ApiResource;
use crate::model::schema;

pub struct SelfSubjectReview;

pub static SELF_SUBJECT_REVIEW: SelfSubjectReview = SelfSubjectReview;

static API: ApiResource = ApiResource {
    group: "authentication.k8s.io",
    version: "v1",
    api_version: "authentication.k8s.io/v1",
    resource: "selfsubjectreviews",
    kind: "SelfSubjectReview",
    list_kind: "SelfSubjectReviewList",
    namespaced: false,
};

impl Kind for SelfSubjectReview {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::SELF_SUBJECT_REVIEW
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn review(&self) -> bool {
        true
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![name_column(), age_column()]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        vec![
            Value::from(st(obj, "/metadata/name")),
            Value::from(age(obj, now)),
        ]
    }
}
