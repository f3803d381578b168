//! Dynamic shell completion for kubectl's plugin completion.
//!
//! kubectl ≥ 1.26 completes `kubectl appupdate <TAB>` by running an executable named
//! `kubectl_complete-appupdate` from `PATH` with the words typed after `appupdate` (the last one
//! being the word under the cursor, possibly empty), and reads Cobra's `__complete` protocol
//! back: one candidate per line (`value<TAB>description`), then `:<directive>`. The helper we
//! ship (`scripts/kubectl_complete-appupdate`) is a two-line script that runs
//! `kubectl-appupdate __complete …`; this module answers that hidden entry point with clap_complete's completion engine over the
//! real flag definitions, so the candidates can never drift from the parser.
//!
//! Values come from the flag definitions (`--color`, `-o`), the kubeconfig (contexts, clusters
//! and users for `--context`, `--cluster`, `--user`; the file named by an earlier
//! `--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`), and the shell's own file
//! completion (`--endpoints`: `.yaml`/`.yml` files; `--kubeconfig`: any file). Nothing is asked
//! of the cluster: completion never blocks on the network.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

use crate::cli::Cli;
use crate::settings::{self, Environment};
use appupdate_kube::kube_context;
use appupdate_kube::selection::KubeconfigSource;
use appupdate_model::text;

/// The hidden first argument that selects completion mode.
pub const ENTRY: &str = "__complete";

/// Cobra's `ShellCompDirective` bits.
pub mod directive {
    /// Let the shell complete file names.
    pub const DEFAULT: u32 = 0;
    /// Do not add a space after the completion.
    pub const NO_SPACE: u32 = 2;
    /// Do not fall back to file names when there are no candidates.
    pub const NO_FILE_COMP: u32 = 4;
    /// The candidates are file extensions to filter file-name completion by.
    pub const FILTER_FILE_EXT: u32 = 8;
}

/// What to print: candidates (value, one-line description) and the directive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completions {
    pub candidates: Vec<(String, Option<String>)>,
    pub directive: u32,
}

impl Completions {
    /// Writes Cobra's `__complete` output. The shell shows the candidates on the terminal as
    /// they are, so a value that holds a character [`text::is_escaped`] names (a context name
    /// from the kubeconfig, say) is left out — it could not be typed anyway — and a
    /// description is escaped.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        for (value, help) in &self.candidates {
            if value.chars().any(text::is_escaped) {
                continue;
            }
            match help {
                Some(h) if !h.is_empty() => writeln!(out, "{value}\t{}", text::Untrusted(h))?,
                _ => writeln!(out, "{value}")?,
            }
        }
        writeln!(out, ":{}", self.directive)
    }
}

/// Names from the kubeconfig, for `--context`, `--cluster` and `--user`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeconfigNames {
    pub contexts: Vec<String>,
    pub clusters: Vec<String>,
    pub users: Vec<String>,
}

/// The kubeconfig a completed command line would use: an earlier `--kubeconfig`, else
/// `KUBECONFIG`, else `~/.kube/config` — the rule the run itself uses.
fn kubeconfig_source(words: &[String], env: &Environment) -> KubeconfigSource {
    let mut flag: Option<PathBuf> = None;
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if w == "--kubeconfig" {
            flag = it.next().map(PathBuf::from);
        } else if let Some(v) = w.strip_prefix("--kubeconfig=") {
            flag = Some(PathBuf::from(v));
        }
    }
    settings::kubeconfig_source(flag, env)
}

/// Reads the names from the kubeconfig; an unreadable kubeconfig simply has none.
pub fn kubeconfig_names(words: &[String], env: &Environment) -> KubeconfigNames {
    let source = kubeconfig_source(words, env);
    let Ok((config, _)) = kube_context::load_kubeconfig(&source) else {
        return KubeconfigNames::default();
    };
    KubeconfigNames {
        contexts: config.contexts.iter().map(|c| c.name.clone()).collect(),
        clusters: config.clusters.iter().map(|c| c.name.clone()).collect(),
        users: config.auth_infos.iter().map(|u| u.name.clone()).collect(),
    }
}

fn candidates_of(names: Vec<String>) -> ArgValueCandidates {
    ArgValueCandidates::new(move || {
        names
            .iter()
            .map(|n| CompletionCandidate::new(n.clone()))
            .collect::<Vec<_>>()
    })
}

/// Completes `words` (everything typed after `appupdate`; the last one is the word under the
/// cursor). Pure apart from listing files for path values, which the shell does instead.
pub fn complete(words: &[String], names: &KubeconfigNames, current_dir: &Path) -> Completions {
    let current = words.last().map(String::as_str).unwrap_or("");
    let previous = words
        .len()
        .checked_sub(2)
        .and_then(|i| words.get(i))
        .map(String::as_str);
    // File values: the shell's own file completion does this best.
    if !current.starts_with('-') {
        match previous {
            Some("--endpoints" | "--endpoint-config") => {
                return Completions {
                    candidates: vec![("yaml".into(), None), ("yml".into(), None)],
                    directive: directive::FILTER_FILE_EXT,
                };
            }
            Some("--kubeconfig") => {
                return Completions {
                    candidates: Vec::new(),
                    directive: directive::DEFAULT,
                };
            }
            _ => {}
        }
    }

    let mut cmd = Cli::command()
        .mut_arg("context", |a| a.add(candidates_of(names.contexts.clone())))
        .mut_arg("contexts", |a| a.add(candidates_of(names.contexts.clone())))
        .mut_arg("canary", |a| a.add(candidates_of(names.contexts.clone())))
        .mut_arg("cluster", |a| a.add(candidates_of(names.clusters.clone())))
        .mut_arg("user", |a| a.add(candidates_of(names.users.clone())));
    let mut args: Vec<OsString> = vec![OsString::from("kubectl-appupdate")];
    args.extend(words.iter().map(OsString::from));
    if words.is_empty() {
        args.push(OsString::new());
    }
    let index = args.len() - 1;
    let found = clap_complete::engine::complete(&mut cmd, args, index, Some(current_dir))
        .unwrap_or_default();
    let candidates: Vec<(String, Option<String>)> = found
        .into_iter()
        .filter(|c| !c.is_hide_set())
        .map(|c| {
            let value = c.get_value().to_string_lossy().into_owned();
            let help = c
                .get_help()
                .map(|h| h.to_string().lines().next().unwrap_or_default().to_owned());
            (value, help)
        })
        .collect();
    let mut bits = directive::NO_FILE_COMP;
    // `--flag=` candidates and directories continue the same word.
    if candidates.len() == 1 && candidates[0].0.ends_with(['=', '/']) {
        bits |= directive::NO_SPACE;
    }
    Completions {
        candidates,
        directive: bits,
    }
}

/// `kubectl-appupdate __complete WORDS…`: prints the completions. It never fails: a failing
/// completion must not break the shell.
pub fn main(words: Vec<OsString>, env: &Environment, out: &mut impl Write) {
    let words: Vec<String> = words
        .into_iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let names = kubeconfig_names(&words[..words.len().saturating_sub(1)], env);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let completions = complete(&words, &names, &cwd);
    let _ = completions.write(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| (*s).to_owned()).collect()
    }

    fn values(c: &Completions) -> Vec<&str> {
        c.candidates.iter().map(|(v, _)| v.as_str()).collect()
    }

    fn names() -> KubeconfigNames {
        KubeconfigNames {
            contexts: vec!["prod".into(), "staging".into()],
            clusters: vec!["eu-1".into()],
            users: vec!["ci".into()],
        }
    }

    fn run(w: &[&str]) -> Completions {
        complete(&words(w), &names(), Path::new("/nonexistent"))
    }

    #[test]
    fn flags_complete_from_the_parser_with_their_help() {
        let c = run(&["web", "--co"]);
        let mut flags = values(&c);
        flags.sort_unstable();
        assert_eq!(
            flags,
            vec![
                "--color",
                "--container",
                "--context",
                "--context-selector",
                "--contexts"
            ]
        );
        assert_eq!(c.directive, directive::NO_FILE_COMP);
        let color = c.candidates.iter().find(|(v, _)| v == "--color").unwrap();
        assert_eq!(color.1.as_deref(), Some("When to colour the output"));
    }

    #[test]
    fn enumerated_values_complete() {
        assert_eq!(
            values(&run(&["web", "--color", ""])),
            vec!["auto", "always", "never"]
        );
        assert_eq!(values(&run(&["web", "-o", "j"])), vec!["json"]);
    }

    #[test]
    fn contexts_clusters_and_users_come_from_the_kubeconfig() {
        assert_eq!(
            values(&run(&["web", "--context", ""])),
            vec!["prod", "staging"]
        );
        assert_eq!(values(&run(&["web", "--context", "st"])), vec!["staging"]);
        assert_eq!(values(&run(&["web", "--canary", "st"])), vec!["staging"]);
        assert_eq!(
            values(&run(&["web", "--contexts", "prod,st"])),
            vec!["prod,staging"]
        );
        assert_eq!(values(&run(&["web", "--cluster", ""])), vec!["eu-1"]);
        assert_eq!(values(&run(&["web", "--user", ""])), vec!["ci"]);
    }

    #[test]
    fn files_are_left_to_the_shell() {
        let c = run(&["web", "--endpoints", ""]);
        assert_eq!(values(&c), vec!["yaml", "yml"]);
        assert_eq!(c.directive, directive::FILTER_FILE_EXT);
        let c = run(&["web", "--kubeconfig", "~/.ku"]);
        assert!(c.candidates.is_empty());
        assert_eq!(c.directive, directive::DEFAULT);
    }

    #[test]
    fn the_subcommand_and_its_shells_complete() {
        assert!(values(&run(&[""])).contains(&"completion"));
        let shells = values(&run(&["completion", ""])).join(" ");
        assert!(shells.contains("bash") && shells.contains("zsh") && shells.contains("fish"));
    }

    #[test]
    fn the_output_is_cobras_protocol() {
        let c = Completions {
            candidates: vec![
                ("json".into(), Some("The plan as JSON".into())),
                ("x".into(), None),
            ],
            directive: 4,
        };
        let mut out = Vec::new();
        c.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "json\tThe plan as JSON\nx\n:4\n"
        );
    }

    #[test]
    fn names_a_terminal_would_obey_are_left_out() {
        let c = Completions {
            candidates: vec![
                ("prod".into(), Some("a \u{1b}]0;t\u{7} context".into())),
                ("evil\u{1b}[2J".into(), None),
                ("rtl\u{202e}".into(), None),
            ],
            directive: directive::NO_FILE_COMP,
        };
        let mut out = Vec::new();
        c.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "prod\ta \\e]0;t\\x07 context\n:4\n"
        );
    }

    #[test]
    fn an_earlier_kubeconfig_flag_wins() {
        let env = Environment {
            kubeconfig: Some("/a:/b".into()),
            ..Default::default()
        };
        assert_eq!(
            kubeconfig_source(&words(&["web", "--kubeconfig", "/k"]), &env),
            KubeconfigSource::Flag("/k".into())
        );
        assert_eq!(
            kubeconfig_source(&words(&["web", "--kubeconfig=/k2"]), &env),
            KubeconfigSource::Flag("/k2".into())
        );
        assert_eq!(
            kubeconfig_source(&words(&["web"]), &env),
            KubeconfigSource::Env(vec!["/a".into(), "/b".into()])
        );
    }
}
