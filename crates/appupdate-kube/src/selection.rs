//! Which cluster, user and namespace a run talks to, as resolved from the flags and the
//! environment (the plugin's `settings` does the resolving): where the kubeconfig comes from,
//! the contexts named or selected, the overrides, the proxy variables.

use std::path::PathBuf;
use std::time::Duration;

use appupdate_model::text::Untrusted;

use crate::proxy::ProxyEnv;

/// Where the kubeconfig comes from, in kubectl's order of precedence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeconfigSource {
    /// `--kubeconfig PATH`: the file must exist.
    Flag(PathBuf),
    /// `KUBECONFIG`: several files, merged, first wins; missing files are skipped.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Home(PathBuf),
    /// No flag, no variable, no home directory.
    Nowhere,
}

/// Where kubectl's preferences file (kuberc) is, for its credential plugin policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KubercSource {
    /// `KUBERC=off` or `KUBECTL_KUBERC=false`: no kuberc, every plugin may run.
    Off,
    /// `KUBERC=PATH`: the file must be there.
    Env(PathBuf),
    /// `~/.kube/kuberc` (`%USERPROFILE%\.kube\kuberc` on Windows): none when missing.
    Home(PathBuf),
    /// No variable and no home directory.
    #[default]
    Nowhere,
}

/// What deciding whether a kubeconfig's exec plugin may run needs: the kuberc, and the `PATH`
/// a basename is looked up on (as Go's `exec.LookPath` does).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialPolicySource {
    pub kuberc: KubercSource,
    pub path: Option<std::ffi::OsString>,
}

/// `--context-selector REGEX`: as typed, and compiled to match whole context names.
#[derive(Clone, Debug)]
pub struct ContextSelector {
    pub text: String,
    pub regex: regex::Regex,
}

impl ContextSelector {
    /// The regular expression must match the whole name (`prod` does not select `preprod`).
    pub fn new(text: &str) -> Result<ContextSelector, String> {
        regex::Regex::new(&format!("^(?:{text})$"))
            .map(|regex| ContextSelector {
                text: text.to_owned(),
                regex,
            })
            .map_err(|e| {
                let why = match e {
                    regex::Error::CompiledTooBig(_) => "it is too large".to_owned(),
                    // The parser's message spans lines and points at the error: its last line
                    // says what is wrong.
                    e => e
                        .to_string()
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map(|l| l.trim().trim_start_matches("error: ").to_owned())
                        .unwrap_or_default(),
                };
                format!(
                    "--context-selector {:?} is not a valid regular expression: {}",
                    Untrusted(text),
                    Untrusted(why)
                )
            })
    }

    pub fn matches(&self, context: &str) -> bool {
        self.regex.is_match(context)
    }
}

/// Which cluster, user and namespace to talk to.
#[derive(Clone, Debug)]
pub struct ClusterSelection {
    pub kubeconfig: KubeconfigSource,
    /// The context of a run over one cluster: the first `--context` (else the current one).
    pub context: Option<String>,
    /// Every context named by `--context` and `--contexts`, in order, each once.
    pub contexts: Vec<String>,
    /// `--context-selector`.
    pub context_selector: Option<ContextSelector>,
    /// The flags name several contexts: `--context` more than once, `--contexts` or
    /// `--context-selector`.
    pub several: bool,
    pub cluster: Option<String>,
    pub user: Option<String>,
    pub namespace: Option<String>,
    pub as_user: Option<String>,
    pub as_groups: Vec<String>,
    /// `None`: no bound (kubectl's default).
    pub request_timeout: Option<Duration>,
    /// The proxy variables, for when the kubeconfig sets no `proxy-url`.
    pub proxy_env: ProxyEnv,
    /// Which exec credential plugins kubectl's preferences allow.
    pub credential_policy: CredentialPolicySource,
}
