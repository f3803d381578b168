//! The approved-diff guard: whether a change computed again after a conflict is still the one
//! the user approved ([`recheck`]).

use super::{Action, ObjectChange, Write};

/// Outcome of re-planning an object after a conflict or a failed precondition.
#[derive(Clone, Debug, PartialEq)]
pub enum Recheck {
    /// The fresh change writes exactly (a subset of) what was approved: send it.
    Proceed(ObjectChange),
    /// Someone else already made the approved change; nothing left to write.
    AlreadyDone,
    /// A field this run changes no longer holds the value the user was shown.
    Tripped(ObjectChange),
}

/// The approved-diff guard. `fresh` is the updater's change against the re-read object.
///
/// Proceeds only when every field the fresh change would write was approved with the same
/// before and after values, and the action is the same (and, for deletes, the object is the
/// same incarnation). Fields that already hold the approved value simply drop out of `fresh`.
pub fn recheck(approved: &ObjectChange, fresh: ObjectChange) -> Recheck {
    if fresh.action() == Action::Unchanged {
        return Recheck::AlreadyDone;
    }
    if fresh.action() != approved.action() {
        return Recheck::Tripped(fresh);
    }
    if let (
        Some(Write::Delete {
            base: approved_base,
        }),
        Some(Write::Delete { base }),
    ) = (&approved.write, &fresh.write)
    {
        let same_object = approved_base.uid() == base.uid();
        if !same_object || approved.fields != fresh.fields {
            return Recheck::Tripped(fresh);
        }
        return Recheck::Proceed(fresh);
    }
    let all_approved = fresh.fields.iter().all(|f| approved.fields.contains(f));
    if all_approved {
        Recheck::Proceed(fresh)
    } else {
        Recheck::Tripped(fresh)
    }
}
