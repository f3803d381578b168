//! Requests for a stored kind, once routed: the write options (`dryRun`, `fieldValidation`,
//! `fieldManager`), the media types each verb consumes (415), then the store's get, create,
//! update, patch, delete and subresource paths; the outcome as JSON (or a Table), with
//! `Warning` headers.

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{Value, json};

use super::list::{delete_collection, list};
use super::request::{RequestInfo, media_type, query_get, wants_table};
use super::table::table_for;
use super::watch::watch;
use super::{Ctx, Hooks, Reply, json_reply, status_reply};
use crate::kinds::{self, Kind, Subresource};
use crate::model::gojson;
use crate::model::status::{self, FieldError, StatusBody};
use crate::store::{FieldValidation, Outcome, WriteCtx};

/// Serve a request for `k` (its scope and subresource already checked by routing).
#[allow(clippy::too_many_arguments)]
pub fn handle(
    ctx: &Ctx<'_>,
    hooks: &mut dyn Hooks,
    k: &'static dyn Kind,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    info: &RequestInfo,
) -> Reply {
    let sub = match info.subresource.as_str() {
        "" => None,
        "status" => Some(Subresource::Status),
        "scale" => Some(Subresource::Scale),
        _ => return status_reply(&status::generic(404, ""), ctx.pretty),
    };
    let options = match write_options(method, query, headers) {
        Ok(o) => o,
        Err(s) => return status_reply(&s, ctx.pretty),
    };
    let table = wants_table(headers);
    let ns = info.namespace.as_str();
    let is_write = matches!(info.verb.as_str(), "update" | "patch" | "delete");
    let inject_conflict = is_write && hooks.conflict_armed(path);
    if is_write {
        hooks.before_write(ctx.store, k, ns, &info.name, path, options.dry_run);
    }
    // A create is a write to the object it names.
    if info.verb == "create"
        && sub.is_none()
        && let Some(name) = serde_json::from_slice::<Value>(body).ok().and_then(|b| {
            b.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
    {
        let object_path = format!("{}/{name}", path.trim_end_matches('/'));
        hooks.before_write(ctx.store, k, ns, &name, &object_path, options.dry_run);
    }
    let write = WriteCtx {
        manager: options.manager,
        dry_run: options.dry_run,
        field_validation: options.field_validation,
        inject_conflict,
        skip_webhooks: false,
    };
    let content_type = media_type(headers);
    let request = Request {
        ctx,
        k,
        info,
        body,
        content_type: &content_type,
        write: &write,
        table,
    };
    let result = match (info.verb.as_str(), sub) {
        ("watch", None) => return watch(ctx, k, info, query, table),
        ("list", None) => list(ctx.store, k, info, query, table),
        ("get", Some(Subresource::Scale)) => request.get_scale(),
        ("get", None | Some(Subresource::Status)) => {
            let r = request.get();
            if r.is_ok() {
                hooks.after_read(ctx.store, k, ns, &info.name, path);
            }
            r
        }
        ("update" | "patch", Some(sub)) => request.write_subresource(sub),
        ("create", None) => request.create(),
        ("update", None) => request.update(),
        ("patch", None) => request.patch(),
        ("delete", None) => request.delete(),
        ("deletecollection", None) => delete_collection(ctx.store, k, info, query, write.dry_run),
        _ => Err(status::generic(405, "")),
    };
    if inject_conflict && matches!(&result, Err(e) if e.code == 409 && e.reason == "Conflict") {
        hooks.conflict_sent(path);
    }
    match result {
        Ok(out) => outcome_reply(out, ctx.pretty),
        Err(s) => status_reply(&s, ctx.pretty),
    }
}

/// `?dryRun=`, `?fieldValidation=` and the field manager (`?fieldManager=`, else the
/// User-Agent up to its first `/`).
struct WriteOptions {
    dry_run: bool,
    field_validation: FieldValidation,
    manager: String,
}

fn write_options(
    method: &Method,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Result<WriteOptions, StatusBody> {
    let dry_run = match query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
    {
        v if v.is_empty() => false,
        v if v.iter().all(|x| *x == "All") => true,
        v => {
            let opts = match method.as_str() {
                "POST" => "CreateOptions",
                "DELETE" => "DeleteOptions",
                "PATCH" => "PatchOptions",
                _ => "UpdateOptions",
            };
            let shown: Vec<String> = v.iter().map(|x| status::go_quote(x)).collect();
            return Err(status::invalid_kind(
                "meta.k8s.io",
                opts,
                "",
                &[FieldError::not_supported(
                    "dryRun",
                    &format!("[]string{{{}}}", shown.join(", ")),
                    &["All"],
                )],
            ));
        }
    };
    let field_validation = match query_get(query, "fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(status::bad_request(format!(
                "fieldValidation parameter unsupported: {}; must be one of: Ignore, Warn, Strict",
                status::go_quote(other)
            )));
        }
    };
    let manager = query_get(query, "fieldManager")
        .map(str::to_string)
        .unwrap_or_else(|| {
            let ua = headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            ua.split('/')
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_control())
                .take(128)
                .collect()
        });
    Ok(WriteOptions {
        dry_run,
        field_validation,
        manager,
    })
}

/// A successful outcome as JSON (or a Table), with its warnings.
fn outcome_reply(out: Outcome, pretty: bool) -> Reply {
    // A Table is sent as `application/json` too, as the real server does.
    let mut r = json_reply(out.code, &out.body, pretty);
    for w in out.warnings {
        r.headers
            .push(("Warning".into(), format!("299 - {}", status::go_quote(&w))));
    }
    r
}

/// The 415 of a body in a media type the verb does not consume.
fn unsupported_media_type() -> StatusBody {
    status::generic(415, "415: Unsupported Media Type")
}

/// One request for a stored object, with everything its verb needs.
struct Request<'a> {
    ctx: &'a Ctx<'a>,
    k: &'static dyn Kind,
    info: &'a RequestInfo,
    body: &'a Bytes,
    /// The media type, without parameters.
    content_type: &'a str,
    write: &'a WriteCtx,
    table: bool,
}

impl Request<'_> {
    /// Is the body in one of these media types? (A missing Content-Type is not.)
    fn consumes(&self, allowed: &[&str]) -> bool {
        !self.content_type.is_empty() && allowed.contains(&self.content_type)
    }

    fn ns(&self) -> &str {
        &self.info.namespace
    }

    fn get(&self) -> Result<Outcome, StatusBody> {
        let obj = self
            .ctx
            .store
            .lock()
            .get(self.k, self.ns(), &self.info.name)?;
        let body = if self.table {
            table_for(self.k, std::slice::from_ref(&obj), None, None)
        } else {
            obj
        };
        Ok(Outcome {
            code: 200,
            body,
            warnings: vec![],
        })
    }

    fn get_scale(&self) -> Result<Outcome, StatusBody> {
        self.ctx
            .store
            .lock()
            .get_object(self.k, self.ns(), &self.info.name)
            .map(|o| Outcome {
                code: 200,
                body: kinds::scale_of(o),
                warnings: vec![],
            })
            .ok_or_else(|| status::not_found(self.k.api(), &self.info.name))
    }

    fn write_subresource(&self, sub: Subresource) -> Result<Outcome, StatusBody> {
        let patch = self.info.verb == "patch";
        let allowed: &[&str] = if patch {
            self.k.patch_types()
        } else {
            &["application/json"]
        };
        if !self.consumes(allowed) {
            return Err(if patch {
                self.unsupported_patch()
            } else {
                unsupported_media_type()
            });
        }
        self.ctx.store.lock().update_subresource(
            self.k,
            self.ns(),
            &self.info.name,
            sub,
            patch.then_some(self.content_type),
            self.body,
            self.write,
        )
    }

    fn create(&self) -> Result<Outcome, StatusBody> {
        if !self.info.name.is_empty() {
            return Err(status::generic(405, ""));
        }
        // Only JSON bodies are emulated (the real server also takes YAML and protobuf).
        if !self.consumes(&["application/json"]) {
            return Err(unsupported_media_type());
        }
        if self.k.api().namespaced && self.ns().is_empty() {
            return Err(status::generic(405, ""));
        }
        self.ctx
            .store
            .lock()
            .create(self.k, self.ns(), self.body, self.write)
    }

    fn update(&self) -> Result<Outcome, StatusBody> {
        if !self.consumes(&["application/json"]) {
            return Err(unsupported_media_type());
        }
        self.ctx
            .store
            .lock()
            .update(self.k, self.ns(), &self.info.name, self.body, self.write)
    }

    /// A patch type the kind does not take: custom resources answer with the patch handler's
    /// list of accepted types, built-in kinds with the generic 415.
    fn unsupported_patch(&self) -> StatusBody {
        if self.k.encoding() == kinds::Encoding::Unstructured {
            let mut accepted: Vec<&str> = self.k.patch_types().to_vec();
            accepted.push("application/apply-patch+yaml");
            return StatusBody::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: {}",
                    accepted.join(", ")
                ),
                None,
            );
        }
        unsupported_media_type()
    }

    fn patch(&self) -> Result<Outcome, StatusBody> {
        if !self.consumes(self.k.patch_types()) {
            return Err(self.unsupported_patch());
        }
        self.ctx.store.lock().patch(
            self.k,
            self.ns(),
            &self.info.name,
            self.content_type,
            self.body,
            self.write,
        )
    }

    fn delete(&self) -> Result<Outcome, StatusBody> {
        if !self.body.is_empty()
            && !self.content_type.is_empty()
            && self.content_type != "application/json"
        {
            return Err(unsupported_media_type());
        }
        let opts = delete_options(self.body)?;
        let dry = self.write.dry_run
            || opts
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All"));
        self.ctx.store.lock().delete(
            self.k,
            self.ns(),
            &self.info.name,
            &opts,
            dry,
            self.write.inject_conflict,
        )
    }
}

/// The DeleteOptions of a DELETE body (`{}` without one).
fn delete_options(body: &Bytes) -> Result<Value, StatusBody> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    match gojson::parse(body) {
        Ok(v @ Value::Object(_)) => {
            if let Some(pp) = v.get("propagationPolicy").and_then(Value::as_str)
                && !["Foreground", "Background", "Orphan"].contains(&pp)
            {
                return Err(status::invalid_kind(
                    "meta.k8s.io",
                    "DeleteOptions",
                    "",
                    &[FieldError::not_supported(
                        "propagationPolicy",
                        &status::go_quote(pp),
                        &["Foreground", "Background", "Orphan"],
                    )],
                ));
            }
            Ok(v)
        }
        Ok(_) => Err(StatusBody::new(
            500,
            "",
            "decoded object cannot be converted to DeleteOptions",
            None,
        )),
        Err(e) => Err(StatusBody::new(
            500,
            "",
            format!("couldn't get version/kind; json parse error: {e}"),
            None,
        )),
    }
}
