//! The plan as data (`-o json` / `-o yaml`) for automation.
//!
//! Same place in the pipeline as `appupdate_render::diff_render`: the plan is computed, then either
//! rendered for people or printed here as one document on stdout. The document has its own
//! serialisation types ([`PlanDocument`] and friends) rather than deriving from the plan's
//! internal types, so a refactoring of [`crate::plan`] cannot silently change what pipelines
//! parse. Its JSON Schema is `schema/plan.schema.json`; the README documents every field.
//!
//! Stability: `schema` names the version (`kubectl-appupdate.plan/v1`). Within v1, fields are
//! only ever added, never renamed, removed or retyped; an incompatible change bumps it to v2.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::plan::{Action, AuthProvider, Base, Kind, ObjectChange, Plan, RouteStyle};
use crate::text;

mod json;

/// Schema identifier; bump on any incompatible change.
pub const SCHEMA_VERSION: &str = "kubectl-appupdate.plan/v1";

/// The whole plan document.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDocument<'a> {
    /// Always [`SCHEMA_VERSION`].
    pub schema: &'static str,
    pub app: &'a str,
    pub namespace: &'a str,
    /// The kubeconfig context the plan was computed against.
    pub context: &'a str,
    /// Whether anything would be created, updated or deleted.
    pub has_changes: bool,
    pub summary: SummaryDoc,
    /// With `--endpoints`: how the endpoints are published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<RoutesDoc<'a>>,
    /// Every object the run looked at, in write order, unchanged ones included.
    pub objects: Vec<ObjectDoc<'a>>,
    /// Who else owns fields the plan changes ([`crate::owners`]); left out when nobody.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<OwnerDoc<'a>>,
    /// What the image check made of each image the plan writes; left out when it did not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageDoc<'a>>,
}

/// One image the plan writes, as the image check found it in its registry and checked it
/// against the cluster ([`crate::plan::ImageReport`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageDoc<'a> {
    /// `--image` as given.
    pub reference: &'a str,
    /// What the plan writes: `reference`, `reference@digest` (`--pin-digest`) or the live
    /// spelling of the same image.
    pub written: &'a str,
    /// The digest the tag names; `null` when the registry did not tell.
    pub digest: Option<&'a str>,
    /// The platforms it is built for (`linux/amd64`).
    pub platforms: &'a [String],
    /// `nodes`, `live-image` or `none`.
    pub platform_check: crate::plan::PlatformCheck,
    /// The platforms it was checked against.
    pub checked_against: &'a [String],
    /// With `live-image`: the live image; else `null`.
    pub live_image: Option<&'a str>,
    /// Whether the plan writes the digest.
    pub pinned: bool,
    /// Why the image or its platforms were not checked; `null` when everything was.
    pub not_checked: Option<&'a str>,
}

fn image_doc(r: &crate::plan::ImageReport) -> ImageDoc<'_> {
    ImageDoc {
        reference: &r.reference,
        written: &r.written,
        digest: r.digest.as_deref(),
        platforms: &r.platforms,
        platform_check: r.platform_check,
        checked_against: &r.checked_against,
        live_image: r.live_image.as_deref(),
        pinned: r.pinned,
        not_checked: r.not_checked.as_deref(),
    }
}

/// One owner of fields the plan changes in one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerDoc<'a> {
    /// The object, as the plan names it (`deployment.apps/web`).
    pub object: &'a str,
    /// `helm`, `argocd`, `flux-kustomization`, `flux-helmrelease`, `kapp` or `field-manager`.
    pub tool: &'static str,
    /// The release, application, Kustomization, HelmRelease, kapp app or field manager.
    pub name: &'a str,
    /// The changed fields it holds; empty when it owns the whole object.
    pub fields: &'a [String],
    /// `apply-conflict`, `update-takes-back` or `object-owned`.
    pub reason: &'static str,
    /// What follows, in words.
    pub consequence: String,
}

impl<'a> PlanDocument<'a> {
    /// The document with the owners of the objects it changes.
    pub fn with_owners(mut self, owners: &'a [crate::owners::ObjectOwners]) -> Self {
        self.owners = owners
            .iter()
            .flat_map(|o| {
                o.owners.iter().map(move |owner| {
                    let (tool, name) = owner.who.parts();
                    OwnerDoc {
                        object: &o.object,
                        tool,
                        name,
                        fields: &owner.fields,
                        reason: owner.reason.code(),
                        consequence: owner.consequence(),
                    }
                })
            })
            .collect();
        self
    }
}

/// How the plan publishes the endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutesDoc<'a> {
    /// The route style after the run: `nginx-snippet`, `nginx-auth` or `gateway`.
    pub style: RouteStyle,
    /// `gateway` only: how the HTTPRoutes check scopes after the run, `filter` or
    /// `envoy-gateway`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_provider: Option<AuthProvider>,
    /// The styles of the managed routes live now (empty on a first exposure).
    pub live_styles: &'a [RouteStyle],
    /// Whether live routes change style (new routes first, then the old ones go).
    pub migration: bool,
    /// What the plan decided and why, one sentence each (e.g. the IngressClass new Ingresses
    /// get).
    pub notes: &'a [String],
}

/// Counts per action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SummaryDoc {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub unchanged: usize,
}

/// One object and what happens to it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDoc<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// `create`, `update`, `delete` or `unchanged`.
    pub action: Action,
    /// The `metadata.resourceVersion` the change was computed from (every write is
    /// conditional on it); `null` for a create.
    pub resource_version: Option<&'a str>,
    /// The live object's uid; `null` for a create.
    pub uid: Option<&'a str>,
    /// The values this run changes; empty when unchanged.
    pub fields: Vec<FieldDoc<'a>>,
    /// For Ingresses: the endpoints they serve, in endpoints-file terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressDoc<'a>>,
    /// For routes (Ingresses and HTTPRoutes): their style and the endpoints they serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteDoc<'a>>,
    /// The focused view of the live object the diff shows (`null` for a create).
    pub before: Option<&'a crate::plan::View>,
    /// The focused view after the change (`null` for a delete).
    pub after: Option<&'a crate::plan::View>,
}

/// One changed value. `null` means absent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FieldDoc<'a> {
    /// e.g. `spec.template.spec.containers[name=app].image`, `spec.maxReplicas`,
    /// `spec.rules[0].http.paths`; `.` for a whole object (an Ingress delete).
    pub path: &'a str,
    /// `null` (`None`) when absent.
    pub before: Option<&'a crate::plan::FieldValue>,
    pub after: Option<&'a crate::plan::FieldValue>,
}

/// The endpoint view of an Ingress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressDoc<'a> {
    /// The identifier label value of the scope group.
    pub identifier: &'a str,
    /// Sorted, de-duplicated OAuth scopes; empty for the public group.
    pub scopes: &'a [String],
    /// Endpoint paths (as in the endpoints file, without the `/<app>` prefix) served after the
    /// change; empty for a delete.
    pub paths: &'a [String],
    /// Endpoint paths served before the change; empty for a create.
    pub paths_before: &'a [String],
}

/// The route view of a route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteDoc<'a> {
    /// `nginx-snippet`, `nginx-auth` or `gateway` (for a delete, the style of the route that
    /// goes).
    pub style: RouteStyle,
    /// The identifier label value of the scope group.
    pub identifier: &'a str,
    /// Sorted, de-duplicated OAuth scopes; empty for the public group.
    pub scopes: &'a [String],
    /// Endpoint paths served after the change; empty for a delete.
    pub paths: &'a [String],
    /// Endpoint paths served before the change; empty for a create.
    pub paths_before: &'a [String],
    /// What the live route carries that its style does not write, and this update removes,
    /// each by its field (`metadata.annotations[nginx.ingress.kubernetes.io/auth-snippet]`,
    /// `spec.rules[path=/web/a].filters[RequestMirror]`); left out when nothing.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub foreign: &'a [String],
}

fn object_doc(change: &ObjectChange) -> ObjectDoc<'_> {
    let route = change.route.as_ref().map(|info| RouteDoc {
        style: info.style,
        identifier: &info.identifier,
        scopes: &info.scopes,
        paths: &info.paths,
        paths_before: &info.paths_before,
        foreign: &info.foreign,
    });
    let ingress = route
        .as_ref()
        .filter(|_| change.kind == Kind::Ingress)
        .map(|r| IngressDoc {
            identifier: r.identifier,
            scopes: r.scopes,
            paths: r.paths,
            paths_before: r.paths_before,
        });
    ObjectDoc {
        api_version: change.kind.api_version(),
        kind: change.kind.name(),
        namespace: &change.namespace,
        name: &change.name,
        action: change.action(),
        resource_version: change.live.as_ref().map(Base::resource_version),
        uid: change.live.as_ref().map(Base::uid),
        fields: change
            .fields
            .iter()
            .map(|f| FieldDoc {
                path: &f.path,
                before: f.before.as_ref(),
                after: f.after.as_ref(),
            })
            .collect(),
        ingress,
        route,
        before: change.before.as_ref(),
        after: change.after.as_ref(),
    }
}

/// The document for `plan`: it borrows from the plan, so writing it copies nothing.
pub fn document<U>(plan: &Plan<U>) -> PlanDocument<'_> {
    let s = plan.summary();
    PlanDocument {
        schema: SCHEMA_VERSION,
        app: &plan.app,
        namespace: &plan.namespace,
        context: &plan.context,
        has_changes: s.has_changes(),
        summary: SummaryDoc {
            create: s.create,
            update: s.update,
            delete: s.delete,
            unchanged: s.unchanged,
        },
        routes: plan.routes.as_ref().map(|r| RoutesDoc {
            style: r.style,
            auth_provider: r.header.attachment.auth_provider,
            live_styles: &r.live_styles,
            migration: r.is_migration(),
            notes: &r.notes,
        }),
        objects: plan.changes().map(object_doc).collect(),
        owners: Vec::new(),
        images: plan.images.iter().map(image_doc).collect(),
    }
}

/// The two formats of a document (`-o json`, `-o yaml`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

/// The one writer of every document the plugin prints — the plan ([`document`]), a fleet's
/// document, `history -o json|yaml` — as JSON or YAML. Every character [`text::is_escaped`]
/// names is written as an escape (JSON `\u202e`, a surrogate pair above U+FFFF; YAML `\u202E`
/// in a double-quoted scalar), so a parser reads back exactly the same strings and a terminal
/// shows the document as it is: only line feeds are left raw (the layout, and a YAML block of
/// lines). JSON is serde_json's pretty layout and a newline, written as it is serialized;
/// YAML is one document with the same structure.
pub fn write_document(
    out: &mut impl Write,
    format: Format,
    doc: &impl Serialize,
) -> io::Result<()> {
    match format {
        Format::Json => write_json_value(out, doc),
        Format::Yaml => {
            let doc = serde_json::to_value(doc).map_err(io::Error::other)?;
            out.write_all(yaml_text(&doc)?.as_bytes())
        }
    }
}

/// [`write_document`] for a plan's document, with the serializer compiled in this crate rather
/// than in each caller (generic code is built where it is instantiated, at that crate's
/// optimisation level): the plan is the largest document the plugin writes, 14 MB for 1 000
/// Ingresses, and the shell that prints it is built for size (docs/releasing.md, "Binary size").
/// Buffered here, so the many small writes of the serializer are not calls through `out` (the
/// JSON writer gathers its text in blocks itself).
pub fn write_plan_document(
    out: &mut dyn Write,
    format: Format,
    doc: &PlanDocument<'_>,
) -> io::Result<()> {
    match format {
        Format::Json => write_json_value(out, doc),
        Format::Yaml => {
            let mut out = io::BufWriter::with_capacity(1 << 16, out);
            write_document(&mut out, format, doc)?;
            out.flush()
        }
    }
}

/// The JSON of [`write_document`] ([`json`]) and its closing line feed.
fn write_json_value(out: &mut dyn Write, doc: &(impl Serialize + ?Sized)) -> io::Result<()> {
    json::write(out, doc)?;
    out.write_all(b"\n")
}

/// The YAML of [`write_document`]: a string holding a character [`text::is_escaped`] names
/// (other than a line feed) is written double-quoted, where the YAML serializer escapes the
/// controls and this writes the rest as YAML escapes (`\u202E`).
fn yaml_text(doc: &Value) -> io::Result<String> {
    if any_key_needs_quotes(doc) {
        // The YAML serializer cannot be made to quote a key; no key of a real object holds such
        // a character (the API server validates them), but a server can send anything. JSON is
        // YAML too, and this JSON escapes them.
        let mut out = Vec::new();
        write_json_value(&mut out, doc)?;
        return String::from_utf8(out).map_err(io::Error::other);
    }
    let text = serde_saphyr::to_string(&SafeYaml(doc)).map_err(io::Error::other)?;
    // Only double-quoted scalars can hold these characters now, and in a double-quoted scalar
    // an escape means the character itself.
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != '\n' && text::is_escaped(c) {
            match u16::try_from(u32::from(c)) {
                Ok(unit) => out.push_str(&format!("\\u{unit:04X}")),
                Err(_) => out.push_str(&format!("\\U{:08X}", u32::from(c))),
            }
        } else {
            out.push(c);
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// A JSON value, serialized for YAML with every string value that holds an escaped character
/// other than a line feed forced into double quotes.
struct SafeYaml<'a>(&'a Value);

fn needs_quotes(s: &str) -> bool {
    s.chars().any(|c| c != '\n' && text::is_escaped(c))
}

fn any_key_needs_quotes(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().any(any_key_needs_quotes),
        Value::Object(entries) => entries
            .iter()
            .any(|(k, v)| needs_quotes(k) || any_key_needs_quotes(v)),
        _ => false,
    }
}

impl Serialize for SafeYaml<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::String(s) if needs_quotes(s) => {
                serde_saphyr::DoubleQuoted(s.as_str()).serialize(ser)
            }
            Value::Array(items) => {
                let mut seq = ser.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&SafeYaml(item))?;
                }
                seq.end()
            }
            Value::Object(entries) => {
                let mut map = ser.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, &SafeYaml(value))?;
                }
                map.end()
            }
            other => other.serialize(ser),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Base, FieldChange, Kind, RouteInfo, Write};
    use serde_json::json;

    /// The writer [`json`] replaced, kept as its reference: serde_json's pretty layout (two spaces, `": "`), which also escapes what
    /// [`text::is_escaped`] names (serde_json escapes only the controls), as `\uXXXX` (a surrogate
    /// pair above U+FFFF). The comma, line break and indentation before a value are one write, not one per
    /// level as serde_json's `PrettyFormatter` does.
    #[derive(Default)]
    struct EscapingFormatter {
        depth: usize,
        has_value: bool,
    }

    /// A comma, a line feed and the indentation of the deepest level, to be written at once: the
    /// line break before a first value is `[1..]` of it, before a next value `[0..]` (one write
    /// for the comma and the break; a large document has hundreds of thousands).
    const LINE_BREAK: [u8; 2 + 128] = {
        let mut b = [b' '; 2 + 128];
        b[0] = b',';
        b[1] = b'\n';
        b
    };

    impl EscapingFormatter {
        fn newline<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
            self.line_break(w, 1)
        }

        /// The line break from `LINE_BREAK[from]` (0: with the comma).
        fn line_break<W: ?Sized + io::Write>(&self, w: &mut W, from: usize) -> io::Result<()> {
            let mut spaces = 2 * self.depth;
            w.write_all(&LINE_BREAK[from..2 + spaces.min(128)])?;
            while spaces > 128 {
                spaces -= 128;
                w.write_all(&LINE_BREAK[2..2 + spaces.min(128)])?;
            }
            Ok(())
        }

        fn begin<W: ?Sized + io::Write>(&mut self, w: &mut W, open: &[u8]) -> io::Result<()> {
            self.depth += 1;
            self.has_value = false;
            w.write_all(open)
        }

        fn end<W: ?Sized + io::Write>(&mut self, w: &mut W, close: &[u8]) -> io::Result<()> {
            self.depth -= 1;
            if self.has_value {
                self.newline(w)?;
            }
            w.write_all(close)
        }

        fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
            self.line_break(w, if first { 1 } else { 0 })
        }
    }

    impl serde_json::ser::Formatter for EscapingFormatter {
        fn write_string_fragment<W: ?Sized + io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> io::Result<()> {
            // serde_json has escaped the controls; printable ASCII needs nothing.
            if fragment.bytes().all(text::is_printable_ascii) {
                return writer.write_all(fragment.as_bytes());
            }
            let mut rest = fragment;
            while let Some((i, c)) = rest.char_indices().find(|(_, c)| text::is_escaped(*c)) {
                writer.write_all(&rest.as_bytes()[..i])?;
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
                rest = &rest[i + c.len_utf8()..];
            }
            writer.write_all(rest.as_bytes())
        }

        fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.begin(w, b"[")
        }
        fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.end(w, b"]")
        }
        fn begin_array_value<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.item(w, first)
        }
        fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
            self.has_value = true;
            Ok(())
        }
        fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.begin(w, b"{")
        }
        fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            self.end(w, b"}")
        }
        fn begin_object_key<W: ?Sized + io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.item(w, first)
        }
        fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
            w.write_all(b": ")
        }
        fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
            self.has_value = true;
            Ok(())
        }
    }

    fn change(kind: Kind, name: &str, action: Action) -> ObjectChange {
        ObjectChange {
            kind,
            namespace: "shop".into(),
            name: name.into(),
            live: (action != Action::Create)
                .then(|| Base::new("7", "u-1"))
                .flatten(),
            fields: Vec::new(),
            before: None,
            after: None,
            write: Write::sample(action),
            route: None,
        }
    }

    fn info(style: RouteStyle, paths: &[&str], before: &[&str]) -> RouteInfo {
        RouteInfo {
            style,
            identifier: "x".into(),
            scopes: vec!["admin".into()],
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            paths_before: before.iter().map(|p| (*p).to_owned()).collect(),
            foreign: Vec::new(),
        }
    }

    #[test]
    fn an_update_lists_its_fields_with_before_and_after() {
        let mut c = change(Kind::HorizontalPodAutoscaler, "web", Action::Update);
        c.fields = vec![FieldChange::new(
            "spec.maxReplicas",
            Some(json!(5)),
            Some(json!(9)),
        )];
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["apiVersion"], "autoscaling/v2");
        assert_eq!(doc["kind"], "HorizontalPodAutoscaler");
        assert_eq!(doc["action"], "update");
        assert_eq!(doc["resourceVersion"], "7");
        assert_eq!(
            doc["fields"],
            json!([{"path": "spec.maxReplicas", "before": 5, "after": 9}])
        );
        assert!(doc.get("ingress").is_none());
        assert!(doc.get("route").is_none());
    }

    #[test]
    fn an_absent_value_is_null_and_a_create_has_no_resource_version() {
        let mut c = change(Kind::Ingress, "web-x", Action::Create);
        c.fields = vec![FieldChange::new(
            "metadata.labels[app]",
            None,
            Some(json!("web")),
        )];
        c.route = Some(info(RouteStyle::NginxSnippet, &["/a"], &[]));
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["resourceVersion"], Value::Null);
        assert_eq!(doc["fields"][0]["before"], Value::Null);
        assert_eq!(
            doc["ingress"],
            json!({"identifier": "x", "scopes": ["admin"], "paths": ["/a"], "pathsBefore": []})
        );
        assert_eq!(
            doc["route"],
            json!({"style": "nginx-snippet", "identifier": "x", "scopes": ["admin"], "paths": ["/a"], "pathsBefore": []})
        );
    }

    #[test]
    fn an_httproute_carries_its_style_and_no_ingress_view() {
        let mut c = change(Kind::HttpRoute, "web-x", Action::Update);
        c.route = Some(info(
            RouteStyle::Gateway,
            &["/health", "/products"],
            &["/health"],
        ));
        let doc = serde_json::to_value(object_doc(&c)).unwrap();
        assert_eq!(doc["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(doc["kind"], "HTTPRoute");
        assert!(doc.get("ingress").is_none());
        assert_eq!(doc["route"]["style"], "gateway");
        assert_eq!(doc["route"]["pathsBefore"], json!(["/health"]));
    }

    /// Strings as the cluster may hold them: every control and format character that matters.
    fn hostile(tail: &str) -> String {
        format!(
            "v\u{1b}]0;t\u{7}\u{1b}[2J\u{9b}1m\u{202e}\u{2066}\u{200b}\u{feff}\u{a0}\u{2028}\t\r\n\"\\{tail}\u{e0041}"
        )
    }

    fn hostile_document() -> Value {
        json!({
            "plain": "web",
            "image": hostile(""),
            "multi": "line one\nline two\n",
            "multiBidi": format!("one\n{}\n", hostile("x")),
            "tab": "a\tb\nc\n",
            "list": [hostile("item"), 1, null, true],
            "nested": {"annotations": {"k": hostile("annotation")}},
        })
    }

    #[test]
    fn json_carries_the_exact_strings_and_nothing_a_terminal_would_obey() {
        let mut doc = hostile_document();
        doc[hostile("key")] = json!([hostile("item")]);
        let mut out = Vec::new();
        write_json_value(&mut out, &doc).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.chars().any(|c| c != '\n' && text::is_escaped(c)),
            "{text}"
        );
        assert!(
            text.contains("\\u001b]0;t\\u0007\\u001b[2J\\u009b1m\\u202e\\u2066\\u200b"),
            "{text}"
        );
        assert!(text.contains("\\udb40\\udc41"), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn a_key_that_needs_escapes_turns_the_yaml_into_json_which_is_yaml_too() {
        let doc = json!({"annotations": {hostile("key"): "v", "ok": hostile("v")}});
        let text = yaml_text(&doc).unwrap();
        assert!(text.starts_with("{\n"), "{text}");
        assert!(
            !text.chars().any(|c| c != '\n' && text::is_escaped(c)),
            "{text}"
        );
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn yaml_carries_the_exact_strings_and_nothing_a_terminal_would_obey() {
        let doc = hostile_document();
        let text = yaml_text(&doc).unwrap();
        assert!(
            !text.chars().any(|c| c != '\n' && text::is_escaped(c)),
            "{text}"
        );
        assert!(
            text.contains("\\e]0;t\\a\\e[2J\\x9B1m\\u202E\\u2066\\u200B"),
            "{text}"
        );
        // A multi-line value without anything to escape stays a block of lines.
        assert!(
            text.contains("multi: |\n  line one\n  line two\n"),
            "{text}"
        );
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, doc);
    }

    /// The text the writer this module had before [`json`] writes: serde_json's serializer with
    /// [`EscapingFormatter`], and the closing line feed.
    fn reference_json(doc: &(impl Serialize + ?Sized)) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut ser =
            serde_json::Serializer::with_formatter(&mut out, EscapingFormatter::default());
        doc.serialize(&mut ser)?;
        out.push(b'\n');
        Ok(out)
    }

    fn json_of(doc: &(impl Serialize + ?Sized)) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        write_json_value(&mut out, doc)?;
        Ok(out)
    }

    /// Strings with every kind of character the writers treat apart: serde_json's escapes, the
    /// other controls, DEL, the C1 controls, format characters and separators, a character
    /// written as a surrogate pair, plain text and other non-ASCII.
    fn any_string() -> impl proptest::strategy::Strategy<Value = String> {
        "[a-z/ \\\\\"\u{0}-\u{1f}\u{7f}\u{80}-\u{9f}\u{a0}\u{ad}\u{200b}\u{202e}\u{2028}\u{feff}\u{e0041}é😀]{0,12}"
    }

    fn any_document() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            any_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 96, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((any_string(), inner), 0..8)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The documents' JSON is the text of the writer it replaced, byte for byte.
        #[test]
        fn the_json_is_the_escaping_formatters_byte_for_byte(doc in any_document()) {
            proptest::prop_assert_eq!(
                String::from_utf8(json_of(&doc).unwrap()).unwrap(),
                String::from_utf8(reference_json(&doc).unwrap()).unwrap()
            );
        }
    }

    /// Every shape serde can hand a serializer, written as serde_json writes it.
    #[test]
    fn every_serde_shape_is_written_as_serde_json_writes_it() {
        use std::collections::BTreeMap;

        #[derive(Serialize)]
        enum Shape {
            Unit,
            #[serde(rename = "new-type")]
            NewType(u8),
            Tuple(i32, String),
            Struct {
                a: Option<bool>,
                b: Vec<u8>,
            },
            EmptyTuple(),
            EmptyStruct {},
        }
        #[derive(Serialize)]
        struct UnitStruct;
        #[derive(Serialize)]
        struct NewTypeStruct(String);
        #[derive(Serialize)]
        struct TupleStruct(u8, i64);
        #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
        enum KeyVariant {
            First,
        }
        #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
        struct KeyNewType(u16);
        #[derive(Serialize)]
        struct Bytes<'a>(#[serde(serialize_with = "as_bytes")] &'a [u8]);
        fn as_bytes<S: serde::Serializer>(b: &&[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(b)
        }
        #[derive(Serialize)]
        struct Everything<'a> {
            shapes: Vec<Shape>,
            unit: (),
            unit_struct: UnitStruct,
            new_type: NewTypeStruct,
            tuple_struct: TupleStruct,
            tuple: (u8, &'a str, ()),
            empty_tuple: (),
            floats: (f64, f64, f64, f32, f64),
            wide: (i128, u128, i8, i16, u16, u32),
            extremes: (i64, i64, u64, u64),
            chars: (char, char, char),
            bytes: Bytes<'a>,
            empty_bytes: Bytes<'a>,
            by_int: BTreeMap<i32, u8>,
            by_u64: BTreeMap<u64, u8>,
            by_bool: BTreeMap<bool, ()>,
            by_char: BTreeMap<char, Option<u8>>,
            by_variant: BTreeMap<KeyVariant, u8>,
            by_new_type: BTreeMap<KeyNewType, u8>,
            by_option: BTreeMap<Option<&'a str>, u8>,
            empty_map: BTreeMap<String, u8>,
            empty_seq: Vec<Vec<u8>>,
            nested: Vec<Vec<BTreeMap<&'a str, Vec<u8>>>>,
            option: Option<&'a str>,
            none: Option<u8>,
            text: String,
        }
        let doc = Everything {
            shapes: vec![
                Shape::Unit,
                Shape::NewType(7),
                Shape::Tuple(-3, hostile("t")),
                Shape::Struct {
                    a: Some(true),
                    b: vec![1, 2],
                },
                Shape::Struct {
                    a: None,
                    b: Vec::new(),
                },
                Shape::EmptyTuple(),
                Shape::EmptyStruct {},
            ],
            unit: (),
            unit_struct: UnitStruct,
            new_type: NewTypeStruct(hostile("n")),
            tuple_struct: TupleStruct(1, i64::MIN),
            tuple: (0, "x", ()),
            empty_tuple: (),
            floats: (0.1, f64::NAN, f64::NEG_INFINITY, 1.5e-7, -0.0),
            wide: (i128::MIN, u128::MAX, i8::MIN, -1, u16::MAX, 0),
            extremes: (i64::MIN, i64::MAX, u64::MAX, 0),
            chars: ('"', '\u{202e}', 'é'),
            bytes: Bytes(&[0, 255, 10]),
            empty_bytes: Bytes(&[]),
            by_int: [(-5, 1), (0, 2), (i32::MAX, 3)].into_iter().collect(),
            by_u64: [(u64::MAX, 1)].into_iter().collect(),
            by_bool: [(false, ()), (true, ())].into_iter().collect(),
            by_char: [('\n', None), ('a', Some(1)), ('\u{2066}', Some(2))]
                .into_iter()
                .collect(),
            by_variant: [(KeyVariant::First, 1)].into_iter().collect(),
            by_new_type: [(KeyNewType(8080), 1)].into_iter().collect(),
            by_option: [(Some("some"), 1)].into_iter().collect(),
            empty_map: BTreeMap::new(),
            empty_seq: vec![Vec::new(), vec![1]],
            nested: vec![
                vec![],
                vec![BTreeMap::new(), [("k", vec![])].into_iter().collect()],
            ],
            option: Some("yes"),
            none: None,
            text: hostile("end"),
        };
        let ours = String::from_utf8(json_of(&doc).unwrap()).unwrap();
        let theirs = String::from_utf8(reference_json(&doc).unwrap()).unwrap();
        assert_eq!(ours, theirs);
        assert!(ours.contains("\"tuple\": [\n    0,"), "{ours}");
        // Keys that are no string, nor anything serde_json writes as one, are refused by both.
        let by_seq: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into_iter().collect();
        assert!(json_of(&by_seq).is_err() && reference_json(&by_seq).is_err());
        let by_float: Vec<(BTreeMap<&str, u8>, f64)> = Vec::new();
        assert_eq!(
            json_of(&by_float).unwrap(),
            reference_json(&by_float).unwrap()
        );
    }

    /// A document larger than the blocks the writer hands on is written whole.
    #[test]
    fn a_document_of_many_blocks_is_written_whole() {
        let doc: Vec<Value> = (0..20_000)
            .map(|i| json!({"path": format!("/web/{i}"), "n": i, "s": hostile("x")}))
            .collect();
        let ours = json_of(&doc).unwrap();
        assert!(ours.len() > 4 << 16, "{}", ours.len());
        assert_eq!(ours, reference_json(&doc).unwrap());
    }

    #[test]
    fn the_json_layout_is_serde_jsons_pretty_layout_at_any_depth() {
        let mut deep = json!({"leaf": [1, {}, [], "x"]});
        // Deeper than the indentation written at once (64 levels).
        for depth in 0..80 {
            deep = json!({"depth": depth, "empty": {}, "none": [], "list": [[], [{"a": []}]], "next": deep});
        }
        let mut out = Vec::new();
        write_json_value(&mut out, &deep).unwrap();
        let expected = serde_json::to_string_pretty(&deep).unwrap() + "\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    proptest::proptest! {
        /// Whatever the strings, both documents read back exactly and show nothing raw.
        #[test]
        fn documents_are_lossless_and_printable(
            entries in proptest::collection::btree_map(".{0,6}", ".{0,12}|[a-z\n]{0,12}", 0..5),
        ) {
            let doc = json!({"objects": [{"fields": entries}]});
            let mut out = Vec::new();
            write_json_value(&mut out, &doc).unwrap();
            let json_text = String::from_utf8(out).unwrap();
            proptest::prop_assert!(!json_text.chars().any(|c| c != '\n' && text::is_escaped(c)));
            proptest::prop_assert_eq!(serde_json::from_str::<Value>(&json_text).unwrap(), doc.clone());
            let yaml = yaml_text(&doc).unwrap();
            proptest::prop_assert!(!yaml.chars().any(|c| c != '\n' && text::is_escaped(c)), "{}", yaml);
            proptest::prop_assert_eq!(serde_saphyr::from_str::<Value>(&yaml).unwrap(), doc);
        }
    }

    #[test]
    fn a_deleted_route_serves_nothing_after() {
        let mut c = change(Kind::Ingress, "web-user", Action::Delete);
        c.route = Some(info(RouteStyle::NginxAuth, &[], &["/protected/user"]));
        let ing = object_doc(&c).ingress.unwrap();
        assert!(ing.paths.is_empty());
        assert_eq!(ing.paths_before, vec!["/protected/user"]);
    }
}
