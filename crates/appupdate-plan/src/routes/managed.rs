//! The live managed routes: which objects are ours, how each group finds its live route
//! ([`match_live`]), and the deletion of the ones no group keeps.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{APP_LABEL, IDENTIFIER_LABEL, ScopeGroup, route_name};
use appupdate_model::plan::{Kind, PlanError};

pub(crate) fn name_of(obj: &Value) -> Option<&str> {
    obj["metadata"]["name"].as_str()
}

pub(crate) fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// Refuses a live object under a route's name that is not this group's managed route (a create
/// that met an unmanaged object of the same name): it is never updated.
pub(crate) fn check_managed(
    kind: Kind,
    live: &Value,
    name: &str,
    app: &str,
    identifier: &str,
) -> Result<(), PlanError> {
    if label(live, APP_LABEL) == Some(app) && label(live, IDENTIFIER_LABEL) == Some(identifier) {
        return Ok(());
    }
    Err(PlanError::Unexpected {
        reference: format!("{}/{name}", kind.kubectl_name()),
        message: format!(
            "exists but is not the managed {kind} of this scope group (it lacks the labels {APP_LABEL}={app} and {IDENTIFIER_LABEL}={identifier}), so it is left alone; rename or remove it and run again"
        ),
    })
}

/// The owned labels of a new route, as field changes.
pub(crate) fn label_fields(app: &str, identifier: &str) -> Vec<appupdate_model::plan::FieldChange> {
    use appupdate_model::plan::FieldChange;
    vec![
        FieldChange::new(
            format!("metadata.labels[{APP_LABEL}]"),
            None,
            Some(json!(app)),
        ),
        FieldChange::new(
            format!("metadata.labels[{IDENTIFIER_LABEL}]"),
            None,
            Some(json!(identifier)),
        ),
    ]
}

/// Refuses a live object that is not one of `app`'s managed routes (it lacks the label `app`
/// with the application's name or the `identifier` label): a saved plan or an undo never
/// deletes or changes it.
pub(crate) fn fence(kind: Kind, live: &Value, name: &str, app: &str) -> Result<(), PlanError> {
    if label(live, APP_LABEL) == Some(app) && label(live, IDENTIFIER_LABEL).is_some() {
        return Ok(());
    }
    Err(PlanError::Unexpected {
        reference: format!("{}/{name}", kind.kubectl_name()),
        message: format!(
            "is not a managed route of {app} (it lacks the labels {APP_LABEL}={app} and {IDENTIFIER_LABEL}), so it is left alone; nothing was written"
        ),
    })
}

/// The change that deletes a live route (or SecurityPolicy) of `app`, or nothing when it is gone
/// already. `view` is what the diff shows of it, `info` what it serves (a route's). A live object that is not one of the
/// application's managed routes is refused ([`fence`]).
pub(crate) fn deletion(
    kind: Kind,
    namespace: &str,
    app: &str,
    name: &str,
    live: Option<&Value>,
    view_and_info: impl FnOnce(&Value) -> (Value, Option<appupdate_model::plan::RouteInfo>),
) -> Result<appupdate_model::plan::ObjectChange, PlanError> {
    use appupdate_model::plan::{Base, FieldChange, ObjectChange, View, Write};
    let Some(live) = live else {
        return Ok(ObjectChange {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            live: None,
            fields: Vec::new(),
            before: None,
            after: None,
            write: None,
            route: None,
        });
    };
    fence(kind, live, name, app)?;
    let (view, info) = view_and_info(live);
    let view = View::from(view);
    let reference = format!("{}/{name}", kind.kubectl_name());
    Ok(ObjectChange {
        kind,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        live: Base::of(live),
        fields: vec![FieldChange::whole(Some(&view), None)],
        before: Some(view),
        after: None,
        write: Some(Write::Delete {
            base: Base::required(live, &reference)?,
        }),
        route: info,
    })
}

/// The route each group gets: the live route it updates (by name) or none (a create), and the
/// live managed routes no group keeps (deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// Per group, in the order given: the live name, if one matched.
    pub groups: Vec<Option<String>>,
    /// Live managed routes to delete, sorted.
    pub extra: Vec<String>,
}

/// Matches live managed routes to groups by the identifier label (see the module docs). Live
/// objects without both `app=<app>` and the identifier label are ignored.
pub fn match_live(app: &str, kind: Kind, groups: &[ScopeGroup], live: &[Value]) -> Matched {
    let mut by_id: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for obj in live {
        if label(obj, APP_LABEL) != Some(app) {
            continue;
        }
        if let (Some(id), Some(name)) = (label(obj, IDENTIFIER_LABEL), name_of(obj)) {
            by_id.entry(id).or_default().push(name);
        }
    }
    for names in by_id.values_mut() {
        names.sort_unstable();
        names.dedup();
    }
    let mut extra = Vec::new();
    let matched = groups
        .iter()
        .map(|g| {
            let names = by_id.remove(g.identifier.as_str())?;
            let wanted = route_name(kind, app, &g.identifier).ok();
            let keep = names
                .iter()
                .copied()
                .find(|n| Some(*n) == wanted.as_deref())
                .or_else(|| names.first().copied())?
                .to_owned();
            extra.extend(names.into_iter().filter(|n| *n != keep).map(str::to_owned));
            Some(keep)
        })
        .collect();
    extra.extend(by_id.into_values().flatten().map(str::to_owned));
    extra.sort();
    Matched {
        groups: matched,
        extra,
    }
}
