//! Requests for a stored kind, once routed: the write options (`dryRun`, `fieldValidation`,
//! `fieldManager`), the media types each verb consumes (415), then the store's get, create,
//! update, patch, delete and subresource paths; the outcome as JSON (or a Table), with
//! `Warning` headers.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use super::list::{delete_collection, list};
use super::request::{
    Output, RequestInfo, media_type, negotiate_encoding, not_acceptable, query_get,
};
use super::table::{Include, partial, table_for};
use super::watch::watch;
use super::{Ctx, Hooks, Reply, json_reply, status_reply};
use crate::kinds::{self, Kind, Subresource};
use crate::model::status::{self, FieldError, StatusBody};
use crate::model::{gojson, time};
use crate::store::{self, FieldValidation, Outcome, WriteCtx};

/// Serve a request for `k` (its scope and subresource already checked by routing).
#[allow(clippy::too_many_arguments)]
pub fn handle(
    ctx: &Ctx<'_>,
    hooks: &mut dyn Hooks,
    k: &'static dyn Kind,
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
        "finalize" => Some(Subresource::Finalize),
        _ => return status_reply(&status::generic(404, ""), ctx.pretty),
    };
    let (output, yaml) = match negotiate_encoding(headers) {
        Ok((o, yaml)) if yaml && o == Output::Json => (Output::Yaml, true),
        Ok(o) => o,
        Err(s) => return status_reply(&s, ctx.pretty),
    };
    let reply = handle_as(ctx, hooks, k, sub, output, path, query, headers, body, info);
    if yaml { yaml_reply(reply) } else { reply }
}

/// A reply whose JSON body is written as YAML instead (`Accept: application/yaml`).
fn yaml_reply(mut r: Reply) -> Reply {
    let Some(json) = r.json.take() else {
        return r;
    };
    r.body = super::full(crate::model::goyaml::encode(&json));
    for h in r.headers.iter_mut() {
        if h.0 == "Content-Type" {
            h.1 = "application/yaml".into();
        }
    }
    r
}

#[allow(clippy::too_many_arguments)]
fn handle_as(
    ctx: &Ctx<'_>,
    hooks: &mut dyn Hooks,
    k: &'static dyn Kind,
    sub: Option<Subresource>,
    output: Output,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
    info: &RequestInfo,
) -> Reply {
    let options = match write_options(&info.verb, &media_type(headers), query, headers) {
        Ok(o) => o,
        Err(s) => return status_reply(&s, ctx.pretty),
    };
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
        query,
        write: &write,
        output,
    };
    let result = match (info.verb.as_str(), sub) {
        ("watch", None) => return watch(ctx, k, info, query, output),
        ("list", None) => list(ctx.store, k, info, query, output),
        ("get", Some(Subresource::Scale)) => request.get_scale(),
        ("get", None | Some(Subresource::Status)) => {
            let r = request.get();
            if r.is_ok() {
                hooks.after_read(ctx.store, k, ns, &info.name, path);
            }
            r
        }
        ("update", Some(sub)) => request.write_subresource(sub),
        ("patch", Some(sub)) if sub != Subresource::Finalize => request.write_subresource(sub),
        ("create", None) if k.review().is_some() => request.review(),
        ("create", None) => request.create(),
        ("update", None) => request.update(),
        ("patch", None) => request.patch(),
        ("delete", None) => request.delete(),
        ("deletecollection", None) => delete_options(body, query)
            .and_then(|opts| delete_collection(ctx.store, k, info, query, &opts)),
        _ => Err(status::generic(405, "")),
    };
    // A write's answer is shaped as asked once it is there (the write has happened even when
    // the shape does not fit: 406).
    let result = if matches!(
        info.verb.as_str(),
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) && sub != Some(Subresource::Scale)
    {
        result.and_then(|out| shape_write(k, output, query, out))
    } else {
        result
    };
    if inject_conflict && matches!(&result, Err(e) if e.code == 409 && e.reason == "Conflict") {
        hooks.conflict_sent(path);
    }
    match result {
        Ok(out) => outcome_reply(out, ctx.pretty),
        Err(s) => status_reply(&s, ctx.pretty),
    }
}

/// A write's answer as a Table or partial metadata when the client asked for one (a Status
/// stays as it is).
fn shape_write(
    k: &'static dyn Kind,
    output: Output,
    query: &[(String, String)],
    mut out: Outcome,
) -> Result<Outcome, StatusBody> {
    if out.body.get("kind").and_then(Value::as_str) == Some("Status") {
        return Ok(out);
    }
    let items = out.body.get("items").and_then(Value::as_array).cloned();
    out.body = match (output, items) {
        (Output::Json | Output::Yaml, _) => return Ok(out),
        (Output::Table(version), items) => {
            let include = Include::parse(query_get(query, "includeObject"))?;
            let objs = items.unwrap_or_else(|| vec![out.body.clone()]);
            table_for(k, &objs, None, None, version, include)
        }
        (Output::Partial(_), Some(_)) => return Err(not_acceptable(k, true)),
        (Output::Partial(version), None) => partial(&out.body, version),
        (Output::PartialList(_), None) => return Err(not_acceptable(k, false)),
        (Output::PartialList(version), Some(items)) => {
            let items: Vec<Value> = items.iter().map(|o| partial(o, version)).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"),
                "metadata": out.body.get("metadata").cloned().unwrap_or(json!({})), "items": items})
        }
    };
    Ok(out)
}

/// `?dryRun=`, `?fieldValidation=` and the field manager (`?fieldManager=`, else the
/// User-Agent up to its first `/`).
struct WriteOptions {
    dry_run: bool,
    field_validation: FieldValidation,
    manager: String,
}

fn write_options(
    verb: &str,
    content_type: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Result<WriteOptions, StatusBody> {
    let user_agent_manager = || {
        // prefixFromUserAgent: up to the first `/`, printable characters, at most 128 bytes.
        let ua = headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mut out = String::new();
        for c in ua.split('/').next().unwrap_or("").chars() {
            if !is_print(c) {
                continue;
            }
            if out.len() + c.len_utf8() > 128 {
                break;
            }
            out.push(c);
        }
        out
    };
    let field_manager = query_get(query, "fieldManager").unwrap_or("");
    let dry_runs: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "dryRun")
        .map(|(_, v)| v.as_str())
        .collect();
    let field_validation = query_get(query, "fieldValidation").unwrap_or("");
    let opts_kind = match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        "patch" => "PatchOptions",
        // DeleteOptions come from the body or the query: validated where they are read.
        _ => {
            return Ok(WriteOptions {
                dry_run: !dry_runs.is_empty() && dry_runs.iter().all(|x| *x == "All"),
                field_validation: FieldValidation::Warn,
                manager: user_agent_manager(),
            });
        }
    };
    let mut errs = Vec::new();
    if verb == "patch" {
        if content_type != APPLY_PATCH {
            if query_get(query, "force").is_some() {
                errs.push(FieldError::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                ));
            }
        } else if field_manager.is_empty() {
            errs.push(FieldError::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    if field_manager.len() > 128 {
        errs.push(FieldError::too_long("fieldManager", 128));
    }
    for (i, c) in field_manager.char_indices() {
        if !is_print(c) {
            errs.push(FieldError::invalid(
                "fieldManager",
                &status::go_quote(field_manager),
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    if dry_runs.iter().any(|x| *x != "All") {
        let shown: Vec<String> = dry_runs.iter().map(|x| status::go_quote(x)).collect();
        errs.push(FieldError::not_supported(
            "dryRun",
            &format!("[]string{{{}}}", shown.join(", ")),
            &["All"],
        ));
    }
    let fv = match field_validation {
        "" | "Warn" => FieldValidation::Warn,
        "Strict" => FieldValidation::Strict,
        "Ignore" => FieldValidation::Ignore,
        other => {
            errs.push(FieldError::not_supported(
                "fieldValidation",
                &status::go_quote(other),
                &["", "Ignore", "Strict", "Warn"],
            ));
            FieldValidation::Warn
        }
    };
    if !errs.is_empty() {
        return Err(status::invalid_kind("meta.k8s.io", opts_kind, "", &errs));
    }
    Ok(WriteOptions {
        dry_run: !dry_runs.is_empty(),
        field_validation: fv,
        manager: if field_manager.is_empty() {
            user_agent_manager()
        } else {
            field_manager.to_string()
        },
    })
}

/// Go's `unicode.IsPrint`, near enough: no control characters, no spaces but the ASCII one.
fn is_print(c: char) -> bool {
    !c.is_control()
        && (c == ' ' || !c.is_whitespace())
        && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{feff}')
}

/// A successful outcome as JSON, with its warnings.
fn outcome_reply(out: Outcome, pretty: bool) -> Reply {
    let mut r = json_reply(out.code, out.body, pretty);
    for w in out.warnings {
        r.headers
            .push(("Warning".into(), format!("299 - {}", status::go_quote(&w))));
    }
    r
}

/// Server-side apply's patch type.
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// `strconv.ParseBool`'s true values (`force=true`).
fn parse_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "TRUE" | "true" | "True")
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
    query: &'a [(String, String)],
    write: &'a WriteCtx,
    output: Output,
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
        let include = match self.output {
            Output::Table(_) => Include::parse(query_get(self.query, "includeObject"))?,
            _ => Include::Metadata,
        };
        let st = self.ctx.store.read();
        // A resourceVersion reads the watch cache: it must have reached it.
        let rv = query_get(self.query, "resourceVersion").unwrap_or("");
        if !rv.is_empty() {
            let rv = super::list::parse_rv(rv).map_err(|m| StatusBody::new(500, "", m, None))?;
            if rv > st.rv {
                return Err(super::list::too_large(rv, st.rv, 1));
            }
        }
        let obj = st.get(self.k, self.ns(), &self.info.name)?;
        // The printer and the partial metadata work on the object as stored.
        let ns = if self.k.api().namespaced {
            self.ns()
        } else {
            ""
        };
        let stored = || {
            st.get_object(self.k, ns, &self.info.name)
                .cloned()
                .unwrap_or_else(|| obj.clone())
        };
        let body = match self.output {
            Output::Table(version) => table_for(
                self.k,
                std::slice::from_ref(&stored()),
                None,
                None,
                version,
                include,
            ),
            Output::Partial(version) => partial(&stored(), version),
            Output::PartialList(_) => return Err(not_acceptable(self.k, false)),
            Output::Json | Output::Yaml => obj,
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
            .read()
            .get_object(self.k, self.ns(), &self.info.name)
            .map(|o| Outcome {
                code: 200,
                body: kinds::scale_of(o),
                warnings: vec![],
            })
            .ok_or_else(|| status::subresource_not_found(self.k.api(), "scale", &self.info.name))
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
        self.ctx.store.write().update_subresource(
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
        let body = self.object_body()?;
        if self.k.api().namespaced && self.ns().is_empty() {
            return Err(status::generic(405, ""));
        }
        self.ctx
            .store
            .write()
            .create(self.k, self.ns(), &body, self.write)
    }

    /// A review: the body decoded (and checked) like any create; the answer who is asking, or
    /// whether they may do what the spec describes.
    fn review(&self) -> Result<Outcome, StatusBody> {
        let body = self.object_body()?;
        let (decoded, warnings) =
            crate::store::decode_body(self.k, &body, self.write.field_validation)?;
        if self.k.review() == Some(kinds::Review::Access) {
            let spec = decoded.get("spec").cloned().unwrap_or(json!({}));
            let errs = kinds::validate_access_review(&spec);
            if !errs.is_empty() {
                return Err(status::invalid_kind(self.k.api().group, "", "", &errs));
            }
            // The field manager runs on the request object; the status comes after it.
            let mut obj = json!({"metadata": {"creationTimestamp": null}, "spec": spec});
            crate::store::created_fields(self.k, &self.write.manager, &mut obj);
            obj["status"] = self
                .ctx
                .access
                .map_or(json!({"allowed": false}), |review| review(&spec));
            let obj = crate::model::schema::normalize(self.k.schema(), &obj);
            return Ok(Outcome {
                code: 201,
                body: kinds::to_wire(self.k, &obj),
                warnings,
            });
        }
        let mut meta = serde_json::Map::new();
        meta.insert("creationTimestamp".into(), json!(time::now_rfc3339()));
        Ok(Outcome {
            code: 201,
            body: kinds::to_wire(
                self.k,
                &json!({"metadata": meta, "status": {"userInfo": self.ctx.user}}),
            ),
            warnings,
        })
    }

    fn update(&self) -> Result<Outcome, StatusBody> {
        let body = self.object_body()?;
        self.ctx
            .store
            .write()
            .update(self.k, self.ns(), &self.info.name, &body, self.write)
    }

    /// The body of a create or update as JSON: JSON as it is (also without a Content-Type),
    /// YAML converted (go-yaml's YAML 1.1 booleans included); anything else is 415 — and
    /// protobuf, which the sandbox does not decode, 400 without its magic prefix and 415 with
    /// it.
    fn object_body(&self) -> Result<std::borrow::Cow<'_, [u8]>, StatusBody> {
        match self.content_type {
            "" | "application/json" => Ok(std::borrow::Cow::Borrowed(&self.body[..])),
            "application/yaml" => {
                let text = String::from_utf8_lossy(self.body);
                let v: Value = serde_saphyr::from_str(&text).map_err(|e| {
                    status::bad_request(format!("error converting YAML to JSON: yaml: {e}"))
                })?;
                Ok(std::borrow::Cow::Owned(gojson::compact(&v).into_bytes()))
            }
            "application/vnd.kubernetes.protobuf" if !self.body.starts_with(b"k8s\0") => {
                Err(status::bad_request(format!(
                    "the object provided is unrecognized (must be of type {}): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({})",
                    self.k.api().kind,
                    crate::store::summarize(self.body)
                )))
            }
            _ => Err(StatusBody::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
                None,
            )),
        }
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
        if self.content_type == APPLY_PATCH && self.k.encoding() == kinds::Encoding::GoStruct {
            return self.ctx.store.write().apply(
                self.k,
                self.ns(),
                &self.info.name,
                self.body,
                self.write,
                query_get(self.query, "force").is_some_and(parse_bool),
            );
        }
        if !self.consumes(self.k.patch_types()) {
            return Err(self.unsupported_patch());
        }
        store::patch_shared(
            self.ctx.store,
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
        let opts = delete_options(self.body, self.query)?;
        let dry = opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        self.ctx.store.write().delete(
            self.k,
            self.ns(),
            &self.info.name,
            &opts,
            dry,
            self.write.inject_conflict,
        )
    }
}

/// The DeleteOptions of a DELETE: the body's when there is one (the query is then ignored
/// entirely, `dryRun` included), else the query's; then `ValidateDeleteOptions`.
pub fn delete_options(body: &Bytes, query: &[(String, String)]) -> Result<Value, StatusBody> {
    let opts = if body.is_empty() {
        let mut m = serde_json::Map::new();
        let dry: Vec<&str> = query
            .iter()
            .filter(|(k, _)| k == "dryRun")
            .map(|(_, v)| v.as_str())
            .collect();
        if !dry.is_empty() {
            m.insert("dryRun".into(), json!(dry));
        }
        if let Some(p) = query_get(query, "propagationPolicy") {
            m.insert("propagationPolicy".into(), json!(p));
        }
        if let Some(o) = query_get(query, "orphanDependents").and_then(|o| o.parse::<bool>().ok()) {
            m.insert("orphanDependents".into(), json!(o));
        }
        if let Some(g) = query_get(query, "gracePeriodSeconds") {
            let n: i64 = g.parse().map_err(|_| {
                status::bad_request(format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    status::go_quote(g)
                ))
            })?;
            m.insert("gracePeriodSeconds".into(), json!(n));
        }
        Value::Object(m)
    } else {
        decode_delete_options(body)?
    };
    let mut errs = Vec::new();
    let policy = opts.get("propagationPolicy").and_then(Value::as_str);
    if opts.get("orphanDependents").is_some_and(|o| !o.is_null())
        && let Some(p) = policy
    {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            &status::go_quote(p),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(p) = policy
        && !["Foreground", "Background", "Orphan"].contains(&p)
    {
        errs.push(FieldError::not_supported(
            "propagationPolicy",
            &status::go_quote(p),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    let dry: Vec<&str> = opts
        .get("dryRun")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if dry.iter().any(|x| *x != "All") {
        let shown: Vec<String> = dry.iter().map(|x| status::go_quote(x)).collect();
        errs.push(FieldError::not_supported(
            "dryRun",
            &format!("[]string{{{}}}", shown.join(", ")),
            &["All"],
        ));
    }
    if !errs.is_empty() {
        return Err(status::invalid_kind(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &errs,
        ));
    }
    Ok(opts)
}

/// A DeleteOptions body as the meta codec decodes it (every failure a bare 500).
fn decode_delete_options(body: &Bytes) -> Result<Value, StatusBody> {
    let bare = |m: String| StatusBody::new(500, "", m, None);
    let v = gojson::parse(body)
        .map_err(|e| bare(format!("couldn't get version/kind; json parse error: {e}")))?;
    let m = match v {
        Value::Object(m) => m,
        Value::Null => return Ok(json!({})),
        other => {
            let what = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(bare(format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {what} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}"
            )));
        }
    };
    let kind = m
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty());
    let api_version = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .unwrap_or("meta.k8s.io/v1");
    const META: &[&str] = &["v1", "meta.k8s.io/v1"];
    const META_KINDS: &[&str] = &[
        "Status",
        "ListOptions",
        "GetOptions",
        "CreateOptions",
        "UpdateOptions",
        "PatchOptions",
        "WatchEvent",
        "APIVersions",
        "APIGroupList",
        "APIGroup",
        "APIResourceList",
    ];
    // DeleteOptions is registered in every served group/version.
    let registered = META.contains(&api_version)
        || api_version.matches('/').count() == 1 && !api_version.starts_with('/');
    match kind {
        None | Some("DeleteOptions") if registered => {}
        Some(k) if META.contains(&api_version) && META_KINDS.contains(&k) => {
            let v = api_version.rsplit('/').next().unwrap_or(api_version);
            return Err(bare(format!(
                "converting ({v}.{k}) to (v1.DeleteOptions): unknown conversion"
            )));
        }
        k => {
            return Err(bare(format!(
                "no kind {} is registered for version {} in scheme \"pkg/runtime/scheme.go:100\"",
                status::go_quote(k.unwrap_or("DeleteOptions")),
                status::go_quote(api_version)
            )));
        }
    }
    let type_err = |field: &str, v: &Value, go_type: &str| {
        let what = match v {
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::String(_) => "string",
            Value::Number(_) => "number",
            _ => "bool",
        };
        bare(format!(
            "json: cannot unmarshal {what} into Go struct field {field} of type {go_type}"
        ))
    };
    for (f, v) in &m {
        if v.is_null() {
            continue;
        }
        let ok = match f.as_str() {
            "gracePeriodSeconds" => v.as_i64().is_some(),
            "orphanDependents" => v.is_boolean(),
            "propagationPolicy" => v.is_string(),
            "dryRun" => v
                .as_array()
                .is_some_and(|a| a.iter().all(|x| x.is_string() || x.is_null())),
            "preconditions" => v.is_object(),
            _ => true,
        };
        if !ok {
            let go_type = match f.as_str() {
                "gracePeriodSeconds" => "int64",
                "orphanDependents" => "bool",
                "propagationPolicy" => "v1.DeletionPropagation",
                "dryRun" if v.is_array() => "string",
                "dryRun" => "[]string",
                _ => "v1.Preconditions",
            };
            return Err(type_err(&format!("DeleteOptions.{f}"), v, go_type));
        }
    }
    if let Some(Value::Object(pre)) = m.get("preconditions") {
        for (f, go_type) in [("uid", "types.UID"), ("resourceVersion", "string")] {
            if let Some(v) = pre.get(f)
                && !v.is_string()
                && !v.is_null()
            {
                return Err(type_err(
                    &format!("DeleteOptions.preconditions.{f}"),
                    v,
                    go_type,
                ));
            }
        }
    }
    Ok(Value::Object(m))
}
