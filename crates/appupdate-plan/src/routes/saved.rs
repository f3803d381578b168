//! The checks a saved plan's route updaters pass when it is loaded.

use serde_json::Value;

use super::{ScopeGroup, normalize_scopes, route_name, scope_identifier};
use crate::updaters::Refusal;
use appupdate_model::names;
use appupdate_model::plan::Kind;

/// A saved route's scope group, checked as an endpoints file is: its paths and scopes through
/// the endpoints file's guard, its scopes a set, its identifier theirs.
pub(crate) fn saved_group(
    scopes: &[String],
    identifier: &str,
    paths: &[String],
) -> Result<ScopeGroup, Refusal> {
    let set = appupdate_model::intent::RouteSet {
        groups: vec![appupdate_model::intent::GroupRecord {
            scopes: scopes.to_vec(),
            paths: paths.to_vec(),
        }],
        ..Default::default()
    };
    set.endpoints_file("the saved route")?;
    if normalize_scopes(scopes) != scopes {
        return Err(Refusal::ScopesNotASet);
    }
    if identifier != scope_identifier(scopes) {
        return Err(Refusal::Identifier(identifier.to_owned()));
    }
    let mut sorted = paths.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted != paths || paths.is_empty() {
        return Err(Refusal::PathsNotASet);
    }
    Ok(ScopeGroup {
        scopes: scopes.to_vec(),
        identifier: identifier.to_owned(),
        paths: paths.to_vec(),
    })
}

/// A saved route object (to write or to remove): planned for the application, under a valid
/// object name.
pub(crate) fn saved_owned(owner: &str, app: &str, name: &str) -> Result<(), Refusal> {
    if owner != app {
        return Err(Refusal::OtherApplication {
            owner: owner.to_owned(),
            app: app.to_owned(),
        });
    }
    if !names::is_dns1123_subdomain(name) {
        return Err(Refusal::ObjectName(name.to_owned()));
    }
    Ok(())
}

/// A saved route's (or SecurityPolicy's) name: the one its style gives a new route of the group
/// (`<app>-<identifier>`), or — only where its approved change updates a live object
/// (`creates` is false) — the name of the live route it matched, which the live object's labels
/// must then show is the group's ([`check_managed`](super::check_managed)). A saved plan therefore never creates an
/// object under a name of its own.
pub(crate) fn saved_name(
    kind: Kind,
    app: &str,
    identifier: &str,
    name: &str,
    creates: bool,
) -> Result<(), Refusal> {
    let generated = route_name(kind, app, identifier).map_err(|e| e.to_string())?;
    if creates && name != generated {
        return Err(Refusal::NameNotGenerated {
            kind,
            name: name.to_owned(),
            generated,
        });
    }
    Ok(())
}

/// A saved route's backend port (`port` is where its style keeps it): a port number.
pub(crate) fn saved_port(port: &Value) -> Result<i32, Refusal> {
    port.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| (1..=65535).contains(n))
        .ok_or(Refusal::NoPort)
}
