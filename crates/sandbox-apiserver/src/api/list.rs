//! LIST and DELETE of a collection: `ListOptions` and their validation, selectors,
//! all-namespace lists, the watch cache and exact past revisions, `limit`/`continue` (etcd's
//! base64 token), items in key order, Tables and partial metadata.

use serde_json::{Value, json};

use super::request::{Output, RequestInfo, not_acceptable, query_get};
use super::table::{Include, partial, table_for};
use crate::kinds::{self, Kind};
use crate::model::gojson;
use crate::model::object::list_body;
use crate::model::status::{self, FieldError, StatusBody};
use crate::store::{Outcome, Selectors, Store};

/// The query of a LIST or WATCH, decoded and validated as `ListOptions`.
pub struct ListOptions {
    pub sel: Selectors,
    pub limit: i64,
    pub resource_version: String,
    pub match_: String,
    pub continue_: String,
    pub timeout_seconds: Option<i64>,
    pub bookmarks: bool,
}

/// `strconv.ParseInt` of a query parameter, with its 400.
fn parse_int(v: Option<&str>) -> Result<Option<i64>, StatusBody> {
    match v {
        None => Ok(None),
        Some(s) => s.parse::<i64>().map(Some).map_err(|_| {
            status::bad_request(format!(
                "strconv.ParseInt: parsing {}: {}",
                status::go_quote(s),
                if s.trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
                    && !s.trim_start_matches(['-', '+']).is_empty()
                {
                    "value out of range"
                } else {
                    "invalid syntax"
                }
            ))
        }),
    }
}

/// A boolean query parameter as the parameter codec reads it: anything but `0`/`false` is true.
fn codec_bool(v: Option<&str>) -> bool {
    v.is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
}

impl ListOptions {
    /// Decode (400), validate (422 `ListOptions`), then the field selector's labels (400).
    pub fn parse(
        k: &dyn Kind,
        query: &[(String, String)],
        watch: bool,
    ) -> Result<ListOptions, StatusBody> {
        let limit = parse_int(query_get(query, "limit"))?.unwrap_or(0);
        let timeout_seconds = parse_int(query_get(query, "timeoutSeconds"))?;
        let resource_version = query_get(query, "resourceVersion")
            .unwrap_or("")
            .to_string();
        let match_ = query_get(query, "resourceVersionMatch")
            .unwrap_or("")
            .to_string();
        let continue_ = query_get(query, "continue").unwrap_or("").to_string();
        let send_initial = query_get(query, "sendInitialEvents").is_some();
        let mut errs = Vec::new();
        let forbidden = |m: &str| FieldError::forbidden("resourceVersionMatch", m);
        if watch {
            if send_initial {
                if match_ != "NotOlderThan" {
                    errs.push(forbidden(
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                errs.push(FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                ));
            }
            if !match_.is_empty() {
                if !send_initial {
                    errs.push(forbidden(
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if match_ != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        "resourceVersionMatch",
                        &status::go_quote(&match_),
                        &["NotOlderThan"],
                    ));
                }
                if !continue_.is_empty() {
                    errs.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if !match_.is_empty() {
                if resource_version.is_empty() {
                    errs.push(forbidden(
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if !continue_.is_empty() {
                    errs.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if match_ != "Exact" && match_ != "NotOlderThan" {
                    errs.push(FieldError::not_supported(
                        "resourceVersionMatch",
                        &status::go_quote(&match_),
                        &["Exact", "NotOlderThan", ""],
                    ));
                }
                if match_ == "Exact" && resource_version == "0" {
                    errs.push(forbidden(
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if send_initial {
                errs.push(FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if !errs.is_empty() {
            return Err(status::invalid_kind(
                "meta.k8s.io",
                "ListOptions",
                "",
                &errs,
            ));
        }
        let sel = Selectors::parse(
            k,
            query_get(query, "labelSelector"),
            query_get(query, "fieldSelector"),
        )?;
        Ok(ListOptions {
            sel,
            limit,
            resource_version,
            match_,
            continue_,
            timeout_seconds,
            bookmarks: codec_bool(query_get(query, "allowWatchBookmarks")),
        })
    }
}

/// The storage's parse of a resourceVersion (`""` and `"0"`: none): its error quotes the field.
pub fn parse_rv(rv: &str) -> Result<u64, String> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|_| {
        format!(
            "resourceVersion: Invalid value: {}: strconv.ParseUint: parsing {}: invalid syntax",
            status::go_quote(rv),
            status::go_quote(rv)
        )
    })
}

/// The watch cache's answer to a version it has not reached: 504 Timeout.
pub fn too_large(requested: u64, current: u64, retry: u64) -> StatusBody {
    let mut details = json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]});
    let mut s = StatusBody::new(
        504,
        "Timeout",
        format!("Timeout: Too large resource version: {requested}, current: {current}"),
        None,
    );
    if retry > 0 {
        details["retryAfterSeconds"] = json!(retry);
        s.headers.push(("Retry-After".into(), retry.to_string()));
    }
    s.details = Some(details);
    s
}

/// LIST as the registry serves it: from the current state (no resourceVersion), from the
/// watch cache (`resourceVersion` `0` or another without `limit`: the whole list, no
/// pagination), or at an exact past revision (`resourceVersionMatch=Exact`, continue
/// tokens); `limit`/`continue` pages; `remainingItemCount` only without selectors.
pub fn list(
    store: &Store,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    output: Output,
) -> Result<Outcome, StatusBody> {
    let opts = ListOptions::parse(k, query, false)?;
    let include = match output {
        Output::Table(_) => Include::parse(query_get(query, "includeObject"))?,
        _ => Include::Metadata,
    };
    let st = store.read();
    // The key range the storage reads (ListPredicate): the path's namespace, else the one a
    // field selector requires; a required name as well makes it that one key (no paging). A
    // continued list is never narrowed by its selectors (its token may then point elsewhere).
    let required = |field: &str| {
        if !opts.continue_.is_empty() {
            return None;
        }
        opts.sel
            .field
            .terms
            .iter()
            .find(|t| t.field == field && !t.negate)
            .map(|t| t.value.clone())
    };
    let range_ns: Option<String> = if !info.namespace.is_empty() {
        Some(info.namespace.clone())
    } else {
        required("metadata.namespace")
            .filter(|n| k.api().namespaced && crate::model::names::is_dns1123_label(n).is_empty())
    };
    let single_key =
        required("metadata.name").is_some() && (range_ns.is_some() || !k.api().namespaced);
    let ns = range_ns.as_deref();
    let namespaced_prefix = k.api().namespaced && ns.is_some();
    let key_of = |o: &Value| {
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let ns = o
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if namespaced_prefix || ns.is_empty() {
            name.to_string()
        } else {
            format!("{ns}/{name}")
        }
    };
    let paging = opts.limit > 0;
    // (snapshot revision, start after this key)
    let (at, start_after): (Option<u64>, Option<String>) = if !opts.continue_.is_empty() {
        let (key, rv) = decode_continue(&opts.continue_)
            .map_err(|e| status::bad_request(format!("invalid continue token: {e}")))?;
        if !opts.resource_version.is_empty() && opts.resource_version != "0" {
            return Err(status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        (Some(rv), Some(key))
    } else {
        let from_cache = !opts.resource_version.is_empty()
            && (opts.resource_version == "0" || !paging)
            && opts.match_ != "Exact";
        if from_cache {
            let rv =
                parse_rv(&opts.resource_version).map_err(|m| StatusBody::new(500, "", m, None))?;
            if rv > st.rv {
                return Err(too_large(rv, st.rv, 1));
            }
            let items: Vec<Value> = st.select(k, ns, &opts.sel).into_iter().cloned().collect();
            return Ok(Outcome {
                code: 200,
                body: render_list(k, items, st.rv, None, output, include)?,
                warnings: vec![],
            });
        }
        let rv = parse_rv(&opts.resource_version)
            .map_err(|m| status::bad_request(format!("invalid resource version: {m}")))?;
        if rv > st.rv {
            return Err(too_large(rv, st.rv, 0));
        }
        // Exact, or a version without a match (the legacy case), reads at that revision.
        ((opts.match_ == "Exact" || opts.match_.is_empty()) && rv > 0)
            .then_some(rv)
            .map_or((None, None), |rv| (Some(rv), None))
    };
    let list_rv = at.unwrap_or(st.rv);
    let selected: Vec<Value> = match at {
        Some(rv) => st.select_at(k, ns, &opts.sel, rv).ok_or_else(|| {
            StatusBody::new(
                410,
                "Expired",
                if start_after.is_some() {
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
                } else {
                    "The resourceVersion for the provided list is too old."
                },
                Some(json!({})),
            )
        })?,
        None => st.select(k, ns, &opts.sel).into_iter().cloned().collect(),
    };
    let mut items: Vec<Value> = selected
        .into_iter()
        .filter(|o| {
            start_after
                .as_ref()
                .is_none_or(|after| key_of(o).as_str() > after.as_str())
        })
        .collect();
    let mut cont = None;
    if paging && !single_key && items.len() as i64 >= opts.limit {
        let remaining = items.len() - opts.limit as usize;
        items.truncate(opts.limit as usize);
        // etcd says there is more when any key of the range, matching or not, follows the
        // last one returned.
        if let Some(last) = items.last() {
            let last_key = key_of(last);
            let everything = Selectors::default();
            let more = match at {
                Some(rv) => st
                    .select_at(k, ns, &everything, rv)
                    .unwrap_or_default()
                    .iter()
                    .any(|o| key_of(o) > last_key),
                None => st
                    .select(k, ns, &everything)
                    .into_iter()
                    .any(|o| key_of(o) > last_key),
            };
            if more {
                let filtered =
                    !opts.sel.label.requirements.is_empty() || !opts.sel.field.terms.is_empty();
                cont = Some((
                    encode_continue(&last_key, list_rv),
                    (!filtered).then_some(remaining),
                ));
            }
        }
    }
    Ok(Outcome {
        code: 200,
        body: render_list(k, items, list_rv, cont, output, include)?,
        warnings: vec![],
    })
}

/// A list as the client asked for it: the kind's list, a Table or a PartialObjectMetadataList.
fn render_list(
    k: &'static dyn Kind,
    items: Vec<Value>,
    rv: u64,
    cont: Option<(String, Option<usize>)>,
    output: Output,
    include: Include,
) -> Result<Value, StatusBody> {
    Ok(match output {
        Output::Partial(_) => return Err(not_acceptable(k, true)),
        Output::Table(version) => table_for(k, &items, Some(rv), cont, version, include),
        Output::PartialList(version) => {
            let mut meta = serde_json::Map::new();
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
            if let Some((c, remaining)) = cont {
                meta.insert("continue".into(), json!(c));
                if let Some(n) = remaining {
                    meta.insert("remainingItemCount".into(), json!(n));
                }
            }
            // The metadata as stored, whatever version was asked for.
            let items: Vec<Value> = items.iter().map(|o| partial(o, version)).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": meta, "items": items})
        }
        Output::Json | Output::Yaml => kinds::list_to_wire(
            k,
            list_body(
                k.api(),
                items.into_iter().map(|o| kinds::list_item(k, o)).collect(),
                rv,
                cont,
            ),
        ),
    })
}

/// etcd's continue token: base64url (unpadded) JSON of the version, the revision of the
/// first page and the key to start after.
fn encode_continue(last_key: &str, rv: u64) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{last_key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(gojson::compact(&token))
}

/// `storage.DecodeContinue`: (the key to start after, the revision), or the error text.
fn decode_continue(token: &str) -> Result<(String, u64), String> {
    use base64::Engine;
    const INVALID: &str = "continue key is not valid";
    // Go's RawURLEncoding: no padding, trailing bits not checked.
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
    );
    let bytes = engine.decode(token).map_err(|e| {
        format!(
            "{INVALID}: illegal base64 data at input byte {}",
            base64_offset(&e)
        )
    })?;
    if let Some(msg) = gojson::syntax_error(&bytes) {
        return Err(format!("{INVALID}: {msg}"));
    }
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{INVALID}: {e}"))?;
    let version = v.get("v").and_then(Value::as_str).unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(format!(
            "continue key is not valid: encoded version is not supported {version}"
        ));
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(format!(
            "{INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(format!(
            "{INVALID}: encoded start key empty (version meta.k8s.io/v1)"
        ));
    }
    Ok((
        start.trim_end_matches('\u{0}').to_string(),
        rv.max(0) as u64,
    ))
}

fn base64_offset(e: &base64::DecodeError) -> usize {
    match e {
        base64::DecodeError::InvalidByte(i, _) | base64::DecodeError::InvalidLastSymbol(i, _) => *i,
        base64::DecodeError::InvalidLength(n) => *n,
        base64::DecodeError::InvalidPadding => 0,
    }
}

/// DELETE of a collection: every selected object, deleted one by one.
pub fn delete_collection(
    store: &Store,
    k: &'static dyn Kind,
    info: &RequestInfo,
    query: &[(String, String)],
    options: &Value,
) -> Result<Outcome, StatusBody> {
    let dry_run = options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let sel = Selectors::parse(
        k,
        query_get(query, "labelSelector"),
        query_get(query, "fieldSelector"),
    )?;
    let mut st = store.write();
    let ns = (!info.namespace.is_empty()).then_some(info.namespace.as_str());
    let names: Vec<(String, String)> = st
        .select(k, ns, &sel)
        .iter()
        .map(|o| {
            (
                o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    let mut items = Vec::new();
    for (ns, name) in names {
        if let Some(obj) = st.get_object(k, &ns, &name).cloned() {
            st.delete(k, &ns, &name, options, dry_run, false)?;
            items.push(kinds::list_item(k, obj));
        }
    }
    Ok(Outcome {
        code: 200,
        body: kinds::list_to_wire(k, list_body(k.api(), items, st.rv, None)),
        warnings: vec![],
    })
}
