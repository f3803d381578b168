//! The focused before/after views of an object that the user is shown ([`View`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A focused view ([`ObjectChange::before`](super::ObjectChange::before), [`ObjectChange::after`](super::ObjectChange::after)): held as a value, or made
/// from what the change holds anyway each time it is read — an updated Ingress's after-view is
/// its before-view with its patch applied, so a large application does not hold every route
/// twice. Data only: the renderer writes the text. Compared, shown and saved as the value it
/// stands for.
#[derive(Clone)]
pub struct View(pub(super) ViewRepr);

#[derive(Clone)]
pub(super) enum ViewRepr {
    Held(Arc<Value>),
    Made(Arc<dyn MakeView>),
}

/// Makes a view from parts a change holds; the same view each time (the parts are shared and
/// never changed).
pub trait MakeView: Send + Sync {
    fn make(&self) -> Value;

    /// The view this one is made from, when it is made from one ([`MakeView::make_from`]).
    fn base(&self) -> Option<&View> {
        None
    }

    /// The view made from `base`, the value of [`MakeView::base`] (read once by a caller that
    /// needs both).
    fn make_from(&self, base: &Value) -> Value {
        let _ = base;
        self.make()
    }

    /// The parts the view is made of, when it can be written from them without being made
    /// ([`crate::view_parts::Part`]'s `Serialize`); `None`: it is made to be written.
    fn parts(&self) -> Option<crate::view_parts::Part<'_>> {
        None
    }
}

impl View {
    /// A view made from `parts` each time it is read.
    pub fn made(parts: impl MakeView + 'static) -> View {
        View(ViewRepr::Made(Arc::new(parts)))
    }

    /// The view: borrowed when held, read or made when not.
    pub fn get(&self) -> Cow<'_, Value> {
        match &self.0 {
            ViewRepr::Held(v) => Cow::Borrowed(v),
            ViewRepr::Made(parts) => Cow::Owned(parts.make()),
        }
    }

    /// The same view held the same way (one `Arc`), not only an equal one.
    pub(super) fn same(&self, other: &View) -> bool {
        match (&self.0, &other.0) {
            (ViewRepr::Held(a), ViewRepr::Held(b)) => Arc::ptr_eq(a, b),
            (ViewRepr::Made(a), ViewRepr::Made(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The part at the JSON `pointer` (RFC 6901); `None` when there is none.
    pub(super) fn pointer(&self, pointer: &str) -> Option<Cow<'_, Value>> {
        match self.get() {
            Cow::Borrowed(v) => v.pointer(pointer).map(Cow::Borrowed),
            Cow::Owned(mut v) => v.pointer_mut(pointer).map(|p| Cow::Owned(p.take())),
        }
    }
}

impl From<Value> for View {
    fn from(v: Value) -> View {
        View(ViewRepr::Held(Arc::new(v)))
    }
}

impl From<Arc<Value>> for View {
    fn from(v: Arc<Value>) -> View {
        View(ViewRepr::Held(v))
    }
}

impl PartialEq for View {
    fn eq(&self, other: &View) -> bool {
        self.same(other) || *self.get() == *other.get()
    }
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

/// A view made when read is written from its parts when it has them: a large plan's
/// after-views are written without being made.
impl Serialize for View {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            ViewRepr::Made(made) => match made.parts() {
                Some(parts) => parts.serialize(s),
                None => made.make().serialize(s),
            },
            ViewRepr::Held(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for View {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<View, D::Error> {
        Value::deserialize(d).map(View::from)
    }
}
