//! Which saved plans wrote an object: the annotation [`APPLIED_PLANS`].
//!
//! A saved plan (`apply FILE`) applies at most once, and the proof of that lives on the objects
//! it writes, not in the history ConfigMap (which anyone who may write ConfigMaps can prune,
//! spoil or freeze). Every object a saved plan creates or updates carries, in its
//! `metadata.annotations` — never in the pod template, which would restart every pod — the
//! checksums of the saved plans applied to it, oldest first, the newest [`KEPT`] of them.
//! The annotation is written in the same conditional write as the plan's change: each object
//! of a saved plan carries the plan's checksum as its mark (`Planned::mark`), and [`replan`],
//! the one place a planned object is planned again, adds it ([`mark`]) to every change it
//! computes, so that a retry after a conflict writes it again. It
//! is shown in the diff like any value written, and it is not a guarded value (it is outside
//! the plan file's checksummed content: the checksum cannot name itself). An undo never
//! removes it.
//!
//! [`state`] then tells, from the objects read back when the plan is applied, whether it was
//! applied already: only when an object carries the checksum **and** every value the plan
//! changes holds its planned value. A checksum on an object whose planned values are
//! elsewhere (undone since, changed by hand) means the plan was applied and then changed: a
//! new plan is needed. A checksum written by someone else on an object without the planned
//! values therefore cannot make a cluster count as done.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::history::is_checksum;
use crate::updaters::Planned;
use appupdate_model::plan::{ObjectChange, PlanError, View, Write};

/// The annotation: the checksums of the saved plans applied to the object, comma-separated,
/// oldest first.
pub const APPLIED_PLANS: &str = "kubectl-appupdate/applied-plans";

/// The most checksums the annotation keeps (the newest).
pub const KEPT: usize = 20;

/// The checksums `live` carries in [`APPLIED_PLANS`], oldest first; anything in it that is
/// not a checksum is not one.
pub fn checksums(live: &Value) -> Vec<&str> {
    live["metadata"]["annotations"][APPLIED_PLANS]
        .as_str()
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|c| is_checksum(c))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `live` carries `checksum` in [`APPLIED_PLANS`].
pub fn carries(live: &Value, checksum: &str) -> bool {
    checksums(live).contains(&checksum)
}

/// The annotation's value once `checksum` is added to what `live` carries: at most [`KEPT`],
/// the newest last.
pub fn with(live: Option<&Value>, checksum: &str) -> String {
    let mut list: Vec<&str> = live
        .map(checksums)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| *c != checksum)
        .collect();
    list.push(checksum);
    let skip = list.len().saturating_sub(KEPT);
    list[skip..].join(",")
}

fn set_annotation(object: &mut Value, value: &str) {
    let Value::Object(object) = object else {
        return;
    };
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let annotations = &mut meta["annotations"];
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    annotations[APPLIED_PLANS] = Value::String(value.to_owned());
}

/// `change` (planned against `live`) writing `checksum` into [`APPLIED_PLANS`] too, and its
/// views showing the annotation before and after. Unchanged objects and deletes stay as they are.
pub fn mark(change: &mut ObjectChange, live: Option<&Value>, checksum: &str) {
    let value = with(live, checksum);
    match &mut change.write {
        Some(Write::Create { body }) | Some(Write::Patch { body, .. }) => {
            set_annotation(Arc::make_mut(body), &value);
        }
        Some(Write::Delete { .. }) | None => return,
    }
    let (before, after) = change.views();
    let before = before.map(|b| {
        let mut b = b.into_owned();
        if let Some(now) = live.and_then(|l| l["metadata"]["annotations"][APPLIED_PLANS].as_str()) {
            set_annotation(&mut b, now);
        }
        b
    });
    let after = after.map(|a| {
        let mut a = a.into_owned();
        set_annotation(&mut a, &value);
        a
    });
    change.before = before.map(View::from);
    change.after = after.map(View::from);
}

/// `p`'s change planned again against `live` (the object as read now) by its updater, with
/// its saved plan's mark ([`mark`]) when it has one. The one place a planned object's updater
/// is called again: the re-read of a saved plan before it is shown, and every retry after a
/// conflict.
pub fn replan(p: &Planned, live: Option<&Value>) -> Result<ObjectChange, PlanError> {
    let mut change = p.updater.plan(&p.change.namespace, live)?;
    if let Some(checksum) = &p.mark {
        mark(&mut change, live, checksum);
    }
    Ok(change)
}

/// Where a saved plan stands in one cluster, from its objects as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// No object shows that it was applied, or those that do hold their planned values and
    /// others are left to write (a run that stopped part way): apply what is left.
    Pending,
    /// Objects carry the checksum and every planned value holds: nothing to write again.
    Applied,
    /// `reference` carries the checksum but a value the plan changes is elsewhere now.
    AppliedThenChanged { reference: String },
}

/// One object of a saved plan as read back: its reference, whether it carries the plan's
/// checksum, and whether every value the plan changes holds its planned value.
#[derive(Clone, Debug)]
pub struct ReadBack {
    pub reference: String,
    pub carries: bool,
    pub holds: bool,
}

/// Where the plan stands given every object it changes, as read back ([`State`]).
pub fn state(objects: &[ReadBack]) -> State {
    if let Some(changed) = objects.iter().find(|o| o.carries && !o.holds) {
        return State::AppliedThenChanged {
            reference: changed.reference.clone(),
        };
    }
    if objects.iter().any(|o| o.carries) && objects.iter().all(|o| o.holds) {
        return State::Applied;
    }
    State::Pending
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sum(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    #[test]
    fn the_list_keeps_the_newest_and_ignores_junk() {
        let live = json!({"metadata": {"annotations": {
            APPLIED_PLANS: format!("{},junk, {}", sum('a'), sum('b'))
        }}});
        assert_eq!(checksums(&live), vec![sum('a'), sum('b')]);
        assert!(carries(&live, &sum('b')));
        assert!(!carries(&live, "junk"));
        assert_eq!(
            with(Some(&live), &sum('a')),
            format!("{},{}", sum('b'), sum('a'))
        );
        assert_eq!(with(None, &sum('c')), sum('c'));
        let many: Vec<String> = "0123456789abcdef0123456789"
            .chars()
            .map(|c| format!("sha256:{}{}", c, "0".repeat(63)))
            .collect();
        let live = json!({"metadata": {"annotations": {APPLIED_PLANS: many.join(",")}}});
        let kept = with(Some(&live), &sum('f'));
        let kept: Vec<&str> = kept.split(',').collect();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept.last(), Some(&sum('f').as_str()));
        assert_eq!(kept[0], many[many.len() - KEPT + 1]);
    }

    #[test]
    fn a_forged_checksum_without_the_values_is_not_applied() {
        let o = |carries, holds| ReadBack {
            reference: "deployment.apps/web".into(),
            carries,
            holds,
        };
        assert_eq!(state(&[o(true, true)]), State::Applied);
        assert_eq!(
            state(&[o(true, false)]),
            State::AppliedThenChanged {
                reference: "deployment.apps/web".into()
            }
        );
        assert_eq!(state(&[o(false, false)]), State::Pending);
        // Stopped part way: what was written holds, the rest is still to write.
        assert_eq!(state(&[o(true, true), o(false, false)]), State::Pending);
        // Someone else made the change, no plan's mark: nothing to write, nothing applied.
        assert_eq!(state(&[o(false, true)]), State::Pending);
        assert_eq!(state(&[]), State::Pending);
    }

    #[test]
    fn marking_writes_and_shows_the_annotation() {
        let mut change = ObjectChange::sample("web-a", appupdate_model::plan::Action::Update);
        change.before = Some(View::from(json!({"metadata": {"name": "web-a"}})));
        change.after = Some(View::from(json!({"metadata": {"name": "web-a"}})));
        if let Some(Write::Patch { body, .. }) = &mut change.write {
            *body = Arc::new(json!({"spec": {}}));
        }
        let live = json!({"metadata": {"annotations": {APPLIED_PLANS: sum('a')}}});
        mark(&mut change, Some(&live), &sum('b'));
        let both = format!("{},{}", sum('a'), sum('b'));
        let Some(Write::Patch { body, .. }) = &change.write else {
            panic!("a patch")
        };
        assert_eq!(body["metadata"]["annotations"][APPLIED_PLANS], json!(both));
        let (before, after) = change.views();
        assert_eq!(
            before.unwrap()["metadata"]["annotations"][APPLIED_PLANS],
            json!(sum('a'))
        );
        assert_eq!(
            after.unwrap()["metadata"]["annotations"][APPLIED_PLANS],
            json!(both)
        );
        // Nothing to write: nothing marked.
        let mut unchanged = ObjectChange::sample("web-b", appupdate_model::plan::Action::Unchanged);
        mark(&mut unchanged, Some(&live), &sum('b'));
        assert!(unchanged.write.is_none() && unchanged.after.is_none());
    }
}
