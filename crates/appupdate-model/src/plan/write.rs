//! The request that realises a change ([`Write`]) and the live identity it is conditional on
//! ([`Base`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use std::sync::Arc;

use super::{Action, PlanError};

/// Identity of a live object: the `metadata.resourceVersion` and `metadata.uid` that every
/// write to it is conditional on. Both are non-empty by construction — a patch carrying an
/// empty `resourceVersion` is applied unconditionally by the server, so there is no way to
/// make one (a saved plan with an empty one does not load either).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BaseFields", rename_all = "camelCase", deny_unknown_fields)]
pub struct Base {
    resource_version: String,
    uid: String,
}

/// [`Base`] as read from a saved plan, before the check that neither is empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BaseFields {
    resource_version: String,
    uid: String,
}

impl TryFrom<BaseFields> for Base {
    type Error = &'static str;

    fn try_from(f: BaseFields) -> Result<Base, Self::Error> {
        Base::new(f.resource_version, f.uid).ok_or("resourceVersion and uid must not be empty")
    }
}

impl Base {
    /// `None` when either is empty.
    pub fn new(resource_version: impl Into<String>, uid: impl Into<String>) -> Option<Base> {
        let (resource_version, uid) = (resource_version.into(), uid.into());
        (!resource_version.is_empty() && !uid.is_empty()).then_some(Base {
            resource_version,
            uid,
        })
    }

    /// Reads `metadata.resourceVersion` and `metadata.uid` of a live object; `None` when the
    /// object lacks either (a server always sets both).
    pub fn of(live: &Value) -> Option<Base> {
        let meta = &live["metadata"];
        Base::new(
            meta["resourceVersion"].as_str().unwrap_or_default(),
            meta["uid"].as_str().unwrap_or_default(),
        )
    }

    /// [`Base::of`] for an object this run is about to write.
    pub fn required(live: &Value, reference: &str) -> Result<Base, PlanError> {
        Base::of(live).ok_or_else(|| PlanError::NoPrecondition {
            reference: reference.to_owned(),
        })
    }

    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }
}

/// How a patch body is interpreted by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (lists such as containers merged by key).
    Strategic,
}

/// The minimal request that realises a change. A write to a live object carries that
/// object's [`Base`], so it is conditional by construction: the apply step cannot send one
/// without its precondition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "request",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Write {
    /// A complete new object. It needs no precondition: a create fails when the name is
    /// taken (AlreadyExists).
    Create { body: Arc<Value> },
    /// Only the changed fields, sent with `metadata.resourceVersion` set to `base`'s.
    Patch {
        base: Base,
        patch_type: PatchType,
        body: Arc<Value>,
    },
    /// A delete with `base`'s uid and resourceVersion as preconditions.
    Delete { base: Base },
}

impl Write {
    /// The action this request performs.
    pub fn action(&self) -> Action {
        match self {
            Write::Create { .. } => Action::Create,
            Write::Patch { .. } => Action::Update,
            Write::Delete { .. } => Action::Delete,
        }
    }

    /// The live object this request is conditional on (`None` for a create).
    pub fn base(&self) -> Option<&Base> {
        match self {
            Write::Create { .. } => None,
            Write::Patch { base, .. } | Write::Delete { base } => Some(base),
        }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Write {
    /// A request of `action` with an empty body against a live object with resourceVersion `1`
    /// and uid `u1`, for tests of what looks only at the action.
    pub fn sample(action: Action) -> Option<Write> {
        let base = || Base::new("1", "u1").unwrap_or_else(|| unreachable!());
        match action {
            Action::Unchanged => None,
            Action::Create => Some(Write::Create {
                body: Value::Null.into(),
            }),
            Action::Update => Some(Write::Patch {
                base: base(),
                patch_type: PatchType::Merge,
                body: Value::Null.into(),
            }),
            Action::Delete => Some(Write::Delete { base: base() }),
        }
    }
}
