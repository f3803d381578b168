//! `?labelSelector=` and `?fieldSelector=` for a kind: parsed with the model's grammar, field
//! labels checked against what the kind supports.

use serde_json::Value;

use crate::kinds::{self, Kind};
use crate::model::selector::{FieldSelector, LabelSelector};
use crate::model::status::{self, StatusBody};

/// Parsed `labelSelector` + `fieldSelector`.
#[derive(Debug, Default, Clone)]
pub struct Selectors {
    pub label: LabelSelector,
    pub field: FieldSelector,
}

impl Selectors {
    pub fn parse(
        k: &dyn Kind,
        label: Option<&str>,
        field: Option<&str>,
    ) -> Result<Selectors, StatusBody> {
        let label = LabelSelector::parse(label.unwrap_or("")).map_err(status::bad_request)?;
        let field = FieldSelector::parse(field.unwrap_or("")).map_err(status::bad_request)?;
        for t in &field.terms {
            if !kinds::field_label_supported(k, &t.field) {
                // Kinds with field labels of their own have a conversion function saying so;
                // the others get DefaultMetaV1FieldSelectorConversion's text.
                return Err(status::bad_request(if k.field_labels().is_empty() {
                    format!(
                        "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                        status::go_quote(&t.field)
                    )
                } else {
                    format!("field label not supported: {}", t.field)
                }));
            }
        }
        Ok(Selectors { label, field })
    }

    pub fn matches(&self, k: &dyn Kind, obj: &Value) -> bool {
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.label.matches(labels) && self.field.matches(&|f| kinds::field_value(k, obj, f))
    }
}
