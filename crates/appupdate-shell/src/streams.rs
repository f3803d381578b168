//! Which stream each line goes to: the one place that decides ([`stream`]).
//!
//! kubectl's split. stdout carries the data — the plan, and the report lines about what was
//! done; stderr carries everything else — what was not done, the closing line of a run that
//! did not go as planned, warnings, progress, the prompt and the reason a run exits non-zero.
//! With `-o json|yaml`, stdout carries exactly one document, so the report lines about what
//! was done go to stderr too.
//!
//! | line | `-o diff` | `-o json\|yaml` |
//! | --- | --- | --- |
//! | the plan ([`Kind::Plan`]) | stdout | stdout |
//! | `… updated`, `… already as planned`, `auth enforced on …` ([`Kind::Done`]) | stdout | stderr |
//! | `… NOT …`, `… MAYBE …`, a tripped guard's new diff, `Nothing was changed.`, `The application is partly updated…`, `auth NOT enforced on …` ([`Kind::NotDone`]) | stderr | stderr |
//! | signal notices, the server's warnings (`Warning: …`), rollout progress, `Checking auth at …`, `-v` request lines ([`Kind::Notice`]) | stderr | stderr |
//! | `error: …` ([`Kind::Error`]) | stderr | stderr |
//! | a fleet's plan shown with the question while stdout waits for the document ([`Kind::Review`]) | stderr | stderr |
//!
//! The prompt (dialoguer) and the progress bar (indicatif) draw on stderr themselves; clap's
//! `--help` and `--version` go to stdout and its errors to stderr, as every CLI does.
//!
//! This is also the output layer that keeps the terminal ours: every line is written through
//! [`text::for_terminal`], so what reaches stdout and stderr holds no control or format
//! character other than line feeds and, with colour on, the SGR codes we emit. The values in
//! a line are escaped where the line is built ([`text::Untrusted`], [`text::escape`]); this
//! last pass finds nothing to do then, and a debug build (the tests) fails when it does find
//! something, so a value printed without escaping is caught rather than silently fixed. The
//! prompt and the progress bar, which draw themselves, are given escaped text.

use std::borrow::Cow;
use std::io::{self, Write};

use crate::cli::{CliError, OutputFormat};
use crate::error::{AppError, Stage};
use crate::exit::Ending;
use crate::fleet::{self, ClusterState, FleetEnd};
use crate::history_store::Recorded;
use appupdate_model::output;
use appupdate_model::report::{self, Fate, Outcome, Report};
use appupdate_model::text::{self, Untrusted};
use appupdate_plan::fleet_plan::FleetPlan;
use appupdate_plan::history::{self, History};
use appupdate_plan::updaters::Plan;
use appupdate_render::diff_render::{self, RenderOptions};

/// What a line is: this alone (with the output format) decides its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The plan: the diff, or the one `-o json|yaml` document.
    Plan,
    /// A report line about something done, or already as planned.
    Done,
    /// A report line about something not done or that may not have been, the new diff behind
    /// a tripped guard, and the closing line of a run that did not go as planned.
    NotDone,
    /// What happens while the run goes on: a signal received, the server's warnings, rollout
    /// progress, `-v` request lines.
    Notice,
    /// The reason a run exits with an error.
    Error,
    /// The plan shown with the question when stdout carries a document (`-o json|yaml` of a
    /// run over several clusters, whose document comes at the end).
    Review,
}

impl From<Fate> for Kind {
    fn from(fate: Fate) -> Kind {
        match fate {
            Fate::Done => Kind::Done,
            Fate::NotDone => Kind::NotDone,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The stream of every line of output.
pub fn stream(kind: Kind, output: OutputFormat) -> Stream {
    match (kind, output) {
        (Kind::Plan, _) | (Kind::Done, OutputFormat::Diff) => Stream::Stdout,
        (Kind::Done, OutputFormat::Json | OutputFormat::Yaml)
        | (Kind::NotDone | Kind::Notice | Kind::Error | Kind::Review, _) => Stream::Stderr,
    }
}

/// `text` as it may reach the terminal: [`text::for_terminal`], which must find nothing left to
/// escape — in a debug build a value that was not escaped where its line was built fails here.
fn guarded(text: &str, color: bool) -> Cow<'_, str> {
    let safe = text::for_terminal(text, color);
    debug_assert!(
        matches!(safe, Cow::Borrowed(_)),
        "text that was not escaped reached the terminal: {safe}"
    );
    safe
}

/// Writes a notice (one line, no colour) on its stream, which does not depend on the output
/// format.
pub fn notice(line: &str) {
    let mut err = io::stderr().lock();
    // Nothing to do about a notice that cannot be written.
    let _ = writeln!(err, "{}", guarded(line, false));
}

/// Writes a warning the server sent with an answer (a deprecation, an admission webhook's
/// warning) as kubectl does: `Warning: <text>` on stderr, the text escaped.
pub fn warning(text: &str) {
    notice(&format!("Warning: {}", Untrusted(text)));
}

/// stdout and stderr for one run: where each kind of line goes, and whether it is coloured
/// (each stream has its own colour decision).
#[derive(Clone, Copy, Debug)]
pub struct Streams {
    output: OutputFormat,
    color_stdout: bool,
    color_stderr: bool,
}

impl Streams {
    pub fn new(output: OutputFormat, color_stdout: bool, color_stderr: bool) -> Streams {
        Streams {
            output,
            color_stdout,
            color_stderr,
        }
    }

    /// Whether lines of `kind` are coloured.
    pub fn color(&self, kind: Kind) -> bool {
        match stream(kind, self.output) {
            Stream::Stdout => self.color_stdout,
            Stream::Stderr => self.color_stderr,
        }
    }

    /// Writes whole lines of `kind` (`text` ends with a newline) and flushes them, so that
    /// lines on the two streams appear in the order they were written. The text goes through
    /// [`guarded`]: escaped values, and colour only when `kind`'s stream is coloured.
    pub fn write(&self, kind: Kind, text: &[u8]) -> io::Result<()> {
        let text = String::from_utf8_lossy(text);
        let text = guarded(&text, self.color(kind));
        match stream(kind, self.output) {
            Stream::Stdout => write_all(&mut io::stdout().lock(), text.as_bytes()),
            Stream::Stderr => write_all(&mut io::stderr().lock(), text.as_bytes()),
        }
    }

    /// A writer for lines of `kind`, for code that writes as it goes (rollout progress): each
    /// line goes through [`guarded`] as [`Streams::write`] does.
    pub fn writer(&self, kind: Kind) -> Box<dyn Write + Send> {
        Box::new(LineWriter {
            stream: stream(kind, self.output),
            color: self.color(kind),
            pending: Vec::new(),
        })
    }

    /// The plan, as a diff or as the one `-o json|yaml` document.
    ///
    /// Written as it is rendered, through a buffer of whole lines ([`Streams::writer`]): a
    /// plan of thousands of objects is never held as text.
    /// The plan, with who else owns what it changes in the `-o json|yaml` document.
    pub fn plan(
        &self,
        plan: &Plan,
        owners: &[appupdate_model::owners::ObjectOwners],
    ) -> io::Result<()> {
        let format = match self.output {
            OutputFormat::Diff => {
                let mut out = io::BufWriter::with_capacity(1 << 16, self.writer(Kind::Plan));
                let opts = RenderOptions {
                    color: self.color(Kind::Plan),
                    ..RenderOptions::default()
                };
                diff_render::render_plan(&mut out, plan, &opts)?;
                return out.flush();
            }
            OutputFormat::Json => output::Format::Json,
            OutputFormat::Yaml => output::Format::Yaml,
        };
        // Buffered by the document's writer itself.
        let mut out = self.writer(Kind::Plan);
        let doc = output::document(plan).with_owners(owners);
        output::write_plan_document(&mut out, format, &doc)?;
        out.flush()
    }

    /// The combined plan of a run over several clusters, as a diff; with `-o json|yaml`
    /// nothing yet (the document, with each cluster's outcome, comes at the end).
    pub fn fleet_plan(&self, fleet: &FleetPlan) -> io::Result<()> {
        if self.output != OutputFormat::Diff {
            return Ok(());
        }
        self.fleet_diff(Kind::Plan, fleet)
    }

    /// With `-o json|yaml`, the combined plan as a diff on stderr, for the question.
    pub fn fleet_review(&self, fleet: &FleetPlan) -> io::Result<()> {
        if self.output == OutputFormat::Diff {
            return Ok(());
        }
        self.fleet_diff(Kind::Review, fleet)
    }

    fn fleet_diff(&self, kind: Kind, fleet: &FleetPlan) -> io::Result<()> {
        let mut text = Vec::new();
        let opts = RenderOptions {
            color: self.color(kind),
            ..RenderOptions::default()
        };
        diff_render::render_fleet(&mut text, fleet, &opts)?;
        self.write(kind, &text)
    }

    /// With `-o json|yaml`, the fleet document: each cluster's plan and, once the run got
    /// that far, its outcome.
    pub fn fleet_document(
        &self,
        fleet: &FleetPlan,
        order: &crate::fleet::FleetOrder,
        end: Option<&FleetEnd>,
    ) -> io::Result<()> {
        let format = match self.output {
            OutputFormat::Diff => return Ok(()),
            OutputFormat::Json => output::Format::Json,
            OutputFormat::Yaml => output::Format::Yaml,
        };
        let mut text = Vec::new();
        output::write_document(&mut text, format, &fleet::document(fleet, order, end))?;
        self.write(Kind::Plan, &text)
    }

    /// How each cluster of a fleet ended: its heading, what the guard stopped (the new diff),
    /// what happened to each object and to the rollout, the history record; then the
    /// closing line.
    /// More than a few clusters that ended the same way are told once, with their count
    /// ([`FleetEnd::told`]).
    pub fn fleet_report(&self, end: &FleetEnd) -> io::Result<()> {
        let indented = |line: &report::Line, color: bool| format!("  {}\n", line.render(color));
        for told in end.told(|r| recorded_line(r, "")) {
            let (heading, cluster) = match told {
                fleet::Told::One(c) => (c.heading(), c),
                fleet::Told::Many(cs) => match cs.first() {
                    Some(first) => (fleet::group_heading(&cs), *first),
                    None => continue,
                },
            };
            let kind = Kind::from(heading.fate);
            self.write(
                kind,
                format!("{}\n", heading.render(self.color(kind))).as_bytes(),
            )?;
            if let ClusterState::Applied { report, .. } | ClusterState::Refused(report) =
                &cluster.state
            {
                self.tripped(report)?;
            }
            for line in cluster.objects() {
                let kind = Kind::from(line.fate);
                self.write(kind, indented(&line, self.color(kind)).as_bytes())?;
            }
            if let ClusterState::Applied { recorded, .. } = &cluster.state {
                self.recorded_indented(recorded, "  ")?;
            }
            for line in cluster.rollout(&end.app) {
                let kind = Kind::from(line.fate);
                self.write(kind, indented(&line, self.color(kind)).as_bytes())?;
            }
        }
        let closing = end.closing();
        let kind = Kind::from(closing.fate);
        self.write(
            kind,
            format!("{}\n", closing.render(self.color(kind))).as_bytes(),
        )
    }

    /// For each object the guard stopped, what would change now.
    fn tripped(&self, report: &Report) -> io::Result<()> {
        for (_, outcome) in &report.entries {
            if let Outcome::Tripped {
                fresh: Some(fresh), ..
            } = outcome
            {
                let mut text = b"The live object changed after the plan was shown. This is what would change now (not applied):\n".to_vec();
                let opts = RenderOptions {
                    color: self.color(Kind::NotDone),
                    ..RenderOptions::default()
                };
                diff_render::render_change(&mut text, fresh, &opts)?;
                self.write(Kind::NotDone, &text)?;
            }
        }
        Ok(())
    }

    /// What happened to each object: first, for each object the guard stopped, what would
    /// change now; then one line per object and the closing line.
    pub fn report(&self, report: &Report) -> io::Result<()> {
        self.tripped(report)?;
        for line in report::lines(report) {
            let kind = Kind::from(line.fate);
            let text = line.render(self.color(kind)) + "\n";
            self.write(kind, text.as_bytes())?;
        }
        Ok(())
    }

    /// Lines each done or not done (`--verify-url`'s answers), each on its stream.
    pub fn lines(&self, lines: &[report::Line]) -> io::Result<()> {
        for line in lines {
            let kind = Kind::from(line.fate);
            self.write(
                kind,
                format!("{}\n", line.render(self.color(kind))).as_bytes(),
            )?;
        }
        Ok(())
    }

    /// What became of the run's history record: its revision (with what was done), or the
    /// warning that it was not recorded.
    pub fn recorded(&self, recorded: &Recorded) -> io::Result<()> {
        self.recorded_indented(recorded, "")
    }

    fn recorded_indented(&self, recorded: &Recorded, indent: &str) -> io::Result<()> {
        match recorded {
            Recorded::Nothing => Ok(()),
            Recorded::Revision { .. } => {
                self.write(Kind::Done, recorded_line(recorded, indent).as_bytes())
            }
            Recorded::Warning(text) => {
                let text = if self.color(Kind::Notice) {
                    console::style(text)
                        .yellow()
                        .force_styling(true)
                        .to_string()
                } else {
                    text.clone()
                };
                self.write(Kind::Notice, format!("{indent}{text}\n").as_bytes())
            }
        }
    }

    /// `history NAME`: the records as a table, or as one JSON or YAML document.
    pub fn history(
        &self,
        format: crate::cli::HistoryFormat,
        app: &str,
        namespace: &str,
        stored: &History,
    ) -> io::Result<()> {
        use crate::cli::HistoryFormat;
        let text = match format {
            HistoryFormat::Table => {
                history::render_table(stored, &|s| appupdate_model::text::escape(s).into_owned())
            }
            // The documents' one writer: what a ConfigMap writer put in a record (a user name
            // holding a right-to-left override) is a JSON or YAML escape, not a raw character.
            HistoryFormat::Json | HistoryFormat::Yaml => {
                let format = if format == HistoryFormat::Json {
                    output::Format::Json
                } else {
                    output::Format::Yaml
                };
                let mut out = Vec::new();
                output::write_document(
                    &mut out,
                    format,
                    &history::document(app, namespace, stored),
                )?;
                return self.write(Kind::Plan, &out);
            }
        };
        self.write(Kind::Plan, text.as_bytes())
    }

    /// What the user is told about how the run ended, if anything: the reason it failed.
    pub fn ending(&self, ending: &Ending) {
        if let Ending::Failed(err) = ending {
            // Nothing can be said about an error that cannot be written.
            let _ = self.error(err);
        }
    }

    fn error(&self, err: &AppError) -> io::Result<()> {
        // One line, escaped as a whole: the messages escape the values they quote, and this
        // also covers what a library's error text may quote (a parser's view of a file, an
        // operating system's message). A failed rollout's reasons and a put-back's list are
        // lines of their own, each built from escaped values: their line feeds stay.
        let message = err.to_string();
        let line = match err {
            AppError::Rollout(_) | AppError::PutBack { .. } => {
                text::escape_lines(&message).into_owned()
            }
            _ => Untrusted(&message).to_string(),
        };
        match err {
            // clap's help and version on stdout, its errors (with usage) on stderr; its messages
            // quote the command line, whose values may come from anywhere.
            AppError::Cli(CliError::Clap(e)) => {
                let kind = if e.use_stderr() {
                    Kind::Error
                } else {
                    Kind::Plan
                };
                let styled = e.render();
                let plain = styled.to_string();
                // Coloured only when the command line it quotes needs no escape: an escaped
                // argument cannot be told from clap's own colour codes afterwards.
                let rendered = match text::escape_lines(&plain) {
                    Cow::Borrowed(_) if self.color(kind) => styled.ansi().to_string(),
                    Cow::Borrowed(_) => plain,
                    Cow::Owned(escaped) => escaped,
                };
                self.write(kind, rendered.as_bytes())
            }
            // The reader may be gone (`… | head`): nothing to say, and nowhere to say it.
            e if e.is_broken_pipe() => Ok(()),
            // A signal ends a line the prompt or a progress line may have left open.
            AppError::Interrupted {
                stage: Stage::Planning | Stage::Writing,
                ..
            } => self.write(Kind::Error, format!("\n{line}\n").as_bytes()),
            _ => {
                let prefix = if self.color(Kind::Error) {
                    console::style("error:")
                        .red()
                        .bold()
                        .force_styling(true)
                        .to_string()
                } else {
                    "error:".to_owned()
                };
                self.write(Kind::Error, format!("{prefix} {line}\n").as_bytes())
            }
        }
    }
}

/// The line that says where a run's history record went (`recorded as revision 4 in
/// configmap/web-appupdate-history`), or its warning (uncoloured); nothing when there is none.
fn recorded_line(recorded: &Recorded, indent: &str) -> String {
    match recorded {
        Recorded::Nothing => String::new(),
        Recorded::Revision {
            revision,
            config_map,
        } => format!("{indent}recorded as revision {revision} in configmap/{config_map}\n"),
        Recorded::Warning(text) => format!("{indent}{text}\n"),
    }
}

fn write_all(out: &mut impl Write, text: &[u8]) -> io::Result<()> {
    out.write_all(text)?;
    out.flush()
}

/// [`Streams::writer`]: collects what is written and passes each whole line (and, on flush,
/// what is left) through [`guarded`], so that a colour code split across two writes stays one.
struct LineWriter {
    stream: Stream,
    color: bool,
    pending: Vec<u8>,
}

impl LineWriter {
    /// Writes `bytes` (whole lines, or the rest on flush) through [`guarded`]. Output of this
    /// tool is UTF-8; only bytes that are not (a value's invalid bytes cannot get here, but a
    /// writer could split a character at a flush) are replaced.
    fn emit(stream: Stream, color: bool, bytes: &[u8]) -> io::Result<()> {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        let text = guarded(&text, color);
        match stream {
            Stream::Stdout => write_all(&mut io::stdout().lock(), text.as_bytes()),
            Stream::Stderr => write_all(&mut io::stderr().lock(), text.as_bytes()),
        }
    }
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(last) = buf.iter().rposition(|b| *b == b'\n') else {
            self.pending.extend_from_slice(buf);
            return Ok(buf.len());
        };
        let (mut lines, rest) = buf.split_at(last + 1);
        if !self.pending.is_empty() {
            // A buffered writer's block seldom ends a line: only the line begun before it is
            // completed here, the block's other lines go straight through, not copied first.
            let first = lines
                .iter()
                .position(|b| *b == b'\n')
                .map_or(lines.len(), |i| i + 1);
            let (head, tail) = lines.split_at(first);
            self.pending.extend_from_slice(head);
            let pending = std::mem::take(&mut self.pending);
            Self::emit(self.stream, self.color, &pending)?;
            self.pending = pending;
            self.pending.clear();
            lines = tail;
        }
        if !lines.is_empty() {
            Self::emit(self.stream, self.color, lines)?;
        }
        self.pending.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            Self::emit(self.stream, self.color, &pending)?;
        }
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_carries_the_plan_and_what_was_done_and_stderr_the_rest() {
        use Kind::*;
        for (kind, diff, structured) in [
            (Plan, Stream::Stdout, Stream::Stdout),
            (Done, Stream::Stdout, Stream::Stderr),
            (NotDone, Stream::Stderr, Stream::Stderr),
            (Notice, Stream::Stderr, Stream::Stderr),
            (Error, Stream::Stderr, Stream::Stderr),
            (Review, Stream::Stderr, Stream::Stderr),
        ] {
            assert_eq!(stream(kind, OutputFormat::Diff), diff, "{kind:?}");
            assert_eq!(stream(kind, OutputFormat::Json), structured, "{kind:?}");
            assert_eq!(stream(kind, OutputFormat::Yaml), structured, "{kind:?}");
        }
    }

    #[test]
    fn each_line_takes_the_colour_of_its_stream() {
        let s = Streams::new(OutputFormat::Diff, true, false);
        assert!(s.color(Kind::Done));
        assert!(!s.color(Kind::NotDone));
        let s = Streams::new(OutputFormat::Json, true, false);
        assert!(!s.color(Kind::Done));
        assert!(s.color(Kind::Plan));
    }
}
