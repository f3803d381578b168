//! What a change sets: its [`FieldChange`]s, their values, and the typed [`Field`]s other
//! steps read back.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::View;

/// A field that other steps read back from a plan (the history record, the undo's drift check,
/// the fleet's rollout follower), typed. The [`FieldChange::path`] text stays the one the plan
/// shows and saves; it is made by [`Field::path`] and read by [`Field::parse`], the one place
/// that knows its syntax. The route fields are only shown, so they keep their path text only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field<'a> {
    /// The image of the named container of a Deployment:
    /// `spec.template.spec.containers[name=<container>].image`.
    Image { container: &'a str },
    /// `spec.minReplicas` of a HorizontalPodAutoscaler.
    MinReplicas,
    /// `spec.maxReplicas` of a HorizontalPodAutoscaler.
    MaxReplicas,
    /// The whole object (`.`): a create or a delete.
    Whole,
}

impl<'a> Field<'a> {
    const IMAGE_PREFIX: &'static str = "spec.template.spec.containers[name=";
    const IMAGE_SUFFIX: &'static str = "].image";

    /// The path text of the field, as shown and saved.
    pub fn path(self) -> String {
        match self {
            Field::Image { container } => {
                format!("{}{container}{}", Self::IMAGE_PREFIX, Self::IMAGE_SUFFIX)
            }
            Field::MinReplicas => "spec.minReplicas".into(),
            Field::MaxReplicas => "spec.maxReplicas".into(),
            Field::Whole => ".".into(),
        }
    }

    /// The field a path text names, `None` for one that is not typed (a route's field).
    pub fn parse(path: &'a str) -> Option<Field<'a>> {
        Some(match path {
            "spec.minReplicas" => Field::MinReplicas,
            "spec.maxReplicas" => Field::MaxReplicas,
            "." => Field::Whole,
            _ => Field::Image {
                container: path
                    .strip_prefix(Self::IMAGE_PREFIX)?
                    .strip_suffix(Self::IMAGE_SUFFIX)?,
            },
        })
    }
}

/// One leaf value (or owned sub-tree) that the run changes. `None` means absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// A readable path, e.g. `spec.template.spec.containers[name=web].image`; typed by
    /// [`FieldChange::field`].
    pub path: String,
    pub before: Option<FieldValue>,
    pub after: Option<FieldValue>,
}

impl FieldChange {
    pub fn new(path: impl Into<String>, before: Option<Value>, after: Option<Value>) -> Self {
        FieldChange {
            path: path.into(),
            before: before.map(FieldValue::from),
            after: after.map(FieldValue::from),
        }
    }

    /// A change of a typed [`Field`], its path made by [`Field::path`].
    pub fn of(field: Field<'_>, before: Option<Value>, after: Option<Value>) -> Self {
        FieldChange::new(field.path(), before, after)
    }

    /// The typed field this change's path names, `None` for a route's field.
    pub fn field(&self) -> Option<Field<'_>> {
        Field::parse(&self.path)
    }

    /// The whole object (path `.`) going from `before` to `after`: the views' own values, not
    /// copies (a delete of a large route held its paths twice).
    pub fn whole(before: Option<&View>, after: Option<&View>) -> Self {
        let whole = |view: &View| {
            FieldValue(FieldRepr::InView {
                view: view.clone(),
                pointer: "".into(),
            })
        };
        FieldChange {
            path: Field::Whole.path(),
            before: before.map(whole),
            after: after.map(whole),
        }
    }

    pub fn before(&self) -> Option<Cow<'_, Value>> {
        self.before.as_ref().map(FieldValue::value)
    }

    pub fn after(&self) -> Option<Cow<'_, Value>> {
        self.after.as_ref().map(FieldValue::value)
    }
}

/// A changed field's value: its own, or the part of a view ([`ObjectChange::before`](super::ObjectChange::before),
/// [`ObjectChange::after`](super::ObjectChange::after)) that holds it — the same value, held once. An Ingress's paths are
/// both a field and part of its views; for a large application they were a fifth of the plan.
/// Compared, shown and saved as the value it stands for.
#[derive(Clone)]
pub struct FieldValue(FieldRepr);

#[derive(Clone)]
enum FieldRepr {
    Own(Value),
    InView { view: View, pointer: Box<str> },
}

impl FieldValue {
    /// The value at the JSON `pointer` (RFC 6901) of `view`, which is `of` (held or not);
    /// `None` when there is none.
    pub fn in_view(view: &View, of: &Value, pointer: &str) -> Option<FieldValue> {
        of.pointer(pointer)?;
        Some(FieldValue(FieldRepr::InView {
            view: view.clone(),
            pointer: pointer.into(),
        }))
    }

    /// The value: borrowed when own or in a held view.
    pub fn value(&self) -> Cow<'_, Value> {
        match &self.0 {
            FieldRepr::Own(v) => Cow::Borrowed(v),
            // Views are never changed once made (they are shared), so the pointer that
            // resolved when this was made still does.
            FieldRepr::InView { view, pointer } => {
                view.pointer(pointer).unwrap_or(Cow::Owned(Value::Null))
            }
        }
    }
}

impl From<Value> for FieldValue {
    fn from(v: Value) -> FieldValue {
        FieldValue(FieldRepr::Own(v))
    }
}

impl PartialEq for FieldValue {
    fn eq(&self, other: &FieldValue) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Serialize for FieldValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for FieldValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FieldValue, D::Error> {
        Value::deserialize(d).map(FieldValue::from)
    }
}
