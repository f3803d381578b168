//! Flags plus the environment become resolved [`Settings`]. The environment (variables,
//! terminals, files named on the command line) is read here and only here.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{ColorChoice, OutputFormat, UpdateArgs};
use crate::endpoints_file::{self, EndpointsFile};
use crate::error::AppError;
use crate::proxy::ProxyEnv;
use crate::updaters::{AutoscalerUpdate, ContainerUpdate, validate_image_reference};

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
        }
    }
}

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

/// Which cluster, user and namespace to talk to.
#[derive(Clone, Debug)]
pub struct ClusterSelection {
    pub kubeconfig: KubeconfigSource,
    pub context: Option<String>,
    pub cluster: Option<String>,
    pub user: Option<String>,
    pub namespace: Option<String>,
    pub as_user: Option<String>,
    pub as_groups: Vec<String>,
    /// `None`: no bound (kubectl's default).
    pub request_timeout: Option<Duration>,
    /// The proxy variables, for when the kubeconfig sets no `proxy-url`.
    pub proxy_env: ProxyEnv,
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
    pub container: Option<String>,
    pub container_update: ContainerUpdate,
    pub autoscaler_update: AutoscalerUpdate,
    pub endpoints: Option<EndpointsInput>,
    pub cluster: ClusterSelection,
    pub yes: bool,
    pub dry_run: bool,
    pub detailed_exitcode: bool,
    pub output: OutputFormat,
    /// Colour on stdout.
    pub color: bool,
    /// Colour on stderr (prompts, progress).
    pub color_stderr: bool,
    pub retries: u32,
    pub wait: bool,
    pub wait_timeout: Duration,
    pub verbose: u8,
    pub can_prompt: bool,
    pub stderr_is_terminal: bool,
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

/// A Kubernetes object name as the platform uses it: a DNS-1035 label (the Service name
/// rules), which also makes it a valid label value for `app=<name>`.
fn validate_app_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let ends = name
        .chars()
        .last()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() || name.len() > 63 || !ok_chars || !starts || !ends {
        return Err(format!(
            "application name {name:?} is not valid: use at most 63 lowercase letters, digits \
             and '-', starting with a letter and ending with a letter or digit"
        ));
    }
    Ok(())
}

fn validate_namespace(ns: &str) -> Result<(), String> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "-n/--namespace {ns:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63)"
        ))
    }
}

/// Reads a file named on the command line (`-` is stdin).
pub trait FileReader {
    fn read(&self, path: &std::path::Path) -> std::io::Result<String>;
}

/// The real file system and stdin.
pub struct RealFiles;

impl FileReader for RealFiles {
    fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
        if path.as_os_str() == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
            Ok(s)
        } else {
            std::fs::read_to_string(path)
        }
    }
}

impl Settings {
    /// Validates flags (everything that can be checked without the cluster) and resolves them.
    pub fn resolve(
        args: UpdateArgs,
        env: &Environment,
        files: &dyn FileReader,
    ) -> Result<Settings, AppError> {
        let app = args.name.unwrap_or_default();
        validate_app_name(&app).map_err(AppError::Usage)?;
        if args.image.is_none()
            && args.min_replicas.is_none()
            && args.max_replicas.is_none()
            && args.endpoints.is_none()
        {
            return Err(AppError::Usage(
                "nothing to change: give at least one of --image, --min, --max or --endpoints"
                    .into(),
            ));
        }
        if let Some(image) = &args.image {
            validate_image_reference(image)
                .map_err(|why| AppError::Usage(format!("--image {image:?}: {why}")))?;
        }
        if args.container.is_some() && args.image.is_none() {
            return Err(AppError::Usage(
                "--container only selects the container for --image; add --image".into(),
            ));
        }
        if let Some(min) = args.min_replicas
            && min < 1
        {
            return Err(AppError::Usage(format!(
                "--min {min}: the minimum replica count must be at least 1"
            )));
        }
        if let Some(max) = args.max_replicas
            && max < 1
        {
            return Err(AppError::Usage(format!(
                "--max {max}: the maximum replica count must be at least 1"
            )));
        }
        if let (Some(min), Some(max)) = (args.min_replicas, args.max_replicas)
            && min > max
        {
            return Err(AppError::Usage(format!(
                "--min {min} is greater than --max {max}; the minimum must not exceed the maximum"
            )));
        }
        if args.allow_empty_endpoints && args.endpoints.is_none() {
            return Err(AppError::Usage(
                "--allow-empty-endpoints only applies with --endpoints FILE".into(),
            ));
        }
        if args.detailed_exitcode && !args.dry_run {
            return Err(AppError::Usage(
                "--detailed-exitcode only applies with --dry-run".into(),
            ));
        }
        if args.wait && args.image.is_none() {
            return Err(AppError::Usage(
                "--wait follows the rollout of an image change; add --image".into(),
            ));
        }
        if let Some(ns) = &args.namespace {
            validate_namespace(ns).map_err(AppError::Usage)?;
        }

        let endpoints = match &args.endpoints {
            None => None,
            Some(path) => {
                let source = if path.as_os_str() == "-" {
                    "<stdin>".to_owned()
                } else {
                    path.display().to_string()
                };
                let text = files.read(path).map_err(|e| {
                    AppError::Input(format!("cannot read endpoints file {source}: {e}"))
                })?;
                let file = endpoints_file::parse(&text, &source)
                    .map_err(|e| AppError::Input(e.to_string()))?;
                if file.endpoints.is_empty() && !args.allow_empty_endpoints {
                    return Err(AppError::Input(format!(
                        "{source}: the file lists no endpoints, which would remove every public \
                         route of {app}; pass --allow-empty-endpoints if that is intended"
                    )));
                }
                Some(EndpointsInput { source, file })
            }
        };

        let kubeconfig = if let Some(path) = args.kubeconfig {
            KubeconfigSource::Flag(path)
        } else if let Some(list) = env.kubeconfig.as_ref().filter(|v| !v.is_empty()) {
            let paths: Vec<PathBuf> = std::env::split_paths(list)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            if paths.is_empty() {
                home_kubeconfig(env)
            } else {
                KubeconfigSource::Env(paths)
            }
        } else {
            home_kubeconfig(env)
        };

        let request_timeout = args.request_timeout.filter(|d| !d.is_zero());
        Ok(Settings {
            app,
            container: args.container,
            container_update: ContainerUpdate { image: args.image },
            autoscaler_update: AutoscalerUpdate {
                min_replicas: args.min_replicas,
                max_replicas: args.max_replicas,
            },
            endpoints,
            cluster: ClusterSelection {
                kubeconfig,
                context: args.context,
                cluster: args.cluster,
                user: args.user,
                namespace: args.namespace,
                as_user: args.as_user,
                as_groups: args.as_group,
                request_timeout,
                proxy_env: env.proxy.clone(),
            },
            yes: args.yes,
            dry_run: args.dry_run,
            detailed_exitcode: args.detailed_exitcode,
            output: args.output,
            color: decide_color(args.color, env, env.stdout_is_terminal),
            color_stderr: decide_color(args.color, env, env.stderr_is_terminal),
            retries: args.retries,
            wait: args.wait,
            wait_timeout: args.timeout,
            verbose: args.verbose,
            can_prompt: env.can_prompt,
            stderr_is_terminal: env.stderr_is_terminal,
        })
    }
}

fn home_kubeconfig(env: &Environment) -> KubeconfigSource {
    match &env.home {
        Some(home) => KubeconfigSource::Home(home.join(".kube").join("config")),
        None => KubeconfigSource::Nowhere,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    struct NoFiles;
    impl FileReader for NoFiles {
        fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no such file {}", path.display()),
            ))
        }
    }

    fn resolve(args: &[&str], env: &Environment) -> Result<Settings, AppError> {
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
    fn at_least_one_change_is_required() {
        assert_eq!(
            err(&["web"]),
            "nothing to change: give at least one of --image, --min, --max or --endpoints"
        );
    }

    #[test]
    fn bounds_are_checked_before_any_request() {
        assert_eq!(
            err(&["web", "--min", "0"]),
            "--min 0: the minimum replica count must be at least 1"
        );
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

    #[test]
    fn detailed_exitcode_needs_dry_run() {
        assert_eq!(
            err(&["web", "--max", "3", "--detailed-exitcode"]),
            "--detailed-exitcode only applies with --dry-run"
        );
    }
}
