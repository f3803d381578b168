//! The reviews a client creates and the server answers without storing them:
//! SelfSubjectReview (`authentication.k8s.io/v1`: who the request acts as, after
//! impersonation) and SelfSubjectAccessReview (`authorization.k8s.io/v1`: may it do this).

use serde_json::Value;

use super::table::{age, age_column, name_column, st};
use super::{Kind, Review};
use crate::model::ApiResource;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

/// The default printer's cells (a review has no columns of its own).
fn name_and_age(obj: &Value, now: i64) -> Vec<Value> {
    vec![
        Value::from(st(obj, "/metadata/name")),
        Value::from(age(obj, now)),
    ]
}

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

    fn review(&self) -> Option<Review> {
        Some(Review::Subject)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![name_column(), age_column()]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        name_and_age(obj, now)
    }
}

pub struct SelfSubjectAccessReview;

pub static SELF_SUBJECT_ACCESS_REVIEW: SelfSubjectAccessReview = SelfSubjectAccessReview;

static ACCESS_API: ApiResource = ApiResource {
    group: "authorization.k8s.io",
    version: "v1",
    api_version: "authorization.k8s.io/v1",
    resource: "selfsubjectaccessreviews",
    kind: "SelfSubjectAccessReview",
    list_kind: "SelfSubjectAccessReviewList",
    namespaced: false,
};

impl Kind for SelfSubjectAccessReview {
    fn api(&self) -> &'static ApiResource {
        &ACCESS_API
    }

    fn schema(&self) -> usize {
        schema::SELF_SUBJECT_ACCESS_REVIEW
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn review(&self) -> Option<Review> {
        Some(Review::Access)
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![name_column(), age_column()]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        name_and_age(obj, now)
    }
}

/// `ValidateSelfSubjectAccessReviewSpec`: exactly one of the two attribute sets.
pub fn validate_access_review(spec: &Value) -> Vec<FieldError> {
    let has = |f: &str| spec.get(f).is_some_and(|v| !v.is_null());
    match (has("resourceAttributes"), has("nonResourceAttributes")) {
        (false, false) => vec![FieldError::invalid(
            "spec.resourceAttributes",
            "\"null\"",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        (true, true) => {
            let n = &spec["nonResourceAttributes"];
            let s = |f: &str| n.get(f).and_then(Value::as_str).unwrap_or("").to_string();
            vec![FieldError::invalid(
                "spec.nonResourceAttributes",
                &format!(
                    "authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
                    go_quote(&s("path")),
                    go_quote(&s("verb"))
                ),
                "cannot be specified in combination with resourceAttributes",
            )]
        }
        _ => Vec::new(),
    }
}
