//! The plan as a person reads it: a focused YAML diff per changed object and a summary line.
//!
//! Last step before confirmation: `plan` computes what would change, this module turns it into
//! text, and the caller prints it (stdout) or re-prints one object when the approved-diff guard
//! trips. Pure: [`render_plan`] and [`render_change`] only write into the writer they are given,
//! and colour is the caller's decision ([`RenderOptions::color`]), never the terminal's or the
//! environment's.
//!
//! Layout, terraform-style: a header, then per changed object a heading
//! (`~ deployment.apps/web will be updated in place`) and its focused view as YAML, every line
//! behind a two-character gutter (`+ `, `- `, `  `) so the diff stays unambiguous without
//! colour, then the summary line. Updates are unified diffs with changed words emphasised;
//! runs of unchanged lines beyond the context are replaced by a `# (N unchanged lines hidden)`
//! note.

use std::borrow::Cow;
use std::io::{self, Write};

use console::Style;
use serde_json::Value;
use similar::{ChangeTag, DiffOp, DiffTag, TextDiff};

use crate::view_yaml;
use appupdate_model::plan::{Action, ObjectChange};
use appupdate_model::text::{self, Untrusted};
use appupdate_plan::fleet_plan::{self, FleetPlan};
use appupdate_plan::updaters::Plan;

/// How a plan is rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    /// Emit ANSI colours and emphasis. When false, the output has no escape codes at all.
    pub color: bool,
    /// Unchanged lines shown around each change of an update (3 by default, like `diff -u`).
    pub context_lines: usize,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            color: false,
            context_lines: 3,
        }
    }
}

/// Writes the whole plan: a header naming the application, namespace and kube context, one
/// block per changed object in plan order (unchanged objects are left out), and the summary
/// line (`Plan: 1 to create, 2 to update, 1 to delete.` or `No changes.`).
pub fn render_plan(out: &mut impl Write, plan: &Plan, opts: &RenderOptions) -> io::Result<()> {
    let styles = Styles::new(opts.color);
    let header = format!(
        "kubectl appupdate: {} in namespace {} (context {})",
        Untrusted(&plan.app),
        Untrusted(&plan.namespace),
        Untrusted(&plan.context),
    );
    paint(out, &styles.header, &header)?;
    writeln!(out)?;
    writeln!(out)?;
    // What the plan decided about the routes on the user's behalf, and why.
    if let Some(routes) = plan.routes.as_ref().filter(|r| !r.notes.is_empty()) {
        for note in &routes.notes {
            paint(out, &styles.note, &appupdate_model::text::escape(note))?;
            writeln!(out)?;
        }
        writeln!(out)?;
    }
    image_notes(out, plan, &styles)?;
    for change in plan.changes().filter(|c| c.is_change()) {
        render_change(out, change, opts)?;
    }
    paint(out, &styles.summary, &plan.summary().to_string())?;
    writeln!(out)
}

/// What the image check found, before the objects (nothing when it did not run).
fn image_notes(out: &mut impl Write, plan: &Plan, styles: &Styles) -> io::Result<()> {
    if plan.image_notes.is_empty() {
        return Ok(());
    }
    for note in &plan.image_notes {
        paint(out, &styles.note, note)?;
        writeln!(out)?;
    }
    writeln!(out)
}

/// Writes the combined plan of a run over several clusters: a header naming the application
/// and the clusters; then one section per distinct plan — its heading names the clusters
/// that get exactly this plan (at most [`fleet_plan::NAMED`] of them, then how many more:
/// [`fleet_plan::some_names`]) and the namespace, then its objects as [`render_plan`] shows
/// them and its summary (for each of those clusters); then the clusters left out
/// (`--skip-unreachable`) and the totals over every cluster.
pub fn render_fleet(
    out: &mut impl Write,
    fleet: &FleetPlan,
    opts: &RenderOptions,
) -> io::Result<()> {
    let styles = Styles::new(opts.color);
    let contexts: Vec<String> = fleet
        .members
        .iter()
        .map(|m| Untrusted(m.context()).to_string())
        .collect();
    let header = format!(
        "kubectl appupdate: {} on {} cluster{} (context{} {})",
        Untrusted(fleet.app),
        contexts.len(),
        if contexts.len() == 1 { "" } else { "s" },
        if contexts.len() == 1 { "" } else { "s" },
        fleet_plan::some_names(&contexts)
    );
    paint(out, &styles.header, &header)?;
    writeln!(out)?;
    for (i, wave) in fleet.waves.iter().enumerate() {
        let contexts: Vec<String> = wave.iter().map(|c| Untrusted(c).to_string()).collect();
        paint(
            out,
            &styles.header,
            &format!("  wave {}: {}", i + 1, fleet_plan::some_names(&contexts)),
        )?;
        writeln!(out)?;
    }
    writeln!(out)?;
    for section in fleet.sections() {
        let plan = section.plan();
        let names: Vec<String> = section
            .contexts()
            .iter()
            .map(|c| Untrusted(c).to_string())
            .collect();
        let heading = if names.len() == 1 {
            format!(
                "=== context {}: {} in namespace {} ===",
                names[0],
                Untrusted(&plan.app),
                Untrusted(&plan.namespace)
            )
        } else {
            format!(
                "=== contexts {} (the same plan on {} clusters): {} in namespace {} ===",
                fleet_plan::some_names(&names),
                names.len(),
                Untrusted(&plan.app),
                Untrusted(&plan.namespace)
            )
        };
        paint(out, &styles.header, &heading)?;
        writeln!(out)?;
        writeln!(out)?;
        image_notes(out, plan, &styles)?;
        for change in plan.changes().filter(|c| c.is_change()) {
            render_change(out, change, opts)?;
        }
        let summary = plan.summary().to_string();
        let summary = match names.len() {
            1 => summary,
            n if n > fleet_plan::NAMED => format!("{summary} (on each of these {n} clusters)"),
            _ => format!("{summary} (on each of {})", names.join(", ")),
        };
        paint(out, &styles.summary, &summary)?;
        writeln!(out)?;
        writeln!(out)?;
    }
    for (context, reason) in fleet.skipped() {
        let line = format!(
            "=== context {}: skipped (--skip-unreachable): {} ===",
            Untrusted(context),
            Untrusted(reason)
        );
        paint(out, &styles.delete, &line)?;
        writeln!(out)?;
        writeln!(out)?;
    }
    paint(out, &styles.summary, &fleet_plan::total_line(fleet))?;
    writeln!(out)
}

/// Writes the block of one object: its heading, its focused view as YAML (all `+` for a
/// create, all `-` for a delete, a unified diff for an update) and a blank line. An unchanged
/// object gets its heading only.
pub fn render_change(
    out: &mut impl Write,
    change: &ObjectChange,
    opts: &RenderOptions,
) -> io::Result<()> {
    let styles = Styles::new(opts.color);
    write_heading(out, change, &styles)?;
    let yaml = |view: Option<&Value>| view.map(shown_yaml).unwrap_or_default();
    match change.action() {
        Action::Unchanged => {}
        Action::Create => {
            let after = change.views().1;
            write_whole(out, &yaml(after.as_deref()), ChangeTag::Insert, &styles)?;
        }
        Action::Delete => {
            let before = change.views().0;
            write_whole(out, &yaml(before.as_deref()), ChangeTag::Delete, &styles)?;
        }
        Action::Update => {
            let (old, new) = change.views();
            let (old, new) = (yaml(old.as_deref()), yaml(new.as_deref()));
            let rows = diff_rows(&old, &new, opts.context_lines);
            if rows.is_empty() {
                write_note(out, "# (no difference in the fields shown)", &styles)?;
            }
            for row in &rows {
                write_row(out, row, &styles)?;
            }
        }
    }
    writeln!(out)
}

/// The YAML text of a focused view, as the diff shows it: two-space indentation, sequences in
/// kubectl's compact style (`- ` under the parent key), multi-line strings as `|` blocks (so a
/// diff points at the changed line of an nginx snippet), long lines never folded, and strings
/// that a YAML 1.1 reader would take for something else (`on`, `yes`, `1.0`, `80`, `null`)
/// quoted. [`render_change`] gives it views whose strings went through [`text::escape_lines`]
/// first ([`escaped`]), so the diff shows a control or format character in a value with the
/// same escape as every other output (`\e`, `\x07`, `\u{202e}`), never raw.
pub fn yaml_of(view: &Value) -> String {
    view_yaml::write(view).unwrap_or_else(|| view_yaml::saphyr(view))
}

/// [`yaml_of`] the [`escaped`] view. A view [`view_yaml::write`] writes has only printable
/// ASCII strings (and line feeds in blocks), which escaping leaves as they are: it is written
/// without looking for strings to escape first.
fn shown_yaml(view: &Value) -> String {
    if let Some(yaml) = view_yaml::write(view) {
        return yaml;
    }
    match escaped(view) {
        Cow::Borrowed(view) => view_yaml::saphyr(view),
        Cow::Owned(view) => yaml_of(&view),
    }
}

/// `view` with every string — keys too — through [`text::escape_lines`]: the values as the diff
/// shows them. Line feeds stay, so a multi-line value is still a block of lines. Borrowed when
/// no string changes, as for almost every view: copying it cost a tenth of rendering a large
/// plan.
fn escaped(view: &Value) -> Cow<'_, Value> {
    if unescaped(view) {
        Cow::Borrowed(view)
    } else {
        Cow::Owned(escaped_copy(view))
    }
}

/// No string of `view`, key or value, is changed by [`text::escape_lines`].
fn unescaped(view: &Value) -> bool {
    let same = |s: &str| matches!(text::escape_lines(s), Cow::Borrowed(_));
    match view {
        Value::String(s) => same(s),
        Value::Array(items) => items.iter().all(unescaped),
        Value::Object(map) => map.iter().all(|(k, v)| same(k) && unescaped(v)),
        _ => true,
    }
}

fn escaped_copy(view: &Value) -> Value {
    match view {
        Value::String(s) => Value::String(text::escape_lines(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(escaped_copy).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (text::escape_lines(k).into_owned(), escaped_copy(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One line of an update's diff, as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Row {
    /// A YAML line: unchanged (`Equal`), removed or added, in segments whose flag says whether
    /// the segment is a changed word inside a changed line. No trailing newline.
    Line {
        tag: ChangeTag,
        segments: Vec<(bool, String)>,
    },
    /// Unchanged lines left out between (or around) hunks.
    Hidden(usize),
}

/// Unified diff of two YAML texts as rows; empty when the texts are equal.
///
/// Which unchanged lines are shown: `context` lines on each side of every change, and (when
/// `context` is not 0) the lines that enclose a change in the YAML structure — its parent
/// keys up to the top level — so a change deep in a view still shows where it is. Any other
/// run of unchanged lines is replaced by a [`Row::Hidden`] note, but only when it is longer
/// than `2 × context` lines (the same rule by which `diff -u` joins nearby hunks): a small
/// view is shown whole, and a note never stands in for just a line or two.
fn diff_rows(old: &str, new: &str, context: usize) -> Vec<Row> {
    let diff = TextDiff::from_lines(old, new);
    let ops = diff.ops();
    if ops.iter().all(|op| op.tag() == DiffTag::Equal) {
        return Vec::new();
    }
    let old_lines: Vec<&str> = diff.iter_old_slices().collect();
    let new_lines: Vec<&str> = diff.iter_new_slices().collect();

    // Which old-side lines to show; only consulted for unchanged lines.
    let mut shown = vec![false; old_lines.len()];
    let mut show = |i: usize| {
        if let Some(s) = shown.get_mut(i) {
            *s = true;
        }
    };
    for op in ops.iter().filter(|op| op.tag() != DiffTag::Equal) {
        let (old_range, new_range) = (op.old_range(), op.new_range());
        for i in old_range.start.saturating_sub(context)..old_range.start {
            show(i);
        }
        for i in old_range.end..old_range.end.saturating_add(context).min(old_lines.len()) {
            show(i);
        }
        if context == 0 {
            continue;
        }
        if old_range.is_empty() {
            // An insertion: its enclosing lines are found on the new side.
            for j in enclosing_lines(&new_lines, new_range.start) {
                if let Some(i) = old_index_of(ops, j) {
                    show(i);
                }
            }
        } else {
            for i in enclosing_lines(&old_lines, old_range.start) {
                show(i);
            }
        }
    }

    let mut rows = Vec::new();
    for op in ops {
        if op.tag() != DiffTag::Equal {
            rows.extend(op_rows(&diff, op));
            continue;
        }
        let range = op.old_range();
        let mut i = range.start;
        while i < range.end {
            let run_end = (i..range.end)
                .find(|&k| shown[k] != shown[i])
                .unwrap_or(range.end);
            if !shown[i] && run_end - i > context.saturating_mul(2) {
                rows.push(Row::Hidden(run_end - i));
            } else {
                rows.extend((i..run_end).map(|k| Row::Line {
                    tag: ChangeTag::Equal,
                    segments: vec![(false, strip_newline(old_lines[k]).to_owned())],
                }));
            }
            i = run_end;
        }
    }
    rows
}

/// The lines that enclose `lines[at]` in block YAML as [`yaml_of`] writes it (nearest
/// first): each is the closest line above with less indentation, where a compact sequence
/// item (`- `) is enclosed by the key above it at the same indentation.
fn enclosing_lines(lines: &[&str], at: usize) -> Vec<usize> {
    let mut found = Vec::new();
    // A blank line (inside a block scalar) is enclosed by the nearest line above.
    let (mut indent, mut item) = lines
        .get(at)
        .and_then(|l| line_shape(l))
        .unwrap_or((usize::MAX, false));
    for i in (0..at.min(lines.len())).rev() {
        let Some((i_indent, i_item)) = line_shape(lines[i]) else {
            continue;
        };
        if i_indent < indent || (i_indent == indent && item && !i_item) {
            found.push(i);
            (indent, item) = (i_indent, i_item);
            if indent == 0 && !item {
                break;
            }
        }
    }
    found
}

/// Indentation of a line and whether it starts a sequence item; `None` for a blank line.
fn line_shape(line: &str) -> Option<(usize, bool)> {
    let text = line.trim_start_matches(' ');
    let rest = text.trim_end();
    if rest.is_empty() {
        return None;
    }
    Some((
        line.len() - text.len(),
        rest == "-" || rest.starts_with("- "),
    ))
}

/// The old-side index of new-side line `j` when that line is unchanged.
fn old_index_of(ops: &[DiffOp], j: usize) -> Option<usize> {
    ops.iter()
        .filter(|op| op.tag() == DiffTag::Equal)
        .find(|op| op.new_range().contains(&j))
        .map(|op| op.old_range().start + (j - op.new_range().start))
}

fn strip_newline(line: &str) -> &str {
    line.trim_end_matches(['\n', '\r'])
}

fn op_rows<'a>(diff: &'a TextDiff<'a, 'a, str>, op: &DiffOp) -> impl Iterator<Item = Row> + 'a {
    diff.iter_inline_changes(op).map(|change| {
        let mut segments: Vec<(bool, String)> = Vec::new();
        for (emphasised, text) in change.iter_strings_lossy() {
            let text = strip_newline(&text);
            if text.is_empty() {
                continue;
            }
            // Neighbouring segments with the same emphasis read as one word.
            match segments.last_mut() {
                Some((e, prev)) if *e == emphasised => prev.push_str(text),
                _ => segments.push((emphasised, text.to_owned())),
            }
        }
        Row::Line {
            tag: change.tag(),
            segments,
        }
    })
}

/// The styles of every part of the output. All of them are plain when colour is off, and
/// none of them looks at the terminal or the environment when it is on.
struct Styles {
    header: Style,
    heading: Style,
    create: Style,
    update: Style,
    delete: Style,
    insert: Style,
    insert_word: Style,
    remove: Style,
    remove_word: Style,
    context: Style,
    note: Style,
    summary: Style,
}

impl Styles {
    fn new(color: bool) -> Styles {
        let s = |style: Style| style.force_styling(color);
        Styles {
            header: s(Style::new().bold()),
            heading: s(Style::new().bold()),
            create: s(Style::new().green().bold()),
            update: s(Style::new().yellow().bold()),
            delete: s(Style::new().red().bold()),
            insert: s(Style::new().green()),
            insert_word: s(Style::new().green().reverse()),
            remove: s(Style::new().red()),
            remove_word: s(Style::new().red().reverse()),
            context: s(Style::new()),
            note: s(Style::new().dim()),
            summary: s(Style::new().bold()),
        }
    }

    fn line(&self, tag: ChangeTag, emphasised: bool) -> &Style {
        match (tag, emphasised) {
            (ChangeTag::Insert, false) => &self.insert,
            (ChangeTag::Insert, true) => &self.insert_word,
            (ChangeTag::Delete, false) => &self.remove,
            (ChangeTag::Delete, true) => &self.remove_word,
            (ChangeTag::Equal, _) => &self.context,
        }
    }
}

/// Left of every body line: indentation under the heading, then the gutter.
const INDENT: &str = "  ";

fn marker(tag: ChangeTag) -> &'static str {
    match tag {
        ChangeTag::Insert => "+ ",
        ChangeTag::Delete => "- ",
        ChangeTag::Equal => "  ",
    }
}

fn write_heading(out: &mut impl Write, change: &ObjectChange, styles: &Styles) -> io::Result<()> {
    let (symbol, symbol_style, what) = match change.action() {
        Action::Create => ("+", &styles.create, "will be created"),
        Action::Update => ("~", &styles.update, "will be updated in place"),
        Action::Delete => ("-", &styles.delete, "will be deleted"),
        Action::Unchanged => (" ", &styles.heading, "is unchanged"),
    };
    let mut text = format!("{} {what}", Untrusted(change.reference()));
    if let Some(route) = &change.route {
        if route.scopes.is_empty() {
            text.push_str(" (public)");
        } else {
            text.push_str(&format!(" (scopes: {})", Untrusted(route.scopes.join(" "))));
        }
    }
    paint(out, symbol_style, symbol)?;
    write!(out, " ")?;
    paint(out, &styles.heading, &text)?;
    writeln!(out)
}

/// A whole view under one marker: a create (all `+`) or a delete (all `-`).
fn write_whole(
    out: &mut impl Write,
    yaml: &str,
    tag: ChangeTag,
    styles: &Styles,
) -> io::Result<()> {
    for line in yaml.lines() {
        let row = Row::Line {
            tag,
            segments: vec![(false, line.to_owned())],
        };
        write_row(out, &row, styles)?;
    }
    Ok(())
}

fn write_row(out: &mut impl Write, row: &Row, styles: &Styles) -> io::Result<()> {
    match row {
        Row::Hidden(n) => {
            let lines = if *n == 1 { "line" } else { "lines" };
            write_note(out, &format!("# ({n} unchanged {lines} hidden)"), styles)
        }
        Row::Line { tag, segments } => {
            write!(out, "{INDENT}")?;
            // The marker shares the line's colour; it joins the first segment so that a line
            // without emphasis is one coloured span.
            let mut rest = segments.as_slice();
            match rest.split_first() {
                Some(((false, text), tail)) => {
                    paint(
                        out,
                        styles.line(*tag, false),
                        &format!("{}{text}", marker(*tag)),
                    )?;
                    rest = tail;
                }
                _ => paint(out, styles.line(*tag, false), marker(*tag))?,
            }
            for (emphasised, text) in rest {
                paint(out, styles.line(*tag, *emphasised), text)?;
            }
            writeln!(out)
        }
    }
}

fn write_note(out: &mut impl Write, note: &str, styles: &Styles) -> io::Result<()> {
    write!(out, "{INDENT}{}", marker(ChangeTag::Equal))?;
    paint(out, &styles.note, note)?;
    writeln!(out)
}

/// Writes `text` in `style`; nothing at all (not even escape codes) for an empty text.
fn paint(out: &mut impl Write, style: &Style, text: &str) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    write!(out, "{}", style.apply_to(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use appupdate_model::endpoints_file;
    use appupdate_model::plan::Kind;
    use appupdate_model::plan::RouteStyle;
    use appupdate_model::plan::View;
    use appupdate_plan::live::LiveState;
    use appupdate_plan::planner::{UpdateRequest, build_plan};
    use appupdate_plan::routes::nginx_snippet::configuration_snippet;
    use appupdate_plan::routes::refs::{AuthUrl, ObjectRef, RouteFlags, ServiceRef};
    use appupdate_plan::routes::scope_identifier;
    use appupdate_plan::updaters::{AutoscalerUpdate, ContainerUpdate};
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use std::borrow::Cow;
    use std::sync::Arc;

    // ---- live objects, as the API server returns them (server-managed noise included) ----

    fn live_deployment(image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "0d5c3f5e-8a51-4c1e-9a57-2f0b1f2f8a11",
                "resourceVersion": "4711", "generation": 3,
                "creationTimestamp": "2026-11-30T11:48:26Z",
                "labels": {"app": "web"},
                "annotations": {"deployment.kubernetes.io/revision": "3"},
                "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1"}]
            },
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web", "image": image,
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
                    }]}
                }
            },
            "status": {"replicas": 4, "readyReplicas": 4, "observedGeneration": 3}
        })
    }

    fn live_hpa(min: i64, max: i64) -> Value {
        json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "6eefae44-5c7f-4341-98f7-d34b707e2153",
                "resourceVersion": "4712", "creationTimestamp": "2026-11-30T11:48:27Z",
                "labels": {"app": "web"}
            },
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": min, "maxReplicas": max,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]
            },
            "status": {"currentReplicas": 4, "desiredReplicas": 4}
        })
    }

    fn live_service() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "uid": "s-1", "resourceVersion": "4713"},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
            }
        })
    }

    fn scopes(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A managed Ingress as the server returns it, with a foreign label and annotation, a
    /// host and TLS that the tool must leave alone. `snippet_scopes` is what its snippet says
    /// (someone may have edited it by hand).
    fn live_ingress(group: &[&str], snippet_scopes: &[&str], paths: &[&str]) -> Value {
        let id = scope_identifier(&scopes(group));
        let paths: Vec<Value> = paths
            .iter()
            .map(|p| {
                json!({
                    "path": format!("/web{p}"),
                    "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}
                })
            })
            .collect();
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": format!("web-{id}"),
                "namespace": "shop",
                "uid": format!("uid-{id}"),
                "resourceVersion": "4720",
                "generation": 1,
                "creationTimestamp": "2026-11-30T11:48:28Z",
                "labels": {"app": "web", "identifier": id, "team": "shop"},
                "annotations": {
                    "example.com/owner": "team-shop",
                    "nginx.ingress.kubernetes.io/configuration-snippet":
                        configuration_snippet("web", &scopes(snippet_scopes)),
                },
                "managedFields": [{"manager": "kubectl-appupdate", "operation": "Update"}]
            },
            "spec": {
                "ingressClassName": "nginx",
                "rules": [{"host": "shop.example.com", "http": {"paths": paths}}],
                "tls": [{"hosts": ["shop.example.com"], "secretName": "shop-tls"}]
            },
            "status": {"loadBalancer": {}}
        })
    }

    /// The cluster before the run: image 2.0, bounds 2..5, and three managed Ingresses —
    /// public `/unprotected`; `user` serving `/protected/user` and `/protected/admin`, whose
    /// snippet someone edited by hand to also require `beta`; and `reports` serving `/reports`.
    fn live() -> LiveState {
        LiveState {
            deployment: Some(live_deployment(OLD_IMAGE)),
            autoscaler: Some(live_hpa(2, 5)),
            service: Some(live_service()),
            ingresses: vec![
                live_ingress(&[], &[], &["/unprotected"]),
                live_ingress(
                    &["user"],
                    &["beta", "user"],
                    &["/protected/admin", "/protected/user"],
                ),
                live_ingress(&["reports"], &["reports"], &["/reports"]),
            ],
            // Three records: the change-cause annotation names revision 4.
            history: Some(Some(json!({
                "metadata": {"name": "web-appupdate-history", "resourceVersion": "3", "uid": "u-h"},
                "binaryData": {"revision-1.json.gz": "a", "revision-2.json.gz": "b", "revision-3.json.gz": "c"}
            }))),
            ..LiveState::default()
        }
    }

    /// `/protected/admin` moves to a new `admin user` group, the `user` group's snippet is
    /// put back to `user`, and the `reports` group goes away.
    const ENDPOINTS: &str = "\
endpoints:
  - path: /unprotected
  - path: /protected/user
    scopes: [user]
  - path: /protected/admin
    scopes: [user, admin]
";

    const OLD_IMAGE: &str = "registry.example.com/shop/web:2.0";
    const NEW_IMAGE: &str = "registry.example.com/shop/web:2.1";

    /// The plan the real planners make for these flags against [`live`].
    fn plan_for(image: Option<&str>, min: Option<i32>, max: Option<i32>, endpoints: bool) -> Plan {
        plan_against(&live(), image, min, max, endpoints)
    }

    /// The plan the real planners make for these flags against `live`.
    fn plan_against(
        live: &LiveState,
        image: Option<&str>,
        min: Option<i32>,
        max: Option<i32>,
        endpoints: bool,
    ) -> Plan {
        let file = endpoints_file::parse(ENDPOINTS, "endpoints.yaml").unwrap();
        let container_update = ContainerUpdate {
            image: image.map(str::to_owned),
        };
        let autoscaler_update = AutoscalerUpdate {
            min_replicas: min,
            max_replicas: max,
        };
        let req = UpdateRequest {
            app: "web",
            namespace: "shop",
            context: "sandbox",
            container: None,
            container_update: &container_update,
            autoscaler_update: &autoscaler_update,
            endpoints: endpoints.then_some(&file),
            routes: &RouteFlags::default(),
            undo_of: None,
        };
        build_plan(&req, &mut live.clone()).unwrap()
    }

    fn image_plan() -> Plan {
        plan_for(Some(NEW_IMAGE), None, None, false)
    }

    fn bounds_plan() -> Plan {
        plan_for(None, Some(3), Some(8), false)
    }

    fn ingress_plan() -> Plan {
        plan_for(None, None, None, true)
    }

    fn no_op_plan() -> Plan {
        plan_for(Some(OLD_IMAGE), Some(2), Some(5), false)
    }

    fn ingress(plan: &Plan, action: Action) -> &ObjectChange {
        plan.changes()
            .find(|c| c.kind == Kind::Ingress && c.action() == action)
            .unwrap()
    }

    // ---- rendering helpers ----

    fn render(plan: &Plan, color: bool) -> String {
        let mut out = Vec::new();
        let opts = RenderOptions {
            color,
            ..RenderOptions::default()
        };
        render_plan(&mut out, plan, &opts).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Escape codes made visible, so a colour snapshot can be read and reviewed.
    fn visible(s: &str) -> String {
        s.replace('\u{1b}', "␛")
    }

    fn snapshot_both(name: &str, plan: &Plan) {
        let plain = render(plan, false);
        assert!(!plain.contains('\u{1b}'), "escape code with colour off");
        insta::assert_snapshot!(format!("{name}_plain"), plain);
        let color = render(plan, true);
        assert!(color.contains('\u{1b}'), "no escape code with colour on");
        insta::assert_snapshot!(format!("{name}_color"), visible(&color));
    }

    /// The changed words of an update's diff, per side: `(removed, added)`.
    fn emphasised(change: &ObjectChange) -> (Vec<String>, Vec<String>) {
        let old = yaml_of(&change.before.as_ref().unwrap().get());
        let new = yaml_of(&change.after.as_ref().unwrap().get());
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        for row in diff_rows(&old, &new, 3) {
            if let Row::Line { tag, segments } = row {
                for (e, text) in segments {
                    match (tag, e) {
                        (ChangeTag::Delete, true) => removed.push(text),
                        (ChangeTag::Insert, true) => added.push(text),
                        _ => {}
                    }
                }
            }
        }
        (removed, added)
    }

    // ---- snapshots: the spec of what a user sees ----

    #[test]
    fn snapshot_image_only() {
        snapshot_both("image_only", &image_plan());
    }

    #[test]
    fn snapshot_min_max() {
        snapshot_both("min_max", &bounds_plan());
    }

    #[test]
    fn snapshot_all_together() {
        snapshot_both(
            "all_together",
            &plan_for(Some(NEW_IMAGE), Some(3), Some(8), false),
        );
    }

    #[test]
    fn snapshot_ingress_create_update_delete() {
        snapshot_both("ingresses", &ingress_plan());
    }

    #[test]
    fn snapshot_everything() {
        snapshot_both(
            "everything",
            &plan_for(Some(NEW_IMAGE), Some(3), Some(8), true),
        );
    }

    /// The route plan of [`ENDPOINTS`] with `flags` against `live`.
    fn routes_plan(flags: &RouteFlags, live: &LiveState) -> Plan {
        let file = endpoints_file::parse(ENDPOINTS, "endpoints.yaml").unwrap();
        let req = UpdateRequest {
            app: "web",
            namespace: "shop",
            context: "sandbox",
            container: None,
            container_update: &ContainerUpdate::default(),
            autoscaler_update: &AutoscalerUpdate::default(),
            endpoints: Some(&file),
            routes: flags,
            undo_of: None,
        };
        build_plan(&req, &mut live.clone()).unwrap()
    }

    /// A cluster with the Service and no routes yet; `nginx` is the default IngressClass.
    fn no_routes() -> LiveState {
        LiveState {
            service: Some(live_service()),
            ingress_classes: Some(vec![json!({"metadata": {"name": "nginx",
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}}})]),
            ..LiveState::default()
        }
    }

    fn nginx_auth_flags() -> RouteFlags {
        RouteFlags {
            style: Some(RouteStyle::NginxAuth),
            auth_url: Some(AuthUrl::parse("http://oauth.auth.svc:8080/verify").unwrap()),
            ..RouteFlags::default()
        }
    }

    fn gateway_flags() -> RouteFlags {
        RouteFlags {
            style: Some(RouteStyle::Gateway),
            gateway: Some(ObjectRef::parse("gateways/public").unwrap()),
            auth_service: Some(ServiceRef::parse("auth/oauth:8080").unwrap()),
            hosts: vec!["shop.example.com".into()],
            ..RouteFlags::default()
        }
    }

    #[test]
    fn snapshot_first_exposure_in_each_style() {
        snapshot_both(
            "first_exposure_nginx_snippet",
            &routes_plan(&RouteFlags::default(), &no_routes()),
        );
        snapshot_both(
            "first_exposure_nginx_auth",
            &routes_plan(&nginx_auth_flags(), &no_routes()),
        );
        snapshot_both(
            "first_exposure_gateway",
            &routes_plan(&gateway_flags(), &no_routes()),
        );
    }

    #[test]
    fn snapshot_migrations_from_nginx_snippet() {
        snapshot_both(
            "migration_nginx_snippet_to_gateway",
            &routes_plan(&gateway_flags(), &live()),
        );
        snapshot_both(
            "migration_nginx_snippet_to_nginx_auth",
            &routes_plan(&nginx_auth_flags(), &live()),
        );
    }

    #[test]
    fn snapshot_no_changes() {
        snapshot_both("no_changes", &no_op_plan());
    }

    // ---- word-level emphasis ----

    #[test]
    fn image_change_emphasises_only_the_tag() {
        let plan = image_plan();
        let change = plan.changes().next().unwrap();
        assert_eq!(
            emphasised(change),
            (vec!["2.0".to_owned()], vec!["2.1".to_owned()])
        );
    }

    #[test]
    fn bound_changes_emphasise_only_the_numbers() {
        let plan = bounds_plan();
        let change = plan.changes().next().unwrap();
        assert_eq!(
            emphasised(change),
            (
                vec!["2".to_owned(), "5".to_owned()],
                vec!["3".to_owned(), "8".to_owned()]
            )
        );
    }

    #[test]
    fn snippet_change_emphasises_the_changed_scope_inside_the_block() {
        let plan = ingress_plan();
        let (removed, added) = emphasised(ingress(&plan, Action::Update));
        // "beta " from the snippet; the moved path's whole lines are removed, not refined.
        assert_eq!(removed, vec!["beta ".to_owned()]);
        assert_eq!(added, Vec::<String>::new());
    }

    #[test]
    fn emphasis_is_reversed_on_top_of_the_line_colour() {
        let out = render(&image_plan(), true);
        assert!(
            out.contains("\u{1b}[32m\u{1b}[7m2.1\u{1b}[0m"),
            "{}",
            visible(&out)
        );
        assert!(
            out.contains("\u{1b}[31m\u{1b}[7m2.0\u{1b}[0m"),
            "{}",
            visible(&out)
        );
    }

    // ---- layout ----

    #[test]
    fn unchanged_objects_get_no_block() {
        let out = render(&no_op_plan(), false);
        assert_eq!(
            out,
            "kubectl appupdate: web in namespace shop (context sandbox)\n\nNo changes.\n"
        );
    }

    #[test]
    fn a_create_is_all_plus_and_a_delete_all_minus() {
        let plan = ingress_plan();
        for (action, mark) in [(Action::Create, "  + "), (Action::Delete, "  - ")] {
            let mut out = Vec::new();
            render_change(&mut out, ingress(&plan, action), &RenderOptions::default()).unwrap();
            let out = String::from_utf8(out).unwrap();
            let body: Vec<&str> = out.lines().skip(1).take_while(|l| !l.is_empty()).collect();
            assert!(body.len() > 20, "{out}");
            assert!(body.iter().all(|l| l.starts_with(mark)), "{out}");
            assert!(out.ends_with("\n\n"));
        }
    }

    #[test]
    fn context_lines_bound_the_unchanged_lines_shown() {
        let plan = image_plan();
        let change = plan.changes().next().unwrap();
        let mut out = Vec::new();
        let opts = RenderOptions {
            color: false,
            context_lines: 0,
        };
        render_change(&mut out, change, &opts).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "~ deployment.apps/web will be updated in place\n\
             \x20   # (5 unchanged lines hidden)\n\
             \x20 +   annotations:\n\
             \x20 +     kubernetes.io/change-cause: \"kubectl-appupdate: image registry.example.com/shop/web:2.0 → registry.example.com/shop/web:2.1 (revision 4)\"\n\
             \x20   # (5 unchanged lines hidden)\n\
             \x20 -         image: registry.example.com/shop/web:2.0\n\
             \x20 +         image: registry.example.com/shop/web:2.1\n\n"
        );
    }

    #[test]
    fn a_change_deep_in_a_view_keeps_its_parent_keys() {
        let plan = ingress_plan();
        let mut out = Vec::new();
        let opts = RenderOptions {
            color: false,
            context_lines: 1,
        };
        render_change(&mut out, ingress(&plan, Action::Update), &opts).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "~ ingress.networking.k8s.io/web-04f8996da763b7a9 will be updated in place (scopes: user)
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    metadata:
    # (5 unchanged lines hidden)
      annotations:
        nginx.ingress.kubernetes.io/configuration-snippet: |
  -       set $scopes \"beta user\";
  +       set $scopes \"user\";
          auth_request /external-auth;
    # (5 unchanged lines hidden)
    spec:
      ingressClassName: nginx
      rules:
      - host: shop.example.com
        http:
          paths:
  -       - path: /web/protected/admin
  -         pathType: Prefix
  -         backend:
  -           service:
  -             name: web
  -             port:
  -               number: 80
          - path: /web/protected/user
    # (10 unchanged lines hidden)

"
        );
    }

    #[test]
    fn unlimited_context_shows_the_whole_view() {
        let plan = ingress_plan();
        let change = ingress(&plan, Action::Update);
        let mut out = Vec::new();
        let opts = RenderOptions {
            color: false,
            context_lines: usize::MAX,
        };
        render_change(&mut out, change, &opts).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("hidden"), "{out}");
        let old_lines = yaml_of(&change.before.as_ref().unwrap().get())
            .lines()
            .count();
        let removed = out.lines().filter(|l| l.starts_with("  - ")).count();
        let kept = out.lines().filter(|l| l.starts_with("    ")).count();
        assert_eq!(removed + kept, old_lines);
    }

    #[test]
    fn an_update_without_a_visible_difference_says_so() {
        let view = json!({"apiVersion": "v1", "kind": "X"});
        let change = ObjectChange {
            kind: Kind::Deployment,
            namespace: "shop".into(),
            name: "web".into(),
            live: None,
            fields: vec![],
            before: Some(Arc::new(view.clone()).into()),
            after: Some(Arc::new(view).into()),
            write: appupdate_model::plan::Write::sample(Action::Update),
            route: None,
        };
        let mut out = Vec::new();
        render_change(&mut out, &change, &RenderOptions::default()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "~ deployment.apps/web will be updated in place\n    # (no difference in the fields shown)\n\n"
        );
    }

    #[test]
    fn names_from_the_command_line_cannot_inject_escape_codes() {
        let mut plan = image_plan();
        plan.context = "evil\u{1b}[2Jctx".into();
        let out = render(&plan, false);
        assert!(!out.contains('\u{1b}'), "{out}");
        assert!(
            out.starts_with("kubectl appupdate: web in namespace shop (context evil\\e[2Jctx)\n")
        );
    }

    #[test]
    fn odd_content_renders_line_by_line() {
        let long = "x".repeat(5000);
        // Control characters in keys, in values and in multi-line values (ESC, C1 CSI, DEL,
        // BEL) must come out escaped, never raw.
        let before = json!({
            "a": long, "u": "日本語 🚀 é", "esc": "a\u{1b}[31mb", "cr": "a\r\nb",
            "k\u{1b}[2J": "v", "c1": "\u{9b}31m\u{7f}", "block": "one\n\u{1b}]0;title\u{7}\n",
            "bidi": "a\u{202e}b\u{2066}c\u{200b}d\u{feff}", "multi\u{202e}": "x\u{2028}\ny\n",
            "empty": {}, "list": [], "n": null
        });
        let after = json!({
            "a": format!("{long} y"), "u": "日本語 🚀 è", "esc": "a\u{1b}[32mb", "cr": "a\r\nc",
            "k\u{1b}[2J": "w", "c1": "\u{9b}32m", "block": "one\n\u{1b}]0;other\u{7}\n",
            "bidi": "a\u{202d}b", "multi\u{202e}": "x\u{2029}\nz\n",
            "empty": {"k": ""}, "list": [1], "n": 1.5
        });
        for (action, before, after) in [
            (Action::Update, Some(before.clone()), Some(after.clone())),
            (Action::Update, Some(json!({})), Some(after.clone())),
            (Action::Update, Some(before.clone()), Some(json!({}))),
            (Action::Create, None, Some(json!({}))),
            (Action::Delete, Some(json!(null)), None),
            (Action::Update, None, None),
        ] {
            let change = ObjectChange {
                kind: Kind::Ingress,
                namespace: "shop".into(),
                name: "web-x".into(),
                live: None,
                fields: vec![],
                before: before.map(View::from),
                after: after.map(View::from),
                write: appupdate_model::plan::Write::sample(action),
                route: None,
            };
            for color in [false, true] {
                let mut out = Vec::new();
                let opts = RenderOptions {
                    color,
                    context_lines: 3,
                };
                render_change(&mut out, &change, &opts).unwrap();
                let out = String::from_utf8(out).unwrap();
                let plain = console::strip_ansi_codes(&out);
                assert!(
                    !plain.chars().any(|c| text::is_escaped(c) && c != '\n'),
                    "{out:?}"
                );
                assert!(matches!(text::for_terminal(&out, color), Cow::Borrowed(_)));
                if !color {
                    assert_eq!(plain, out);
                }
                let mut lines = plain.lines();
                assert!(lines.next().unwrap().starts_with(['~', '+', '-']));
                for line in lines.filter(|l| !l.is_empty()) {
                    assert!(
                        ["  + ", "  - ", "    "].iter().any(|p| line.starts_with(p)),
                        "{line:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_hostile_image_shows_with_the_same_escapes_as_every_other_output() {
        let hostile = "nginx:1.25\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}";
        let mut live = live();
        live.deployment = Some(live_deployment(hostile));
        let plan = plan_against(&live, Some(NEW_IMAGE), None, None, false);
        for color in [false, true] {
            let out = render(&plan, color);
            let plain = console::strip_ansi_codes(&out);
            assert!(
                plain.contains("-         image: nginx:1.25\\e]0;pwned\\x07\\e[2J\\u{202e}\n"),
                "{plain}"
            );
            assert!(matches!(text::for_terminal(&out, color), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn a_view_is_copied_for_escaping_only_when_a_string_in_it_changes() {
        let clean = json!({"metadata": {"name": "web", "annotations": {"a": "line 1\nline 2"}}, "spec": {"n": 3}});
        assert!(matches!(escaped(&clean), Cow::Borrowed(v) if *v == clean));
        for hostile in [
            json!({"spec": {"rules": [{"http": {"paths": [{"path": "/web/\u{1b}[2J"}]}}]}}),
            json!({"metadata": {"annotations": {"key\u{202e}": "v"}}}),
        ] {
            let Cow::Owned(copy) = escaped(&hostile) else {
                panic!("{hostile} was not escaped")
            };
            assert_eq!(copy, escaped_copy(&hostile));
            assert_ne!(copy, hostile);
        }
    }

    // ---- YAML ----

    #[test]
    fn yaml_quotes_what_a_reader_would_misread_and_blocks_multi_line_strings() {
        let view = json!({
            "metadata": {"annotations": {
                "a": "on", "b": "yes", "c": "1.0", "d": "80", "e": "null", "f": "",
                "nginx.ingress.kubernetes.io/configuration-snippet": "set $scopes \"user\";\nrewrite ^/web/(.*)$ /$1 break;\n",
                "long": format!("{} end", "word ".repeat(30)),
            }},
            "spec": {"rules": [{"http": {"paths": [{"path": "/web/x"}]}}], "tls": []},
        });
        let long = format!("    long: {} end\n", "word ".repeat(30));
        assert_eq!(
            yaml_of(&view),
            "metadata:\n  annotations:\n    a: \"on\"\n    b: \"yes\"\n    c: \"1.0\"\n    d: \"80\"\n    e: \"null\"\n    f: \"\"\n    \
             nginx.ingress.kubernetes.io/configuration-snippet: |\n      set $scopes \"user\";\n      rewrite ^/web/(.*)$ /$1 break;\n"
                .to_owned()
                + &long
                + "spec:\n  rules:\n  - http:\n      paths:\n      - path: /web/x\n  tls: []\n"
        );
    }

    #[test]
    fn yaml_of_empty_views() {
        assert_eq!(yaml_of(&json!({})), "{}\n");
        assert_eq!(yaml_of(&Value::Null), "null\n");
    }

    proptest::proptest! {
        /// With unlimited context, an update's rows rebuild both views exactly: `-` and
        /// context lines give the old YAML, `+` and context lines the new one. Nothing is
        /// lost, duplicated or reordered, whatever the strings contain.
        #[test]
        fn update_rows_rebuild_both_sides(
            a in proptest::collection::btree_map("[a-z]{1,3}", "\\PC{0,12}|[a-z \n]{0,20}", 0..6),
            b in proptest::collection::btree_map("[a-z]{1,3}", "\\PC{0,12}|[a-z \n]{0,20}", 0..6),
        ) {
            let old = yaml_of(&json!({"spec": a}));
            let new = yaml_of(&json!({"spec": b}));
            let rows = diff_rows(&old, &new, usize::MAX);
            let side = |keep: ChangeTag| -> String {
                rows.iter().filter_map(|r| match r {
                    Row::Line { tag, segments } if *tag == keep || *tag == ChangeTag::Equal => {
                        Some(segments.iter().map(|(_, s)| s.as_str()).collect::<String>() + "\n")
                    }
                    Row::Line { .. } => None,
                    Row::Hidden(_) => panic!("nothing is hidden with unlimited context"),
                }).collect()
            };
            if old == new {
                proptest::prop_assert!(rows.is_empty());
            } else {
                proptest::prop_assert_eq!(side(ChangeTag::Delete), old);
                proptest::prop_assert_eq!(side(ChangeTag::Insert), new);
            }
        }
    }
}
