//! Flags plus the environment become resolved [`Settings`]. The environment (variables,
//! terminals, files named on the command line) is read here and only here.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeSet;

use crate::cli::{
    ApplyArgs, AuthProviderChoice, ClusterArgs, ColorChoice, FleetArgs, HistoryArgs, HistoryFormat,
    ImageCheckArgs, ImageCheckChoice, OutputFormat, RoutesChoice, UpdateArgs,
};
use appupdate_kube::files::{self, FileKind};
use appupdate_kube::probe::{self, ProbeSettings};
use appupdate_kube::proxy::ProxyEnv;
use appupdate_kube::registry::{RegistrySettings, RequestLogger};
use appupdate_kube::selection::{ClusterSelection, ContextSelector, KubeconfigSource};
use appupdate_kube::selection::{CredentialPolicySource, KubercSource};
use appupdate_model::endpoints_file::{self, EndpointsError, EndpointsFile};
use appupdate_model::names;
use appupdate_model::plan::{AuthProvider, RouteStyle};
use appupdate_model::text::Untrusted;
use appupdate_model::verify::{self, VerifyUrl};
use appupdate_plan::plan_file::{self, KeyError, PlanFile, PlanFileError, PlanKey};
use appupdate_plan::routes::refs::{self, AuthUrl, ObjectRef, RouteFlags, ServiceRef};
use appupdate_plan::updaters::{AutoscalerUpdate, ContainerUpdate, validate_image_reference};

/// Why the flags' values or the files they name cannot be used. Nothing was sent.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A value is not valid: the application name, the namespace, the image reference,
    /// `--min` above `--max`.
    #[error("{0}")]
    Invalid(String),
    /// The endpoints file cannot be read.
    #[error("cannot read endpoints file {name}: {source}")]
    EndpointsUnreadable {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// The endpoints file is not valid.
    #[error(transparent)]
    Endpoints(#[from] EndpointsError),
    /// The endpoints file lists nothing, and `--allow-empty-endpoints` was not given.
    #[error(
        "{name}: the file lists no endpoints, which would remove every public route of {app}; pass --allow-empty-endpoints if that is intended"
    )]
    NoEndpoints { name: String, app: String },
    /// The plan file cannot be read.
    #[error("cannot read plan file {name}: {source}")]
    PlanFileUnreadable {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// The plan file cannot be applied.
    #[error(transparent)]
    PlanFile(#[from] PlanFileError),
    /// A key file (`--sign-key`, `--verify-key`, `--history-key` or their variables) cannot be
    /// read.
    #[error("{key}: cannot read the key file: {source}")]
    KeyUnreadable {
        /// [`PlanKey::named`].
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// A key file does not hold a usable key.
    #[error("{key}: {why}")]
    Key {
        /// [`PlanKey::named`].
        key: String,
        why: KeyError,
    },
}

/// The environment variable naming the key file that signs saved plans (when `--plan-out` has
/// no `--sign-key`) and verifies them (when `apply FILE` has no `--verify-key`).
pub const PLAN_KEY_VAR: &str = "APPUPDATE_PLAN_KEY_FILE";

/// The environment variable naming the key file that signs history records and verifies them
/// (when a command has no `--history-key`).
pub const HISTORY_KEY_VAR: &str = "APPUPDATE_HISTORY_KEY_FILE";

/// The environment variable for `--image-check`'s mode when the flag is not given.
pub const IMAGE_CHECK_VAR: &str = "APPUPDATE_IMAGE_CHECK";

/// What the process was started with, captured once.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// `KUBECONFIG`, unsplit.
    pub kubeconfig: Option<OsString>,
    /// `HOME` (or `USERPROFILE`).
    pub home: Option<PathBuf>,
    /// `NO_COLOR` is set (any value).
    pub no_color: bool,
    /// `CLICOLOR_FORCE` is set to something other than `0`.
    pub clicolor_force: bool,
    /// `TERM=dumb`.
    pub term_dumb: bool,
    pub stdout_is_terminal: bool,
    pub stderr_is_terminal: bool,
    /// A question can be asked on stderr and answered from the terminal (stdin when it is a
    /// terminal, else `/dev/tty`) — never from piped stdin.
    pub can_prompt: bool,
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` (or their lower-case forms) and whether
    /// `REQUEST_METHOD` is set.
    pub proxy: ProxyEnv,
    /// `APPUPDATE_PLAN_KEY_FILE` ([`PLAN_KEY_VAR`]), when set and not empty.
    pub plan_key_file: Option<PathBuf>,
    /// `APPUPDATE_HISTORY_KEY_FILE` ([`HISTORY_KEY_VAR`]), when set and not empty.
    pub history_key_file: Option<PathBuf>,
    /// `APPUPDATE_IMAGE_CHECK` ([`IMAGE_CHECK_VAR`]), when set and not empty.
    pub image_check: Option<String>,
    /// `DOCKER_CONFIG`: the directory of the docker `config.json`, when set and not empty.
    pub docker_config: Option<PathBuf>,
    /// `KUBERC`: kubectl's preferences file, or `off`.
    pub kuberc: Option<OsString>,
    /// `KUBECTL_KUBERC`: `false` turns kubectl's preferences file off.
    pub kubectl_kuberc: Option<OsString>,
    /// `PATH`, where a credential plugin named by its basename is looked up.
    pub path: Option<OsString>,
}

impl Environment {
    /// Reads the real process environment.
    pub fn capture() -> Environment {
        let var = |k: &str| std::env::var_os(k);
        let stdin_tty = std::io::stdin().is_terminal();
        let stderr_tty = std::io::stderr().is_terminal();
        let dev_tty = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty")
                .is_ok()
        };
        Environment {
            kubeconfig: var("KUBECONFIG"),
            home: var("HOME")
                .or_else(|| var("USERPROFILE"))
                .map(PathBuf::from),
            no_color: var("NO_COLOR").is_some(),
            clicolor_force: var("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0"),
            term_dumb: var("TERM").is_some_and(|v| v == "dumb"),
            stdout_is_terminal: std::io::stdout().is_terminal(),
            stderr_is_terminal: stderr_tty,
            can_prompt: stderr_tty && (stdin_tty || dev_tty()),
            proxy: ProxyEnv::from_lookup(|k| var(k).map(|v| v.to_string_lossy().into_owned())),
            plan_key_file: var(PLAN_KEY_VAR)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            history_key_file: var(HISTORY_KEY_VAR)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            image_check: var(IMAGE_CHECK_VAR)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned()),
            docker_config: var("DOCKER_CONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            kuberc: var("KUBERC"),
            kubectl_kuberc: var("KUBECTL_KUBERC"),
            path: var("PATH"),
        }
    }
}

/// kubectl's rule: `--kubeconfig` (an empty value counts as not given), else the files
/// listed in `KUBECONFIG` (empty entries skipped), else `~/.kube/config`.
pub fn kubeconfig_source(flag: Option<PathBuf>, env: &Environment) -> KubeconfigSource {
    if let Some(path) = flag.filter(|p| !p.as_os_str().is_empty()) {
        return KubeconfigSource::Flag(path);
    }
    if let Some(list) = env.kubeconfig.as_ref().filter(|v| !v.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            return KubeconfigSource::Env(paths);
        }
    }
    match &env.home {
        Some(home) => KubeconfigSource::Home(home.join(".kube").join("config")),
        None => KubeconfigSource::Nowhere,
    }
}

/// kubectl's rule for its preferences file: `KUBECTL_KUBERC=false` or `KUBERC=off` turn it
/// off; else `KUBERC`; else `~/.kube/kuberc` (`%USERPROFILE%\.kube\kuberc` on Windows).
pub fn kuberc_source(env: &Environment) -> KubercSource {
    if env.kubectl_kuberc.as_ref().is_some_and(|v| v == "false")
        || env.kuberc.as_ref().is_some_and(|v| v == "off")
    {
        return KubercSource::Off;
    }
    if let Some(path) = env.kuberc.as_ref().filter(|v| !v.is_empty()) {
        return KubercSource::Env(PathBuf::from(path));
    }
    match &env.home {
        Some(home) => KubercSource::Home(home.join(".kube").join("kuberc")),
        None => KubercSource::Nowhere,
    }
}

/// The cluster flags, checked (the namespace's syntax) and resolved.
pub fn resolve_cluster(
    args: ClusterArgs,
    env: &Environment,
) -> Result<ClusterSelection, SettingsError> {
    if let Some(ns) = &args.namespace {
        validate_namespace(ns).map_err(SettingsError::Invalid)?;
    }
    let several =
        args.context.len() > 1 || !args.contexts.is_empty() || args.context_selector.is_some();
    let mut contexts: Vec<String> = Vec::new();
    for c in args.context.iter().chain(&args.contexts) {
        if c.is_empty() {
            return Err(SettingsError::Invalid(
                "an empty context name was given (--context or --contexts); name each context"
                    .into(),
            ));
        }
        if !contexts.contains(c) {
            contexts.push(c.clone());
        }
    }
    let context_selector = args
        .context_selector
        .as_deref()
        .map(ContextSelector::new)
        .transpose()
        .map_err(SettingsError::Invalid)?;
    Ok(ClusterSelection {
        kubeconfig: kubeconfig_source(args.kubeconfig, env),
        context: args.context.first().cloned(),
        contexts,
        context_selector,
        several,
        cluster: args.cluster,
        user: args.user,
        namespace: args.namespace,
        as_user: args.as_user,
        as_groups: args.as_group,
        request_timeout: args.request_timeout.filter(|d| !d.is_zero()),
        proxy_env: env.proxy.clone(),
        credential_policy: CredentialPolicySource {
            kuberc: kuberc_source(env),
            path: env.path.clone(),
        },
    })
}

/// How a run over several clusters goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetSettings {
    /// Clusters written at the same time (≥ 1); `None`: all at once (the default).
    pub parallel: Option<usize>,
    /// `--max-connections`: clusters connected to at once (≥ 1); `None`: what the open-files
    /// limit allows (`crate::open_files`).
    pub max_connections: Option<usize>,
    /// Contexts applied first, whose rollout must complete before the others start.
    pub canary: Vec<String>,
    /// `--wave`: the clusters in order; empty without waves.
    pub waves: Vec<WaveSpec>,
    /// `--max-failed`: failed clusters a wave may have and the next one still start.
    pub max_failed: usize,
    /// `--bake`: how long each wave but the last is watched before the next starts.
    pub bake: Option<Duration>,
    pub stop_on_failure: bool,
    pub skip_unreachable: bool,
}

/// One `--wave`: contexts by name, or every context whose whole name matches.
#[derive(Clone, Debug)]
pub enum WaveSpec {
    Named(Vec<String>),
    Matching(ContextSelector),
}

impl PartialEq for WaveSpec {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (WaveSpec::Named(a), WaveSpec::Named(b)) => a == b,
            (WaveSpec::Matching(a), WaveSpec::Matching(b)) => a.text == b.text,
            _ => false,
        }
    }
}

impl Eq for WaveSpec {}

impl WaveSpec {
    /// `--wave`'s value: `re:REGEX`, else comma-separated context names.
    pub fn parse(value: &str) -> Result<WaveSpec, SettingsError> {
        if let Some(re) = value.strip_prefix("re:") {
            return Ok(WaveSpec::Matching(
                ContextSelector::new(re).map_err(SettingsError::Invalid)?,
            ));
        }
        let names: Vec<String> = value.split(',').map(str::to_owned).collect();
        if names.iter().any(String::is_empty) {
            return Err(SettingsError::Invalid(format!(
                "--wave {:?} has an empty context name; name each context, comma-separated, or give re:REGEX",
                Untrusted(value)
            )));
        }
        Ok(WaveSpec::Named(names))
    }
}

impl FleetSettings {
    /// A run over one cluster: a fleet of one, with no order to keep and nothing to skip.
    pub fn one() -> FleetSettings {
        FleetSettings {
            parallel: None,
            max_connections: None,
            canary: Vec::new(),
            waves: Vec::new(),
            max_failed: 0,
            bake: None,
            stop_on_failure: true,
            skip_unreachable: false,
        }
    }

    /// A fleet run when the cluster flags name several contexts, a canary is named, or the
    /// plan file holds several clusters (`saved_clusters`); the fleet's own flags only apply
    /// then, and `--cluster`/`--user` (one context's cluster and user) never do.
    pub fn resolve(
        args: FleetArgs,
        cluster: &ClusterSelection,
        saved_clusters: usize,
    ) -> Result<Option<FleetSettings>, SettingsError> {
        let waves = args
            .wave
            .iter()
            .map(|w| WaveSpec::parse(w))
            .collect::<Result<Vec<_>, _>>()?;
        if !waves.is_empty() {
            if !cluster.contexts.is_empty() || cluster.context_selector.is_some() {
                return Err(SettingsError::Invalid(
                    "--wave names the clusters of the run, in order: drop --context, --contexts and --context-selector, and put every context in a wave".into(),
                ));
            }
            if !args.canary.is_empty() {
                return Err(SettingsError::Invalid(
                    "--canary is a first wave of one: with --wave, make it the first wave (--wave CONTEXT) instead".into(),
                ));
            }
        }
        let fleet =
            cluster.several || !args.canary.is_empty() || saved_clusters > 1 || !waves.is_empty();
        if !fleet {
            let given = [
                (args.parallel.is_some(), "--parallel"),
                (args.max_connections.is_some(), "--max-connections"),
                (args.stop_on_failure.is_some(), "--stop-on-failure"),
                (args.skip_unreachable, "--skip-unreachable"),
            ];
            if let Some((_, flag)) = given.iter().find(|(given, _)| *given) {
                return Err(SettingsError::Invalid(format!(
                    "{flag} only applies to a run over several contexts; name them with --contexts, --context-selector or --context more than once"
                )));
            }
            return Ok(None);
        }
        if cluster.cluster.is_some() || cluster.user.is_some() {
            return Err(SettingsError::Invalid(
                "--cluster and --user replace one context's cluster or user, so they cannot be used with several contexts; drop them, or give each cluster and user a context of its own".into(),
            ));
        }
        let mut canary: Vec<String> = Vec::new();
        for c in args.canary {
            if !canary.contains(&c) {
                canary.push(c);
            }
        }
        // In waves, the failure budget decides what stops the run: a failure within it lets
        // the wave's other clusters go on.
        let stop_default = waves.is_empty() || args.max_failed.unwrap_or(0) == 0;
        Ok(Some(FleetSettings {
            parallel: args.parallel.map(|n| n as usize),
            max_connections: args.max_connections.map(|n| n as usize),
            canary,
            waves,
            max_failed: args.max_failed.map_or(0, |n| n as usize),
            bake: args.bake.filter(|d| !d.is_zero()),
            stop_on_failure: args.stop_on_failure.unwrap_or(stop_default),
            skip_unreachable: args.skip_unreachable,
        }))
    }
}

/// `--undo` / `--to-revision N`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoRequest {
    /// `None`: the newest record.
    pub revision: Option<u64>,
    /// A fleet undo: the newest record of this fleet run in each cluster (`--fleet-run`, else
    /// the newest fleet run recorded in any of them).
    pub fleet_run: Option<String>,
    /// `--force-undo`: the fields the user accepts to overwrite.
    pub force: BTreeSet<String>,
}

/// A plan file to apply (`kubectl appupdate apply FILE`).
#[derive(Clone, Debug)]
pub struct SavedInput {
    /// The file as named on the command line.
    pub name: String,
    pub file: PlanFile,
    pub max_age: Option<Duration>,
}

/// The endpoints file as read and parsed.
#[derive(Clone, Debug)]
pub struct EndpointsInput {
    /// The name shown in messages (`<stdin>` for `-`).
    pub source: String,
    pub file: EndpointsFile,
}

/// Everything the run needs, resolved.
#[derive(Clone, Debug)]
pub struct Settings {
    pub app: String,
    /// What the run does: decided once from the flags, so that combinations that mean
    /// nothing (an undo with an image, a saved plan with route flags) cannot be written down.
    pub mode: Mode,
    pub cluster: ClusterSelection,
    pub yes: bool,
    /// `--force-conflicts`: write fields other tools own.
    pub force_conflicts: bool,
    pub output: OutputFormat,
    /// Colour on stdout.
    pub color: bool,
    /// Colour on stderr (prompts, progress).
    pub color_stderr: bool,
    pub retries: u32,
    /// `--timeout`: how long `--wait` and a canary follow a rollout and routes (zero: no bound).
    pub wait_timeout: Duration,
    /// After the writes: `--wait` and what ends it.
    pub follow: Follow,
    pub verbose: u8,
    pub can_prompt: bool,
    pub stderr_is_terminal: bool,
    /// `--history-max`: records kept (0: none written).
    pub history_max: u32,
    /// `--history-key` (else `APPUPDATE_HISTORY_KEY_FILE`): signs the records written, and an
    /// undo takes only records that verify with it.
    pub history_key: Option<PlanKey>,
    /// A run over several clusters.
    pub fleet: Option<FleetSettings>,
    /// The check of `--image` in its registry.
    pub image_check: ImageCheck,
}

/// `--image-check`'s mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageCheckMode {
    /// Refuse what the registry says cannot run; warn when it cannot tell or cannot be reached.
    Auto,
    /// Refuse unless the registry shows the image can run.
    Require,
    /// No check.
    Off,
}

/// The check of the image an update writes, in its registry (docs/images.md).
#[derive(Clone, Debug)]
pub struct ImageCheck {
    pub mode: ImageCheckMode,
    /// `--pin-digest`: write `name:tag@digest`.
    pub pin_digest: bool,
    pub registry: RegistrySettings,
    /// Why the docker config was not used (unreadable, not JSON): said as a warning when the
    /// check runs.
    pub config_problem: Option<String>,
    /// `--image-key`: the image must carry a cosign signature by this key.
    pub key: Option<ImageKey>,
}

/// `--image-key`'s key, and how messages name it (`--image-key cosign.pub`).
#[derive(Clone, Debug)]
pub struct ImageKey {
    pub key: Arc<appupdate_model::cosign::PublicKey>,
    pub named: String,
}

/// With `-v`, the registry's requests as notices, as the cluster's are.
fn registry_log(verbose: u8) -> RequestLogger {
    RequestLogger(
        (verbose > 0).then(|| -> appupdate_kube::cluster::RequestLog {
            std::sync::Arc::new(crate::streams::notice)
        }),
    )
}

impl ImageCheck {
    /// No check (an undo, a saved plan, `--image-check off`).
    pub fn off() -> ImageCheck {
        ImageCheck {
            mode: ImageCheckMode::Off,
            pin_digest: false,
            registry: RegistrySettings::default(),
            config_problem: None,
            key: None,
        }
    }

    /// The flags and the environment, resolved; the docker config is read only when an image
    /// is checked.
    pub fn resolve(
        args: ImageCheckArgs,
        checks_an_image: bool,
        env: &Environment,
        files: &dyn FileReader,
    ) -> Result<ImageCheck, SettingsError> {
        let mode = match args.image_check {
            Some(ImageCheckChoice::Auto) => ImageCheckMode::Auto,
            Some(ImageCheckChoice::Require) => ImageCheckMode::Require,
            Some(ImageCheckChoice::Off) => ImageCheckMode::Off,
            None => match env.image_check.as_deref().map(str::trim) {
                None | Some("auto") => ImageCheckMode::Auto,
                Some("require") => ImageCheckMode::Require,
                Some("off") => ImageCheckMode::Off,
                Some(other) => {
                    return Err(SettingsError::Invalid(format!(
                        "{IMAGE_CHECK_VAR}={:?}: use auto, require or off",
                        Untrusted(other)
                    )));
                }
            },
        };
        if args.pin_digest && mode == ImageCheckMode::Off {
            return Err(SettingsError::Invalid(
                "--pin-digest writes the digest the image check finds: drop --image-check off (or APPUPDATE_IMAGE_CHECK=off)".into(),
            ));
        }
        let key = match args.image_key {
            Some(_) if mode == ImageCheckMode::Off => {
                return Err(SettingsError::Invalid(
                    "--image-key requires a signature the image check verifies in the registry: drop --image-check off (or APPUPDATE_IMAGE_CHECK=off)".into(),
                ));
            }
            Some(path) => Some(image_key(&path, files)?),
            None => None,
        };
        let mut insecure = Vec::new();
        for host in &args.insecure_registry {
            let host = host.trim().to_ascii_lowercase();
            if host.is_empty() || host.contains(['/', '@', ' ']) {
                return Err(SettingsError::Invalid(format!(
                    "--insecure-registry {:?}: name a registry as HOST or HOST:PORT, as in the image name",
                    Untrusted(&host)
                )));
            }
            insecure.push(host);
        }
        let mut check = ImageCheck {
            mode,
            pin_digest: args.pin_digest,
            registry: RegistrySettings {
                insecure,
                proxy_env: env.proxy.clone(),
                docker_config: None,
                timeout: appupdate_kube::registry::DEFAULT_TIMEOUT,
                user_agent: concat!(
                    "kubectl-appupdate/",
                    env!("CARGO_PKG_VERSION"),
                    " (image check)"
                )
                .to_owned(),
                log: RequestLogger::default(),
            },
            config_problem: None,
            key,
        };
        if mode == ImageCheckMode::Off || !checks_an_image {
            return Ok(check);
        }
        let path = match (&env.docker_config, &env.home) {
            (Some(dir), _) => dir.join("config.json"),
            (None, Some(home)) => home.join(".docker").join("config.json"),
            (None, None) => return Ok(check),
        };
        let shown = Untrusted(path.display().to_string());
        match files.read(&path, FileKind::DockerConfig) {
            Ok(text) => match appupdate_model::image::DockerConfig::parse(&text) {
                Ok(config) => check.registry.docker_config = Some(config),
                Err(why) => {
                    check.config_problem =
                        Some(format!("the docker config {shown} is not used: {why}"))
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                check.config_problem = Some(format!(
                    "the docker config {shown} is not used: {}",
                    Untrusted(e.to_string())
                ))
            }
        }
        Ok(check)
    }

    /// Whether the check runs.
    pub fn on(&self) -> bool {
        self.mode != ImageCheckMode::Off
    }
}

/// What a run does. `history NAME` is a command of its own ([`HistorySettings`]).
#[derive(Clone, Debug)]
pub enum Mode {
    /// Plan the changes the flags ask for against the live objects.
    Update {
        changes: Box<Changes>,
        /// `--plan-out`: save the plan instead of applying it.
        save: Option<SavePlan>,
        writes: WriteFlags,
    },
    /// Plan the inverse of a history record (`--undo`, `--to-revision`).
    Undo {
        request: UndoRequest,
        save: Option<SavePlan>,
        writes: WriteFlags,
    },
    /// Apply a saved plan (`apply FILE`): the plan's own changes, re-checked under the guard.
    Apply {
        saved: SavedInput,
        /// `--stop-after-wave N`: the last wave to apply in this run (only with waves).
        stop_after_wave: Option<usize>,
    },
}

/// How a run planned from the flags (an update or an undo) goes on from its plan. A saved
/// plan is applied as approved: none of these is a flag of `apply FILE`.
#[derive(Clone, Debug, Default)]
pub struct WriteFlags {
    /// `--dry-run`: the plan, checked by the server, is the run.
    pub dry_run: bool,
    /// `--detailed-exitcode`: a plan with changes ends with its own exit code.
    pub detailed_exitcode: bool,
    /// `--verify-url`: after the writes, check that the paths with scopes refuse a request
    /// without a token.
    pub verify: Option<ProbeSettings>,
}

/// After the writes: `--wait`, and what it does when the rollout cannot complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follow {
    /// `--wait` (or `--undo-on-failure`, which implies it): follow the rollout and the routes.
    pub wait: bool,
    /// `--undo-on-failure`: a run that fails after writing puts back what it changed.
    pub undo_on_failure: bool,
    /// `--fail-fast`: the wait ends as soon as the rollout cannot succeed.
    pub fail_fast: bool,
    /// `--crash-restarts`: the restarts of a crash-looping container that end the wait.
    pub crash_restarts: u32,
}

impl Follow {
    fn of(args: &crate::cli::FollowArgs) -> Follow {
        Follow {
            wait: args.wait || args.undo_on_failure,
            undo_on_failure: args.undo_on_failure,
            fail_fast: args.fail_fast,
            crash_restarts: args.crash_restarts,
        }
    }
}

/// The changes asked for by flags.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub container: Option<String>,
    pub container_update: ContainerUpdate,
    pub autoscaler_update: AutoscalerUpdate,
    pub endpoints: Option<EndpointsInput>,
    /// `--routes` and the flags about where routes attach and how they authenticate.
    pub routes: RouteFlags,
}

/// `--plan-out FILE`, with the key that signs it: `--sign-key`, else `APPUPDATE_PLAN_KEY_FILE`.
#[derive(Clone, Debug)]
pub struct SavePlan {
    pub path: PathBuf,
    pub key: Option<PlanKey>,
}

impl Settings {
    /// The changes the flags ask for (an update; `None` for an undo or a saved plan).
    pub fn changes(&self) -> Option<&Changes> {
        match &self.mode {
            Mode::Update { changes, .. } => Some(changes),
            _ => None,
        }
    }

    /// Where to save the plan instead of applying it.
    pub fn save(&self) -> Option<&SavePlan> {
        match &self.mode {
            Mode::Update { save, .. } | Mode::Undo { save, .. } => save.as_ref(),
            Mode::Apply { .. } => None,
        }
    }

    /// What an update or an undo does after its plan; `None` for a saved plan.
    fn writes(&self) -> Option<&WriteFlags> {
        match &self.mode {
            Mode::Update { writes, .. } | Mode::Undo { writes, .. } => Some(writes),
            Mode::Apply { .. } => None,
        }
    }

    /// `--dry-run`.
    pub fn dry_run(&self) -> bool {
        self.writes().is_some_and(|w| w.dry_run)
    }

    /// `--detailed-exitcode`.
    pub fn detailed_exitcode(&self) -> bool {
        self.writes().is_some_and(|w| w.detailed_exitcode)
    }

    /// `--wait` (or `--undo-on-failure`), and not a run that only plans.
    pub fn wait(&self) -> bool {
        self.follow.wait && !self.dry_run()
    }

    /// `--verify-url`, resolved.
    pub fn verify(&self) -> Option<&ProbeSettings> {
        self.writes().and_then(|w| w.verify.as_ref())
    }

    /// `apply FILE --stop-after-wave N`.
    pub fn stop_after_wave(&self) -> Option<usize> {
        match &self.mode {
            Mode::Apply {
                stop_after_wave, ..
            } => *stop_after_wave,
            _ => None,
        }
    }

    /// The undo asked for.
    pub fn undo(&self) -> Option<&UndoRequest> {
        match &self.mode {
            Mode::Undo { request, .. } => Some(request),
            _ => None,
        }
    }

    /// The saved plan to apply.
    pub fn saved(&self) -> Option<&SavedInput> {
        match &self.mode {
            Mode::Apply { saved, .. } => Some(saved),
            _ => None,
        }
    }

    /// The run changes the image: `--wait` then follows the rollout.
    pub fn changes_image(&self) -> bool {
        self.changes()
            .is_some_and(|c| c.container_update.image.is_some())
    }
}

/// `kubectl appupdate history NAME`, resolved.
#[derive(Clone, Debug)]
pub struct HistorySettings {
    pub app: String,
    pub cluster: ClusterSelection,
    pub output: HistoryFormat,
    pub color: bool,
    pub verbose: u8,
    /// `--history-key`: shows whether each record verifies with it.
    pub history_key: Option<PlanKey>,
}

impl HistorySettings {
    pub fn resolve(
        args: HistoryArgs,
        cluster: ClusterArgs,
        env: &Environment,
        files: &dyn FileReader,
    ) -> Result<HistorySettings, SettingsError> {
        validate_app_name(&args.name).map_err(SettingsError::Invalid)?;
        let cluster = resolve_cluster(cluster, env)?;
        if cluster.several {
            return Err(SettingsError::Invalid(
                "history reads one cluster's records: give at most one --context".into(),
            ));
        }
        Ok(HistorySettings {
            history_key: history_key(args.history_key.history_key, env, files)?,
            app: args.name,
            cluster,
            output: args.output,
            color: decide_color(args.color, env, env.stdout_is_terminal),
            verbose: args.verbose,
        })
    }
}

/// kubectl's colour rule: the flag, then `NO_COLOR`, then `CLICOLOR_FORCE`, then `TERM=dumb`,
/// then whether the stream is a terminal.
pub fn decide_color(choice: ColorChoice, env: &Environment, stream_is_terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if env.no_color {
                false
            } else if env.clicolor_force {
                true
            } else if env.term_dumb {
                false
            } else {
                stream_is_terminal
            }
        }
    }
}

/// The application name names a Service, so it must be a DNS-1035 label — which also makes
/// it a valid label value for `app=<name>`.
fn validate_app_name(name: &str) -> Result<(), String> {
    if names::is_dns1035_label(name) {
        Ok(())
    } else {
        Err(format!(
            "application name {name:?} is not valid: use at most 63 lowercase letters, digits \
             and '-', starting with a letter and ending with a letter or digit",
            name = Untrusted(name)
        ))
    }
}

fn validate_namespace(ns: &str) -> Result<(), String> {
    if names::is_dns1123_label(ns) {
        Ok(())
    } else {
        Err(format!(
            "-n/--namespace {ns:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63)",
            ns = Untrusted(ns)
        ))
    }
}

/// The route flags, each value validated; with an explicit `--routes`, a flag of another style
/// is refused here, before anything is sent.
fn route_flags(args: &UpdateArgs) -> Result<RouteFlags, SettingsError> {
    fn flag<T>(
        name: &str,
        value: Option<&String>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, SettingsError> {
        value
            .map(|v| {
                parse(v).map_err(|why| {
                    // A URL's credentials are refused, and never shown.
                    let v = appupdate_model::text::without_credentials(v);
                    SettingsError::Invalid(format!("{name} {v:?}: {why}"))
                })
            })
            .transpose()
    }
    let mut hosts: Vec<String> = Vec::new();
    for h in &args.hosts {
        let h =
            refs::parse_host(h).map_err(|why| SettingsError::Invalid(format!("--host {why}")))?;
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    let flags = RouteFlags {
        style: args.routes.map(|r| match r {
            RoutesChoice::NginxSnippet => RouteStyle::NginxSnippet,
            RoutesChoice::NginxAuth => RouteStyle::NginxAuth,
            RoutesChoice::Gateway => RouteStyle::Gateway,
        }),
        auth_provider: args.auth_provider.map(|p| match p {
            AuthProviderChoice::Filter => AuthProvider::Filter,
            AuthProviderChoice::EnvoyGateway => AuthProvider::EnvoyGateway,
        }),
        auth_url: flag("--auth-url", args.auth_url.as_ref(), AuthUrl::parse)?,
        gateway: flag("--gateway", args.gateway.as_ref(), ObjectRef::parse)?,
        auth_service: flag(
            "--auth-service",
            args.auth_service.as_ref(),
            ServiceRef::parse,
        )?,
        ingress_class: flag(
            "--ingress-class",
            args.ingress_class.as_ref(),
            refs::parse_object_name,
        )?,
        hosts,
        tls_secret: flag(
            "--tls-secret",
            args.tls_secret.as_ref(),
            refs::parse_object_name,
        )?,
    };
    if let Some(style) = flags.style
        && let Some((flag, belongs)) = flags.foreign_to(style).first()
    {
        return Err(SettingsError::Invalid(format!(
            "{flag} applies to the {belongs} route style, not to --routes {style}; drop {flag}"
        )));
    }
    Ok(flags)
}

/// Reads a file named on the command line (`-` is stdin), within the bound of its `kind`
/// ([`appupdate_kube::files`]).
pub trait FileReader {
    fn read(&self, path: &std::path::Path, kind: FileKind) -> std::io::Result<String>;

    /// A file's bytes as they are (a key file); `-` is a file of that name, not stdin.
    fn read_bytes(&self, path: &std::path::Path, kind: FileKind) -> std::io::Result<Vec<u8>> {
        self.read(path, kind).map(String::into_bytes)
    }
}

/// The real file system and stdin, each file read within its bound.
pub struct RealFiles;

impl FileReader for RealFiles {
    fn read(&self, path: &std::path::Path, kind: FileKind) -> std::io::Result<String> {
        files::read_text(path, kind)
    }

    fn read_bytes(&self, path: &std::path::Path, kind: FileKind) -> std::io::Result<Vec<u8>> {
        files::read_bounded(path, kind)
    }
}

/// The key of `flag` (`--sign-key`, `--verify-key`), else the one [`PLAN_KEY_VAR`] names, else
/// none: the flag wins, and the variable's file is then not read.
fn plan_key(
    flag: &'static str,
    path: Option<PathBuf>,
    env: &Environment,
    files: &dyn FileReader,
) -> Result<Option<PlanKey>, SettingsError> {
    key_of(flag, path, PLAN_KEY_VAR, env.plan_key_file.as_ref(), files)
}

/// `--image-key`'s file: a cosign public key.
fn image_key(path: &Path, files: &dyn FileReader) -> Result<ImageKey, SettingsError> {
    let named = format!("--image-key {}", Untrusted(path.display().to_string()));
    let content =
        files
            .read_bytes(path, FileKind::Key)
            .map_err(|source| SettingsError::KeyUnreadable {
                key: named.clone(),
                source,
            })?;
    match appupdate_model::cosign::PublicKey::from_pem(&content) {
        Ok(key) => Ok(ImageKey {
            key: Arc::new(key),
            named,
        }),
        Err(why) => Err(SettingsError::Invalid(format!(
            "{named}: {why}; --image-key takes a cosign public key (PEM)"
        ))),
    }
}

/// The key of `--history-key`, else the one [`HISTORY_KEY_VAR`] names, else none; read and
/// checked as a plan key is.
fn history_key(
    path: Option<PathBuf>,
    env: &Environment,
    files: &dyn FileReader,
) -> Result<Option<PlanKey>, SettingsError> {
    key_of(
        "--history-key",
        path,
        HISTORY_KEY_VAR,
        env.history_key_file.as_ref(),
        files,
    )
}

/// The key in the file `flag` names, else in the one the variable `var` names (`from_var`),
/// else none; messages name it by the flag or the variable and its file, never by its bytes.
fn key_of(
    flag: &str,
    path: Option<PathBuf>,
    var: &str,
    from_var: Option<&PathBuf>,
    files: &dyn FileReader,
) -> Result<Option<PlanKey>, SettingsError> {
    let (path, named) = match (path, from_var) {
        (Some(path), _) => {
            let named = format!("{flag} {}", Untrusted(path.display().to_string()));
            (path, named)
        }
        (None, Some(path)) => {
            let named = format!("{var}={}", Untrusted(path.display().to_string()));
            (path.clone(), named)
        }
        (None, None) => return Ok(None),
    };
    let content =
        files
            .read_bytes(&path, FileKind::Key)
            .map_err(|source| SettingsError::KeyUnreadable {
                key: named.clone(),
                source,
            })?;
    PlanKey::new(content, named.clone())
        .map(Some)
        .map_err(|why| SettingsError::Key { key: named, why })
}

impl Settings {
    /// Validates what clap cannot (values that depend on each other, the image syntax, names,
    /// the endpoints file) without the cluster, and resolves the flags.
    pub fn resolve(
        args: UpdateArgs,
        env: &Environment,
        files: &dyn FileReader,
    ) -> Result<Settings, SettingsError> {
        let routes = route_flags(&args)?;
        let app = args.name.unwrap_or_default();
        validate_app_name(&app).map_err(SettingsError::Invalid)?;
        if let Some(image) = &args.image {
            validate_image_reference(image).map_err(|why| {
                SettingsError::Invalid(format!(
                    "--image {image:?}: {why}",
                    image = Untrusted(image)
                ))
            })?;
        }
        if let (Some(min), Some(max)) = (args.min_replicas, args.max_replicas)
            && min > max
        {
            return Err(SettingsError::Invalid(format!(
                "--min {min} is greater than --max {max}; the minimum must not exceed the maximum"
            )));
        }
        let cluster = resolve_cluster(args.cluster, env)?;
        let fleet = FleetSettings::resolve(args.run.fleet, &cluster, 0)?;
        if fleet.as_ref().is_some_and(|f| f.bake.is_some()) && !args.follow.wait {
            return Err(SettingsError::Invalid(
                "--bake watches each wave after its rollout: add --wait".into(),
            ));
        }

        let verify = verify_settings(
            args.verify_url.as_deref(),
            args.verify_url_ca.as_deref(),
            &cluster,
            fleet.is_some(),
            env,
            files,
        )?;

        let endpoints = match &args.endpoints {
            None => None,
            Some(path) => {
                let source = if path.as_os_str() == "-" {
                    "<stdin>".to_owned()
                } else {
                    path.display().to_string()
                };
                let text = files.read(path, FileKind::Endpoints).map_err(|e| {
                    SettingsError::EndpointsUnreadable {
                        name: source.clone(),
                        source: e,
                    }
                })?;
                let file = endpoints_file::parse(&text, &source)?;
                if file.endpoints.is_empty() && !args.allow_empty_endpoints {
                    return Err(SettingsError::NoEndpoints { name: source, app });
                }
                Some(EndpointsInput { source, file })
            }
        };

        // The variable serves the job that saves plans and the one that applies them: a run
        // that saves nothing does not read it.
        let save = match args.plan_out {
            Some(path) => Some(SavePlan {
                path,
                key: plan_key("--sign-key", args.sign_key, env, files)?,
            }),
            None => None,
        };

        if let Some(id) = &args.fleet_run
            && !appupdate_plan::history::is_fleet_run(id)
        {
            return Err(SettingsError::Invalid(format!(
                "--fleet-run {:?}: a fleet run is named by letters a-z, digits and '-' (see the fleetRun of `history -o json`)",
                Untrusted(id)
            )));
        }
        let checks_an_image = args.image.is_some() && !args.undo && args.to_revision.is_none();
        let mut image_check = ImageCheck::resolve(args.image_check, checks_an_image, env, files)?;
        image_check.registry.log = registry_log(args.run.verbose);
        let writes = WriteFlags {
            dry_run: args.dry_run,
            detailed_exitcode: args.detailed_exitcode,
            verify,
        };
        // clap keeps --undo and --to-revision apart from every change flag.
        let mode = if args.undo || args.to_revision.is_some() {
            Mode::Undo {
                request: UndoRequest {
                    revision: args.to_revision,
                    fleet_run: args.fleet_run.clone(),
                    force: args
                        .force_undo
                        .iter()
                        .map(|f| f.trim().to_owned())
                        .filter(|f| !f.is_empty())
                        .collect(),
                },
                save,
                writes,
            }
        } else {
            Mode::Update {
                changes: Box::new(Changes {
                    container: args.container,
                    container_update: ContainerUpdate { image: args.image },
                    autoscaler_update: AutoscalerUpdate {
                        min_replicas: args.min_replicas,
                        max_replicas: args.max_replicas,
                    },
                    endpoints,
                    routes,
                }),
                save,
                writes,
            }
        };
        Ok(Settings {
            app,
            mode,
            cluster,
            yes: args.run.yes,
            force_conflicts: args.run.force_conflicts,
            output: args.run.output,
            color: decide_color(args.run.color, env, env.stdout_is_terminal),
            color_stderr: decide_color(args.run.color, env, env.stderr_is_terminal),
            retries: args.run.retries,
            wait_timeout: args.timeout,
            follow: Follow::of(&args.follow),
            verbose: args.run.verbose,
            can_prompt: env.can_prompt,
            stderr_is_terminal: env.stderr_is_terminal,
            history_max: args.run.history_max,
            history_key: history_key(args.history_key.history_key, env, files)?,
            fleet,
            image_check,
        })
    }

    /// `apply FILE`: reads and checks the plan file (checksum, signature with a key, schema,
    /// shape) before anything is sent; the application is the plan's.
    pub fn resolve_apply(
        args: ApplyArgs,
        cluster: ClusterArgs,
        env: &Environment,
        files: &dyn FileReader,
    ) -> Result<Settings, SettingsError> {
        let name = if args.file.as_os_str() == "-" {
            "<stdin>".to_owned()
        } else {
            args.file.display().to_string()
        };
        let key = plan_key("--verify-key", args.verify_key, env, files)?;
        let text = files.read(&args.file, FileKind::Plan).map_err(|source| {
            SettingsError::PlanFileUnreadable {
                name: name.clone(),
                source,
            }
        })?;
        let file = plan_file::parse(&text, &name, key.as_ref())?;
        let app = file
            .clusters
            .first()
            .map(|c| c.plan.app.clone())
            .unwrap_or_default();
        validate_app_name(&app).map_err(|why| {
            SettingsError::PlanFile(PlanFileError::Invalid {
                file: name.clone(),
                why,
            })
        })?;
        if let Some(other) = file.clusters.iter().find(|c| c.plan.app != app) {
            return Err(SettingsError::PlanFile(PlanFileError::Invalid {
                file: name.clone(),
                why: format!(
                    "it holds plans for two applications ({:?} and {:?})",
                    Untrusted(&app),
                    Untrusted(&other.plan.app)
                ),
            }));
        }
        approved(&name, &file, &app, &args.app, &args.checksum)?;
        let cluster = resolve_cluster(cluster, env)?;
        // A pinned plan's image is checked only for its signature (--image-key).
        let with_key = args.image_check.image_key.is_some();
        let checks_an_image = file.clusters.iter().any(|c| {
            c.plan
                .image_checked
                .as_ref()
                .is_some_and(|image| !image.pinned || with_key)
        });
        if with_key && !checks_an_image {
            return Err(SettingsError::Invalid(format!(
                "--image-key: {} records no image resolved by the image check (it was made without --image, or with --image-check off), so there is no digest whose signature to verify; nothing was sent",
                Untrusted(&name)
            )));
        }
        let mut image_check = ImageCheck::resolve(
            ImageCheckArgs {
                image_check: args.image_check.image_check,
                insecure_registry: args.image_check.insecure_registry,
                pin_digest: false,
                image_key: args.image_check.image_key,
            },
            checks_an_image,
            env,
            files,
        )?;
        image_check.registry.log = registry_log(args.run.verbose);
        let waves_given = !args.run.fleet.wave.is_empty();
        let mut fleet = FleetSettings::resolve(args.run.fleet, &cluster, file.clusters.len())?;
        if fleet.as_ref().is_some_and(|f| f.bake.is_some()) && !args.follow.wait {
            return Err(SettingsError::Invalid(
                "--bake watches each wave after its rollout: add --wait".into(),
            ));
        }
        // The plan's waves, unless --wave gives others.
        if let Some(f) = fleet.as_mut()
            && !waves_given
            && f.canary.is_empty()
            && cluster.contexts.is_empty()
            && cluster.context_selector.is_none()
        {
            f.waves = file.waves.iter().cloned().map(WaveSpec::Named).collect();
        }
        if args.stop_after_wave.is_some() && fleet.as_ref().is_none_or(|f| f.waves.is_empty()) {
            return Err(SettingsError::Invalid(
                "--stop-after-wave applies to a plan of several clusters in waves: make it with --wave, or give --wave here".into(),
            ));
        }
        Ok(Settings {
            app,
            mode: Mode::Apply {
                saved: SavedInput {
                    name,
                    file,
                    max_age: args.max_plan_age.filter(|d| !d.is_zero()),
                },
                stop_after_wave: args.stop_after_wave.map(|n| n as usize),
            },
            cluster,
            yes: args.run.yes,
            force_conflicts: args.run.force_conflicts,
            output: args.run.output,
            color: decide_color(args.run.color, env, env.stdout_is_terminal),
            color_stderr: decide_color(args.run.color, env, env.stderr_is_terminal),
            retries: args.run.retries,
            wait_timeout: args.timeout,
            follow: Follow::of(&args.follow),
            verbose: args.run.verbose,
            can_prompt: env.can_prompt,
            stderr_is_terminal: env.stderr_is_terminal,
            history_max: args.run.history_max,
            history_key: history_key(args.history_key.history_key, env, files)?,
            fleet,
            image_check,
        })
    }
}

/// `apply FILE --app NAME --checksum sha256:…`: refuses any file but the approved plan, before
/// anything is sent.
fn approved(
    name: &str,
    file: &PlanFile,
    app: &str,
    want_app: &Option<String>,
    want_checksum: &Option<String>,
) -> Result<(), SettingsError> {
    if let Some(want) = want_app
        && want != app
    {
        return Err(SettingsError::Invalid(format!(
            "{} is a plan for the application {:?}, not --app {}; nothing was sent",
            Untrusted(name),
            Untrusted(app),
            Untrusted(want)
        )));
    }
    if let Some(want) = want_checksum
        && *want != file.checksum
    {
        return Err(SettingsError::Invalid(format!(
            "{} is not the approved plan: its checksum is {}, not --checksum {want}; nothing was sent",
            Untrusted(name),
            Untrusted(&file.checksum)
        )));
    }
    Ok(())
}

/// `--verify-url` and `--verify-url-ca`, checked before anything is sent: the address's form,
/// the CA file, the proxy the environment chooses for it, the bound on each request
/// (`--request-timeout`, else [`verify::DEFAULT_REQUEST_TIMEOUT`]).
fn verify_settings(
    verify_url: Option<&str>,
    verify_url_ca: Option<&std::path::Path>,
    cluster: &ClusterSelection,
    fleet: bool,
    env: &Environment,
    files: &dyn FileReader,
) -> Result<Option<ProbeSettings>, SettingsError> {
    let Some(text) = verify_url else {
        return Ok(None);
    };
    let invalid = |why: String| {
        SettingsError::Invalid(format!(
            "--verify-url {:?}: {why}",
            Untrusted(VerifyUrl::redacted(text))
        ))
    };
    if fleet {
        return Err(SettingsError::Invalid(
            "--verify-url checks one cluster's gateway or ingress controller, so it cannot be used with several contexts; run it per context".into(),
        ));
    }
    let url = VerifyUrl::parse(text).map_err(invalid)?;
    let ca =
        match verify_url_ca {
            None => None,
            Some(path) => {
                let shown = Untrusted(path.display().to_string());
                let pem = files.read_bytes(path, FileKind::Certificate).map_err(|e| {
                    SettingsError::Invalid(format!(
                        "--verify-url-ca {shown}: cannot read the file: {}",
                        Untrusted(e.to_string())
                    ))
                })?;
                Some(probe::parse_ca(&pem).map_err(|why| {
                    SettingsError::Invalid(format!("--verify-url-ca {shown}: {why}"))
                })?)
            }
        };
    let target = appupdate_kube::proxy::Target {
        scheme: url.scheme.clone(),
        host: url.host.clone(),
        port: url.port,
    };
    let proxy = appupdate_kube::proxy::from_environment(&target, &env.proxy)
        .map_err(|e| invalid(e.to_string()))?;
    let request_timeout = cluster
        .request_timeout
        .unwrap_or(verify::DEFAULT_REQUEST_TIMEOUT);
    Ok(Some(ProbeSettings {
        url,
        ca,
        proxy,
        request_timeout,
        overall: verify::OVERALL.max(request_timeout),
        user_agent: concat!(
            "kubectl-appupdate/",
            env!("CARGO_PKG_VERSION"),
            " (verify-url)"
        )
        .to_owned(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    struct NoFiles;
    impl FileReader for NoFiles {
        fn read(&self, path: &std::path::Path, _: FileKind) -> std::io::Result<String> {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no such file {}", path.display()),
            ))
        }
    }

    fn resolve(args: &[&str], env: &Environment) -> Result<Settings, SettingsError> {
        let mut argv = vec!["kubectl-appupdate"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_args(argv).unwrap();
        Settings::resolve(cli.update, env, &NoFiles)
    }

    fn err(args: &[&str]) -> String {
        resolve(args, &Environment::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_mode_is_decided_once_from_the_flags() {
        let env = Environment::default();
        let update = resolve(&["web", "--image", "r/web:2", "--plan-out", "p.json"], &env).unwrap();
        match &update.mode {
            Mode::Update { changes, save, .. } => {
                assert_eq!(changes.container_update.image.as_deref(), Some("r/web:2"));
                assert_eq!(save.as_ref().map(|s| s.path.clone()), Some("p.json".into()));
            }
            other => panic!("{other:?}"),
        }
        assert!(update.changes_image() && update.undo().is_none() && update.saved().is_none());
        let undo = resolve(&["web", "--to-revision", "3"], &env).unwrap();
        match &undo.mode {
            Mode::Undo { request, save, .. } => {
                assert_eq!(request.revision, Some(3));
                assert!(save.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(undo.changes().is_none() && !undo.changes_image());
    }

    /// Files by name; any other is missing.
    struct Files(Vec<(&'static str, &'static str)>);
    impl FileReader for Files {
        fn read(&self, path: &std::path::Path, _: FileKind) -> std::io::Result<String> {
            self.0
                .iter()
                .find(|(name, _)| std::path::Path::new(name) == path)
                .map(|(_, text)| (*text).to_owned())
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    const KEYS: &[(&str, &str)] = &[
        ("flag.key", "0123456789abcdef0123456789abcdef\n"),
        ("env.key", "fedcba9876543210fedcba9876543210\r\n"),
        ("short.key", "0123456789abcde\n"),
        ("empty.key", "\n"),
    ];

    fn with_keys(args: &[&str], env_key: Option<&str>) -> Result<Settings, SettingsError> {
        let env = Environment {
            plan_key_file: env_key.map(PathBuf::from),
            ..Default::default()
        };
        let mut argv = vec!["kubectl-appupdate"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_args(argv).unwrap();
        Settings::resolve(cli.update, &env, &Files(KEYS.to_vec()))
    }

    fn signed_by(args: &[&str], env_key: Option<&str>) -> Option<String> {
        with_keys(args, env_key)
            .unwrap()
            .save()
            .and_then(|s| s.key.as_ref())
            .map(|k| k.named().to_owned())
    }

    #[test]
    fn the_sign_key_flag_wins_over_the_variable_which_only_applies_to_plan_out() {
        let save = ["web", "--max", "3", "--plan-out", "p.json"];
        let flag = [&save[..], &["--sign-key", "flag.key"]].concat();
        assert_eq!(
            signed_by(&flag, Some("env.key")).as_deref(),
            Some("--sign-key flag.key")
        );
        assert_eq!(
            signed_by(&flag, None).as_deref(),
            Some("--sign-key flag.key")
        );
        assert_eq!(
            signed_by(&save, Some("env.key")).as_deref(),
            Some("APPUPDATE_PLAN_KEY_FILE=env.key")
        );
        assert_eq!(signed_by(&save, None), None);
        // A run that saves nothing does not read the variable's file, even a broken one.
        assert_eq!(signed_by(&["web", "--max", "3"], Some("missing.key")), None);
        // The flag wins: the variable's file is not read.
        assert!(with_keys(&flag, Some("missing.key")).is_ok());
    }

    #[test]
    fn the_history_key_is_its_flag_else_its_variable_for_every_command() {
        let env = |file: Option<&str>| Environment {
            history_key_file: file.map(PathBuf::from),
            plan_key_file: Some("env.key".into()),
            ..Default::default()
        };
        let files = Files(KEYS.to_vec());
        let cli = |args: &[&str]| {
            let mut argv = vec!["kubectl-appupdate"];
            argv.extend_from_slice(args);
            Cli::try_parse_args(argv).unwrap()
        };
        let named = |s: Result<Settings, SettingsError>| {
            s.unwrap().history_key.map(|k| k.named().to_owned())
        };
        let update = |args: &[&str], file| Settings::resolve(cli(args).update, &env(file), &files);
        assert_eq!(
            named(update(
                &["web", "--undo", "--history-key", "flag.key"],
                Some("env.key")
            ))
            .as_deref(),
            Some("--history-key flag.key")
        );
        assert_eq!(
            named(update(&["web", "--max", "3"], Some("env.key"))).as_deref(),
            Some("APPUPDATE_HISTORY_KEY_FILE=env.key")
        );
        // The plan key's variable is not the history key's.
        assert_eq!(named(update(&["web", "--max", "3"], None)), None);
        assert_eq!(
            update(&["web", "--undo"], Some("short.key"))
                .unwrap_err()
                .to_string(),
            "APPUPDATE_HISTORY_KEY_FILE=short.key: the key is shorter than 16 bytes; a key needs at least 16, e.g. from openssl rand -hex 32"
        );
        let c = cli(&["history", "web", "--history-key", "flag.key"]);
        let Some(crate::cli::Command::History(args)) = c.command else {
            panic!("history")
        };
        let h = HistorySettings::resolve(args, c.update.cluster, &env(None), &files).unwrap();
        assert_eq!(h.history_key.unwrap().named(), "--history-key flag.key");
    }

    #[test]
    fn a_key_file_that_cannot_be_a_key_is_refused_in_one_line() {
        let err = |args: &[&str], env_key| with_keys(args, env_key).unwrap_err().to_string();
        let save = |key: &'static str| {
            vec![
                "web",
                "--max",
                "3",
                "--plan-out",
                "p.json",
                "--sign-key",
                key,
            ]
        };
        assert_eq!(
            err(&save("short.key"), None),
            "--sign-key short.key: the key is shorter than 16 bytes; a key needs at least 16, e.g. from openssl rand -hex 32"
        );
        assert_eq!(
            err(&save("empty.key"), None),
            "--sign-key empty.key: the key file is empty; a key needs at least 16 bytes, e.g. from openssl rand -hex 32"
        );
        assert!(
            err(&save("missing.key"), None)
                .starts_with("--sign-key missing.key: cannot read the key file: "),
        );
        assert_eq!(
            err(
                &["web", "--max", "3", "--plan-out", "p.json"],
                Some("empty.key")
            ),
            "APPUPDATE_PLAN_KEY_FILE=empty.key: the key file is empty; a key needs at least 16 bytes, e.g. from openssl rand -hex 32"
        );
    }

    const VERIFY_FILES: &[(&str, &str)] = &[
        ("e.yaml", "endpoints:\n  - path: /a\n    scopes: [user]\n"),
        (
            "ca.pem",
            "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n",
        ),
        (
            "key.pem",
            "-----BEGIN PRIVATE KEY-----\nAAEC\n-----END PRIVATE KEY-----\n",
        ),
    ];

    fn verifying(args: &[&str], env: &Environment) -> Result<Settings, SettingsError> {
        let mut argv = vec!["kubectl-appupdate", "web", "--endpoints", "e.yaml"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_args(argv).unwrap();
        Settings::resolve(cli.update, env, &Files(VERIFY_FILES.to_vec()))
    }

    #[test]
    fn a_verify_url_is_checked_and_resolved_before_any_request() {
        let env = Environment::default();
        let err = |args: &[&str]| verifying(args, &env).unwrap_err().to_string();
        assert_eq!(
            err(&["--verify-url", "https://gw.example.com/shop"]),
            "--verify-url \"https://gw.example.com/shop\": it has a path (\"/shop\"); the routes' paths (/APP/…) are requested on the address alone: give the gateway's or ingress controller's address as http://HOST[:PORT] or https://HOST[:PORT]"
        );
        assert!(
            err(&["--verify-url", "https://gw", "--verify-url-ca", "key.pem"])
                .starts_with("--verify-url-ca key.pem: it holds no PEM certificate"),
        );
        assert!(
            err(&["--verify-url", "https://gw", "--verify-url-ca", "gone.pem"])
                .starts_with("--verify-url-ca gone.pem: cannot read the file: "),
        );
        assert_eq!(
            err(&["--verify-url", "https://gw", "--contexts", "a,b"]),
            "--verify-url checks one cluster's gateway or ingress controller, so it cannot be used with several contexts; run it per context"
        );
        let s = verifying(
            &[
                "--verify-url",
                "https://gw:8443",
                "--verify-url-ca",
                "ca.pem",
                "--request-timeout",
                "2s",
            ],
            &env,
        )
        .unwrap();
        let v = s.verify().unwrap();
        assert_eq!(v.url.to_string(), "https://gw:8443");
        assert_eq!(v.ca, Some(vec![vec![0, 1, 2]]));
        assert_eq!(v.request_timeout, Duration::from_secs(2));
        assert_eq!(v.overall, appupdate_model::verify::OVERALL);
        assert_eq!(v.proxy, None);
        let v = verifying(&["--verify-url", "http://gw"], &env)
            .unwrap()
            .verify()
            .cloned()
            .unwrap();
        assert_eq!(
            v.request_timeout,
            appupdate_model::verify::DEFAULT_REQUEST_TIMEOUT
        );
        assert!(verifying(&[], &env).unwrap().verify().is_none());
    }

    #[test]
    fn the_verify_url_takes_the_proxy_kubectl_would_take_for_it() {
        let env = |vars: &[(&str, &str)]| Environment {
            proxy: ProxyEnv::from_lookup(|k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }),
            ..Default::default()
        };
        let proxy = |url: &str, vars: &[(&str, &str)]| {
            verifying(&["--verify-url", url], &env(vars))
                .unwrap()
                .verify()
                .cloned()
                .unwrap()
                .proxy
                .map(|p| p.to_string())
        };
        let vars = [
            ("HTTPS_PROXY", "http://secure.proxy:3128"),
            ("HTTP_PROXY", "plain.proxy:8080"),
            ("NO_PROXY", "internal.example,10.0.0.0/8"),
        ];
        assert_eq!(
            proxy("https://gw.example.com", &vars).as_deref(),
            Some("http://secure.proxy:3128 (HTTPS_PROXY)")
        );
        assert_eq!(
            proxy("http://gw.example.com", &vars).as_deref(),
            Some("http://plain.proxy:8080 (HTTP_PROXY)")
        );
        assert_eq!(proxy("https://gw.internal.example", &vars), None);
        assert_eq!(proxy("http://10.1.2.3:8080", &vars), None);
        assert_eq!(proxy("http://127.0.0.1:8080", &vars), None);
        // A CGI process may not take HTTP_PROXY: refused before any request.
        let cgi = [
            ("HTTP_PROXY", "plain.proxy:8080"),
            ("REQUEST_METHOD", "GET"),
        ];
        let err = verifying(&["--verify-url", "http://gw"], &env(&cgi))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--verify-url \"http://gw\": refusing to use HTTP_PROXY"),
            "{err}"
        );
    }

    #[test]
    fn bounds_are_checked_before_any_request() {
        assert_eq!(
            err(&["web", "--min", "5", "--max", "3"]),
            "--min 5 is greater than --max 3; the minimum must not exceed the maximum"
        );
    }

    #[test]
    fn bad_image_is_named() {
        assert_eq!(
            err(&["web", "--image", "Registry/Web:1"]),
            "--image \"Registry/Web:1\": repository name component \"Registry\" must be lowercase"
        );
    }

    #[test]
    fn kubeconfig_precedence_is_kubectls() {
        let env = Environment {
            kubeconfig: Some(OsString::from("/a:/b::")),
            home: Some(PathBuf::from("/home/u")),
            ..Default::default()
        };
        let s = resolve(&["web", "--max", "3"], &env).unwrap();
        assert_eq!(
            s.cluster.kubeconfig,
            KubeconfigSource::Env(vec![PathBuf::from("/a"), PathBuf::from("/b")])
        );
        let s = resolve(&["web", "--max", "3", "--kubeconfig", "/k"], &env).unwrap();
        assert_eq!(
            s.cluster.kubeconfig,
            KubeconfigSource::Flag(PathBuf::from("/k"))
        );
        let env = Environment {
            home: Some(PathBuf::from("/home/u")),
            ..Default::default()
        };
        let s = resolve(&["web", "--max", "3"], &env).unwrap();
        assert_eq!(
            s.cluster.kubeconfig,
            KubeconfigSource::Home(PathBuf::from("/home/u/.kube/config"))
        );
    }

    #[test]
    fn kuberc_location_is_kubectls() {
        let env = |kuberc: Option<&str>, switch: Option<&str>| Environment {
            home: Some(PathBuf::from("/home/u")),
            kuberc: kuberc.map(OsString::from),
            kubectl_kuberc: switch.map(OsString::from),
            ..Default::default()
        };
        let home = KubercSource::Home(PathBuf::from("/home/u/.kube/kuberc"));
        assert_eq!(kuberc_source(&env(None, None)), home);
        assert_eq!(kuberc_source(&env(Some(""), None)), home);
        assert_eq!(kuberc_source(&env(None, Some("true"))), home);
        assert_eq!(
            kuberc_source(&env(Some("/etc/kuberc"), None)),
            KubercSource::Env(PathBuf::from("/etc/kuberc"))
        );
        assert_eq!(kuberc_source(&env(Some("off"), None)), KubercSource::Off);
        assert_eq!(
            kuberc_source(&env(Some("/etc/kuberc"), Some("false"))),
            KubercSource::Off
        );
        assert_eq!(
            kuberc_source(&Environment::default()),
            KubercSource::Nowhere
        );
        let s = resolve(&["web", "--max", "3"], &env(Some("/etc/kuberc"), None)).unwrap();
        assert_eq!(
            s.cluster.credential_policy.kuberc,
            KubercSource::Env(PathBuf::from("/etc/kuberc"))
        );
    }

    #[test]
    fn colour_follows_kubectls_rule() {
        let tty = Environment {
            stdout_is_terminal: true,
            ..Default::default()
        };
        assert!(decide_color(ColorChoice::Auto, &tty, true));
        assert!(!decide_color(ColorChoice::Auto, &tty, false));
        let no = Environment {
            no_color: true,
            clicolor_force: true,
            ..Default::default()
        };
        assert!(!decide_color(ColorChoice::Auto, &no, true));
        assert!(decide_color(ColorChoice::Always, &no, false));
        let force = Environment {
            clicolor_force: true,
            ..Default::default()
        };
        assert!(decide_color(ColorChoice::Auto, &force, false));
        let dumb = Environment {
            term_dumb: true,
            ..Default::default()
        };
        assert!(!decide_color(ColorChoice::Auto, &dumb, true));
        assert!(!decide_color(ColorChoice::Never, &tty, true));
    }
}
