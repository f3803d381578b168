//! Command-line flags, exactly as typed (clap derive). No defaults from the environment here:
//! `settings` turns these into resolved settings.
//!
//! Every rule about flags alone lives on the flags, for clap to check: which flag needs which
//! (`requires`), at least one change (the `changes` group), the range of `--min`/`--max`
//! ([`ReplicaBound`]). A broken rule gets its own one-line message ([`parse`]) instead of
//! clap's generic one; rules that need values from several flags or files (`--min` ≤ `--max`,
//! the image syntax, the endpoints file) are `settings`'s.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand, ValueEnum};

use appupdate_model::text::Untrusted;

pub const AFTER_HELP: &str = "\
Examples:
  # See what would change, then confirm interactively
  kubectl appupdate web --image registry.example.com/web:2.1 --min 2 --max 8

  # In CI: apply without asking
  kubectl appupdate web -n shop --image \"$IMAGE\" --yes

  # Preview only; exit 2 when there are changes, 0 when there are none
  kubectl appupdate web --max 10 --dry-run --detailed-exitcode

  # Re-expose endpoints from a file (one route per scope set, in the live routes' style)
  kubectl appupdate web --endpoints endpoints.yaml

  # Publish them as Gateway API HTTPRoutes (migrates the live Ingresses)
  kubectl appupdate web --endpoints endpoints.yaml --routes gateway \
    --gateway gateways/public --auth-service auth/oauth:8080

  # In a pipeline: the plan as JSON on stdout, apply, wait for the rollout (exit 7 if it stalls)
  kubectl appupdate web --image \"$IMAGE\" -o json --yes --wait --timeout 10m > plan.json

  # Several clusters: one plan, one question, eu-1 first and the rest once it rolled out
  kubectl appupdate web --contexts eu-1,eu-2,us-1 --image \"$IMAGE\" --canary eu-1

Exit codes:
  0    success, or nothing to change
  1    failed with nothing written (the server refused a dry run or, when the run
       writes one object, that write): nothing was changed
  2    changes pending (only with --detailed-exitcode)
  3    bad flags or input (endpoints file, kubeconfig, values), or scoped routes
       the cluster cannot enforce (no ExternalAuth filter): nothing was changed
  4    not confirmed (answered no, or no terminal and no --yes): nothing was changed
  5    stopped by the approved-diff guard: the live object changed since the plan was shown
  6    failed after some writes: the output lists what was and was not applied
  7    --wait: the changes were applied but the rollout did not complete in --timeout,
       cannot succeed (--fail-fast: the error says why) or exceeded its progress deadline, or a route was refused by its Gateway or not
       taken up in --timeout (--canary: the other clusters were not started)
  8    several clusters with --skip-unreachable: clusters were left out (listed)
  9    --verify-url: a path with scopes answered a request without a token with
       something other than 401/403, or not at all (listed)
  10   --undo-on-failure: it failed after writing, and was put back as it was
  11   --undo-on-failure: it failed after writing, and was NOT put back completely
       (what is where is listed)
  130  interrupted (SIGINT, Ctrl-C); 143 terminated (SIGTERM; Ctrl-Break on Windows)
  Several clusters: the worst cluster's code (6 when one failed after another
  was written).
  Streams: the plan and what was done on stdout; what was not done and every
  error on stderr. With -o json|yaml, stdout holds only the plan document.";

/// Change a running application's image, autoscaler bounds and endpoints, safely.
///
/// Reads the application's Deployment, HorizontalPodAutoscaler, Service and Ingresses
/// (all labelled app=NAME), shows exactly what would change, asks for confirmation, validates
/// the changes with a server-side dry run (a run that changes one object lets its write be the
/// check), then applies each one conditionally on the version that was shown, retrying
/// conflicts without ever overwriting a change nobody saw.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl appupdate",
    bin_name = "kubectl appupdate",
    version,
    after_help = AFTER_HELP,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub update: UpdateArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Apply a plan saved with --plan-out, exactly as it was reviewed.
    Apply(Box<ApplyArgs>),
    /// List the recorded changes of an application, oldest first.
    History(HistoryArgs),
}

/// `kubectl appupdate apply FILE`.
#[derive(Debug, Args)]
#[command(after_help = APPLY_AFTER_HELP)]
pub struct ApplyArgs {
    /// The plan file written by --plan-out.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Refuse a plan older than this, e.g. 1h (default: no limit).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Behaviour")]
    pub max_plan_age: Option<Duration>,

    /// Refuse any file but the plan of this checksum: the one printed when the plan was saved
    /// (over the plan's content: not sha256sum of the file).
    #[arg(long, value_name = "sha256:HEX", value_parser = parse_checksum, help_heading = "Behaviour")]
    pub checksum: Option<String>,

    /// Refuse a plan for any application but NAME.
    #[arg(long, value_name = "NAME", help_heading = "Behaviour")]
    pub app: Option<String>,

    /// Refuse the plan unless it is signed with the key in KEYFILE (default:
    /// $APPUPDATE_PLAN_KEY_FILE; without either, a signature is not checked).
    #[arg(long, value_name = "KEYFILE", help_heading = "Behaviour")]
    pub verify_key: Option<PathBuf>,

    #[command(flatten)]
    pub history_key: HistoryKeyArgs,

    #[command(flatten)]
    pub image_check: ApplyImageArgs,

    #[command(flatten)]
    pub run: RunArgs,

    /// Apply the waves up to this one (from 1) and stop; applying the same file again carries
    /// on with the clusters it has not applied yet.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          help_heading = "Fleet")]
    pub stop_after_wave: Option<u32>,

    #[command(flatten)]
    pub follow: FollowArgs,

    /// How long --wait and --canary follow a rollout and routes, e.g. 5m (0: no bound).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m",
          help_heading = "After the writes")]
    pub timeout: Duration,
}

pub const APPLY_AFTER_HELP: &str = "\
The plan is applied to the cluster and namespace it was made for: the current context must
point at the same API server and namespace, or --context must name the context the plan was
made with. A plan of several clusters is applied to each through the context of its name
(--context/--contexts choose some of them), with the fleet flags. Before the first write every object is read again; if a field the plan changes is
no longer at the value the plan showed, nothing is written (exit 5). An edited or truncated
file is refused (exit 3). With --verify-key KEYFILE (or $APPUPDATE_PLAN_KEY_FILE), so is a file
that is not signed with that key; with --checksum (printed when the plan was saved) or --app,
any file but the approved plan.

Examples:
  kubectl appupdate web --image \"$IMAGE\" --plan-out plan.json   # review plan.json
  kubectl appupdate apply plan.json --yes --max-plan-age 1h --checksum sha256:…

  # Signed: only a plan signed with the key is applied
  kubectl appupdate web --image \"$IMAGE\" --plan-out plan.json --sign-key plan.key
  kubectl appupdate apply plan.json --yes --verify-key plan.key";

/// `kubectl appupdate history NAME`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Name of the application.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Output format: a table, or the records as data.
    #[arg(short = 'o', long, value_enum, default_value_t = HistoryFormat::Table, help_heading = "Output")]
    pub output: HistoryFormat,

    #[command(flatten)]
    pub history_key: HistoryKeyArgs,

    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = "Output")]
    pub color: ColorChoice,

    /// More detail on stderr (requests); never prints credentials.
    #[arg(short = 'v', long, action = clap::ArgAction::Count, help_heading = "Output")]
    pub verbose: u8,
}

/// `--history-key`: the key that signs the history records a run writes and verifies those an
/// undo (or `history`) reads. A flag of its own: `--sign-key` and `--verify-key` are the saved
/// plan's.
#[derive(Debug, Args)]
pub struct HistoryKeyArgs {
    /// Sign the history records written with the key in KEYFILE (HMAC-SHA-256), and undo only
    /// records that verify with it; `history` shows which do (default:
    /// $APPUPDATE_HISTORY_KEY_FILE; without either, records are neither signed nor checked).
    #[arg(long, value_name = "KEYFILE", help_heading = "History")]
    pub history_key: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum HistoryFormat {
    /// One line per record.
    Table,
    /// The records as JSON.
    Json,
    /// The records as YAML.
    Yaml,
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("undo_request").args(["undo", "to_revision"]).multiple(true)
))]
#[command(group(
    ArgGroup::new("changes")
        .args(["image", "min_replicas", "max_replicas", "endpoints", "undo", "to_revision"])
        .required(true)
        .multiple(true)
))]
pub struct UpdateArgs {
    /// Name of the application (its Deployment, HPA, Service and Ingresses carry app=NAME).
    #[arg(value_name = "NAME", required = true)]
    pub name: Option<String>,

    /// New container image, e.g. registry.example.com/web:2.1.
    #[arg(long, value_name = "IMAGE", help_heading = "Changes")]
    pub image: Option<String>,

    /// Container whose image to set; required when the pod has several containers.
    #[arg(
        long,
        value_name = "NAME",
        requires = "image",
        help_heading = "Changes"
    )]
    pub container: Option<String>,

    /// New minimum replica count of the HorizontalPodAutoscaler (at least 1).
    #[arg(long = "min", value_name = "N", value_parser = ReplicaBound::MIN, help_heading = "Changes")]
    pub min_replicas: Option<i32>,

    /// New maximum replica count of the HorizontalPodAutoscaler.
    #[arg(long = "max", value_name = "N", value_parser = ReplicaBound::MAX, help_heading = "Changes")]
    pub max_replicas: Option<i32>,

    /// Endpoints file (paths and OAuth scopes) to expose through Ingresses; `-` reads stdin.
    #[arg(
        long,
        visible_alias = "endpoint-config",
        value_name = "FILE",
        help_heading = "Changes"
    )]
    pub endpoints: Option<PathBuf>,

    /// Allow an endpoints file with no endpoints (removes every public route of the app).
    #[arg(long, requires = "endpoints", help_heading = "Changes")]
    pub allow_empty_endpoints: bool,

    /// How the endpoints are published: Ingresses with nginx snippets, Ingresses with
    /// ingress-nginx's auth-url, or Gateway API HTTPRoutes (default: the style of the live
    /// routes, else nginx-snippet). A style other than the live one migrates the routes.
    #[arg(
        long,
        value_enum,
        value_name = "STYLE",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub routes: Option<RoutesChoice>,

    /// nginx-auth: URL of the auth service that checks the token of paths with scopes
    /// (http[s]://host[:port][/path]; default: the live Ingresses').
    // The brackets are the help text's own, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(
        long,
        value_name = "URL",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub auth_url: Option<String>,

    /// gateway: the Gateway the HTTPRoutes attach to (default: the live HTTPRoutes').
    #[arg(
        long,
        value_name = "[NAMESPACE/]NAME",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub gateway: Option<String>,

    /// gateway: the auth Service that checks the token of paths with scopes (default: the
    /// live HTTPRoutes').
    #[arg(
        long,
        value_name = "[NAMESPACE/]NAME:PORT",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub auth_service: Option<String>,

    /// gateway: how paths with scopes are checked: the ExternalAuth filter in each HTTPRoute
    /// (Gateway API experimental channel), or one Envoy Gateway SecurityPolicy per HTTPRoute
    /// (default: the live routes', else filter).
    #[arg(
        long,
        value_enum,
        value_name = "PROVIDER",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub auth_provider: Option<AuthProviderChoice>,

    /// IngressClass of the Ingresses (default: the live Ingresses', else the cluster's default
    /// class).
    #[arg(
        long,
        value_name = "NAME",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub ingress_class: Option<String>,

    /// Host the routes answer for (repeatable; default: the live routes', else any host).
    #[arg(
        long = "host",
        value_name = "HOST",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub hosts: Vec<String>,

    /// Secret with the TLS certificate of the hosts (Ingress styles; default: the live
    /// Ingresses' TLS).
    #[arg(
        long,
        value_name = "NAME",
        requires = "endpoints",
        help_heading = "Routes"
    )]
    pub tls_secret: Option<String>,

    /// After the writes, send a GET without a token for each path with scopes to this address
    /// of the gateway or ingress controller (http[s]://HOST[:PORT]), with each route's host,
    /// and require 401 or 403 (exit 9 otherwise).
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(
        long,
        value_name = "URL",
        requires = "endpoints",
        conflicts_with_all = ["dry_run", "plan_out"],
        help_heading = "Routes"
    )]
    pub verify_url: Option<String>,

    /// CA certificates (PEM) that the --verify-url https certificate must chain to (default:
    /// the system's trusted roots).
    #[arg(
        long,
        value_name = "FILE",
        requires = "verify_url",
        help_heading = "Routes"
    )]
    pub verify_url_ca: Option<PathBuf>,

    #[command(flatten)]
    pub image_check: ImageCheckArgs,

    /// Undo the newest recorded change: image, bounds and routes back to their values before it.
    #[arg(long, conflicts_with_all = ["image", "min_replicas", "max_replicas", "endpoints"],
          help_heading = "Undo")]
    pub undo: bool,

    /// Undo the change recorded as revision N instead of the newest (see `history`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..),
          conflicts_with_all = ["image", "min_replicas", "max_replicas", "endpoints"],
          help_heading = "Undo")]
    pub to_revision: Option<u64>,

    /// Over several clusters: undo this fleet run's record in each cluster (default: the newest
    /// fleet run recorded in any of them), the waves in reverse order.
    #[arg(
        long,
        value_name = "ID",
        requires = "undo",
        conflicts_with = "to_revision",
        help_heading = "Undo"
    )]
    pub fleet_run: Option<String>,

    /// Undo even though these values changed since the record (image, min, max, routes,
    /// auth-url, auth-service, gateway, ingress-class, hosts, tls-secret, auth-provider); must
    /// name exactly the values the refusal lists.
    #[arg(
        long,
        value_name = "FIELDS",
        value_delimiter = ',',
        requires = "undo_request",
        help_heading = "Undo"
    )]
    pub force_undo: Vec<String>,

    #[command(flatten)]
    pub history_key: HistoryKeyArgs,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub run: RunArgs,

    /// Show the plan and stop; nothing is sent to the cluster but reads.
    #[arg(long, help_heading = "Behaviour")]
    pub dry_run: bool,

    /// Save the plan to FILE instead of applying it (apply it later with `apply FILE`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["yes", "wait", "undo_on_failure"], help_heading = "Behaviour")]
    pub plan_out: Option<PathBuf>,

    /// Sign the saved plan with the key in KEYFILE (HMAC-SHA-256; default:
    /// $APPUPDATE_PLAN_KEY_FILE when set).
    #[arg(
        long,
        value_name = "KEYFILE",
        requires = "plan_out",
        help_heading = "Behaviour"
    )]
    pub sign_key: Option<PathBuf>,

    /// With --dry-run: exit 0 when there is nothing to change, 2 when there are changes.
    #[arg(long, requires = "dry_run", help_heading = "Behaviour")]
    pub detailed_exitcode: bool,

    #[command(flatten)]
    pub follow: FollowArgs,

    /// How long --wait (and --canary) follows a rollout and routes, e.g. 5m (0: no bound).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m",
          help_heading = "Behaviour")]
    pub timeout: Duration,
}

/// What happens after the writes, for an update (or undo) and `apply FILE` alike: `--wait` and
/// what ends it.
#[derive(Debug, Args)]
pub struct FollowArgs {
    /// After the writes, wait for the Deployment rollout (with --image) and for each route
    /// written to be taken up: an HTTPRoute accepted with its references resolved by every
    /// parent Gateway, an Ingress given an address. When the rollout does not complete, the
    /// error says why, from the new pods and their events.
    #[arg(long, help_heading = "After the writes")]
    pub wait: bool,

    /// When the run fails after writing (a rollout not completed, a route not taken up, a
    /// --verify-url path left open), put back what this run changed, from what it read
    /// before writing: exit 10 when the application is as it was, 11 when it could not be
    /// put back completely (listed). Implies --wait.
    #[arg(
        long,
        visible_alias = "rollback-on-failure",
        help_heading = "After the writes"
    )]
    pub undo_on_failure: bool,

    /// Stop waiting (exit 7) as soon as the rollout cannot succeed without someone acting: an
    /// image the registry says does not exist, an invalid image name, a container config
    /// error that persists, a crash loop, the progress deadline. --fail-fast=false waits
    /// until --timeout. (Per cluster; --stop-on-failure is about the other clusters of a
    /// fleet.)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set,
          help_heading = "After the writes")]
    pub fail_fast: bool,

    /// With --fail-fast: the restarts of a crash-looping container that end the wait.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..),
          help_heading = "After the writes")]
    pub crash_restarts: u32,
}

/// The flags an update (or undo) and `apply FILE` both take, declared once. `--timeout` is
/// not one of them: its help says what it bounds in each (`--wait` here, `--canary` there).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,

    /// Apply without asking for confirmation.
    #[arg(short = 'y', long, help_heading = "Behaviour")]
    pub yes: bool,

    /// Write fields that Helm, Argo CD, Flux, kapp or another server-side applier owns (by
    /// managedFields, labels and annotations); without it, --yes refuses such a change.
    #[arg(long, help_heading = "Behaviour")]
    pub force_conflicts: bool,

    /// Attempts per write when the server reports a conflict (re-read, re-check, retry).
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=100), help_heading = "Behaviour")]
    pub retries: u32,

    /// Records kept in the application's history (0: record nothing).
    #[arg(long, value_name = "N", default_value_t = appupdate_plan::history::DEFAULT_MAX,
          value_parser = clap::value_parser!(u32).range(0..=100), help_heading = "Behaviour")]
    pub history_max: u32,

    /// Output format of the plan.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Diff, help_heading = "Output")]
    pub output: OutputFormat,

    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = "Output")]
    pub color: ColorChoice,

    /// More detail on stderr (requests and retries); never prints credentials.
    #[arg(short = 'v', long, action = clap::ArgAction::Count, help_heading = "Output")]
    pub verbose: u8,
}

/// Which cluster, namespace and user: the same flags for every command, before or after it.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Namespace of the application (default: the context's namespace, else "default").
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        help_heading = "Cluster",
        global = true
    )]
    pub namespace: Option<String>,

    /// Kubeconfig context to use (default: the current context); repeat it to update several
    /// clusters in one run.
    #[arg(long, value_name = "CONTEXT", help_heading = "Cluster", global = true,
          action = clap::ArgAction::Append)]
    pub context: Vec<String>,

    /// Kubeconfig contexts to update in one run, comma-separated (a fleet).
    #[arg(
        long,
        value_name = "CONTEXT,…",
        value_delimiter = ',',
        help_heading = "Cluster",
        global = true
    )]
    pub contexts: Vec<String>,

    /// Every kubeconfig context whose whole name matches this regular expression (a fleet),
    /// e.g. 'prod-.*'.
    #[arg(long, value_name = "REGEX", help_heading = "Cluster", global = true)]
    pub context_selector: Option<String>,

    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "PATH", help_heading = "Cluster", global = true)]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig cluster to use instead of the context's.
    #[arg(long, value_name = "CLUSTER", help_heading = "Cluster", global = true)]
    pub cluster: Option<String>,

    /// Kubeconfig user to use instead of the context's.
    #[arg(long, value_name = "USER", help_heading = "Cluster", global = true)]
    pub user: Option<String>,

    /// User to impersonate for the operation.
    #[arg(
        long = "as",
        value_name = "USER",
        help_heading = "Cluster",
        global = true
    )]
    pub as_user: Option<String>,

    /// Group to impersonate (repeatable; needs --as, as in kubectl).
    #[arg(
        long = "as-group",
        value_name = "GROUP",
        requires = "as_user",
        help_heading = "Cluster",
        global = true
    )]
    pub as_group: Vec<String>,

    /// Bound on each request to the cluster, e.g. 10s or 1m (0: no bound, kubectl's default).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Cluster", global = true)]
    pub request_timeout: Option<Duration>,
}

/// How a run over several contexts (a fleet) goes: the order of the clusters and what stops
/// it. Each needs several contexts (or a plan file that holds several clusters).
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Clusters written at the same time (default: all at once, as they are read and
    /// dry-run).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000),
          help_heading = "Fleet")]
    pub parallel: Option<u32>,

    /// Clusters connected to at once (default: 512, or --parallel when larger, within what the
    /// open-files limit allows: ulimit -n less 32); a fleet of more is read, dry-run, written
    /// and followed in batches, each cluster reconnected at each stage.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          help_heading = "Fleet")]
    pub max_connections: Option<u32>,

    /// Apply to this context first and follow its rollout; the others only once it rolled out
    /// (repeatable).
    #[arg(long, value_name = "CONTEXT", action = clap::ArgAction::Append, help_heading = "Fleet")]
    pub canary: Vec<String>,

    /// The clusters in waves, in order (repeatable): comma-separated contexts, or re:REGEX over
    /// whole context names. A wave starts once every cluster of the one before applied (and,
    /// with --wait, rolled out).
    #[arg(long, value_name = "CONTEXTS", action = clap::ArgAction::Append, help_heading = "Fleet")]
    pub wave: Vec<String>,

    /// After each wave but the last, wait this long (e.g. 10m), then read its clusters again:
    /// a Deployment no longer available at the new image stops the run like a failure.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "wave",
          help_heading = "Fleet")]
    pub bake: Option<Duration>,

    /// Failed clusters a wave may have and the next wave still start (default: 0).
    #[arg(long, value_name = "N", requires = "wave", help_heading = "Fleet")]
    pub max_failed: Option<u32>,

    /// Start no new cluster once one failed (default: true; --stop-on-failure=false goes on).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::value_parser!(bool),
          help_heading = "Fleet")]
    pub stop_on_failure: Option<bool>,

    /// Leave out a cluster that cannot be reached, refuses access or lacks the application,
    /// instead of stopping the run (the exit code is then 8).
    #[arg(long, help_heading = "Fleet")]
    pub skip_unreachable: bool,
}

/// The image check: what `--image` names, resolved in its registry before anything is written
/// (docs/images.md).
#[derive(Debug, Args)]
pub struct ImageCheckArgs {
    /// Check the new image in its registry before writing: its tag exists and it has the
    /// platforms of the nodes the pods can land on. auto: a registry that cannot tell or
    /// cannot be reached is a warning; require: a refusal (exit 3); off: no check (default:
    /// $APPUPDATE_IMAGE_CHECK, else auto).
    #[arg(long, value_enum, value_name = "MODE", help_heading = "Image")]
    pub image_check: Option<ImageCheckChoice>,

    /// Speak plain HTTP to this registry (HOST or HOST:PORT, as in the image name); loopback
    /// registries always are. Repeatable.
    #[arg(long, value_name = "HOST", help_heading = "Image")]
    pub insecure_registry: Vec<String>,

    /// Write the image as name:tag@sha256:DIGEST, the digest the registry gave for the tag
    /// (needs the image check).
    #[arg(long, requires = "image", help_heading = "Image")]
    pub pin_digest: bool,

    /// Require a cosign signature of the image by this public key (cosign.pub: PEM, ECDSA
    /// P-256 or P-384) over the digest that is written, in either of cosign's layouts (the
    /// sha256-….sig tag, or v3's Sigstore bundle among the image's referrers); else nothing is
    /// written (exit 3), even under --image-check auto. No transparency log is checked (none
    /// can be offline): this is what cosign verify --key KEYFILE --insecure-ignore-tlog
    /// checks.
    #[arg(
        long,
        value_name = "KEYFILE",
        requires = "image",
        help_heading = "Image"
    )]
    pub image_key: Option<PathBuf>,
}

/// `apply FILE`'s image check: an unpinned plan's tag must still name the digest it named when
/// the plan was made.
#[derive(Debug, Args)]
pub struct ApplyImageArgs {
    /// Check that the tag of an unpinned plan's image still names the digest the plan recorded
    /// (auto: a registry that cannot tell is a warning; require: a refusal; off: no check;
    /// default: $APPUPDATE_IMAGE_CHECK, else auto).
    #[arg(long, value_enum, value_name = "MODE", help_heading = "Image")]
    pub image_check: Option<ImageCheckChoice>,

    /// Speak plain HTTP to this registry (HOST or HOST:PORT). Repeatable.
    #[arg(long, value_name = "HOST", help_heading = "Image")]
    pub insecure_registry: Vec<String>,

    /// Require a cosign signature by this public key (PEM) over the digest the plan writes,
    /// checked again now: the recorded digest of a pinned plan, the tag's of an unpinned one.
    /// No transparency log is checked (what cosign verify --insecure-ignore-tlog checks).
    #[arg(long, value_name = "KEYFILE", help_heading = "Image")]
    pub image_key: Option<PathBuf>,
}

/// `--image-check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImageCheckChoice {
    Auto,
    Require,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A coloured diff for people.
    Diff,
    /// The plan as JSON (schema in the README).
    Json,
    /// The plan as YAML (same schema as JSON).
    Yaml,
}

/// `--routes`: the route styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RoutesChoice {
    /// Ingresses with ingress-nginx's configuration-snippet (the original format).
    NginxSnippet,
    /// Ingresses for ingress-nginx without snippets: auth-url and rewrite-target.
    NginxAuth,
    /// Gateway API HTTPRoutes, scopes checked by the ExternalAuth filter or (--auth-provider
    /// envoy-gateway) by Envoy Gateway SecurityPolicies.
    Gateway,
}

/// `--auth-provider`: how the `gateway` style enforces scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuthProviderChoice {
    /// The Gateway API ExternalAuth filter in each scoped HTTPRoute (experimental channel).
    Filter,
    /// One Envoy Gateway SecurityPolicy (extAuth, failOpen false) per scoped HTTPRoute.
    EnvoyGateway,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl Cli {
    pub fn try_parse_args<I, T>(args: I) -> Result<Cli, CliError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        parse(args.into_iter().map(Into::into).collect())
    }
}

/// Why the command line was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// clap's own answer: `--help`, `--version`, or a message with usage (an unknown flag, a
    /// bad value, a missing name).
    #[error("{0}")]
    Clap(#[source] clap::Error),
    /// A flag rule was broken: one line that says which and what to do.
    #[error("{0}")]
    Rule(&'static str),
    /// `--min`/`--max` out of range.
    #[error("{0}")]
    Value(String),
}

impl CliError {
    /// `--help` or `--version`: the output is what was asked for.
    pub fn is_informational(&self) -> bool {
        matches!(self, CliError::Clap(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion))
    }
}

/// A flag needs another (`requires` on the flag), and what to tell the user when it is
/// missing. A `requires` without an entry here gets clap's message.
const NEEDS: &[(&str, &str, &str)] = &[
    (
        "container",
        "image",
        "--container only selects the container for --image; add --image",
    ),
    (
        "image_key",
        "image",
        "--image-key requires a signature of the image --image writes; add --image",
    ),
    (
        "allow_empty_endpoints",
        "endpoints",
        "--allow-empty-endpoints only applies with --endpoints FILE",
    ),
    (
        "routes",
        "endpoints",
        "--routes only applies with --endpoints FILE",
    ),
    (
        "auth_url",
        "endpoints",
        "--auth-url only applies with --endpoints FILE",
    ),
    (
        "gateway",
        "endpoints",
        "--gateway only applies with --endpoints FILE",
    ),
    (
        "auth_service",
        "endpoints",
        "--auth-service only applies with --endpoints FILE",
    ),
    (
        "auth_provider",
        "endpoints",
        "--auth-provider only applies with --endpoints FILE",
    ),
    (
        "ingress_class",
        "endpoints",
        "--ingress-class only applies with --endpoints FILE",
    ),
    (
        "hosts",
        "endpoints",
        "--host only applies with --endpoints FILE",
    ),
    (
        "tls_secret",
        "endpoints",
        "--tls-secret only applies with --endpoints FILE",
    ),
    (
        "verify_url",
        "endpoints",
        "--verify-url checks the routes of --endpoints FILE; add --endpoints",
    ),
    (
        "verify_url_ca",
        "verify_url",
        "--verify-url-ca only applies with --verify-url URL",
    ),
    (
        "detailed_exitcode",
        "dry_run",
        "--detailed-exitcode only applies with --dry-run",
    ),
    (
        "as_group",
        "as_user",
        "--as-group impersonates groups of a user: add --as USER (the API server refuses groups without a user)",
    ),
    (
        "force_undo",
        "undo",
        "--force-undo only applies with --undo or --to-revision",
    ),
    (
        "sign_key",
        "plan_out",
        "--sign-key only applies with --plan-out FILE (it signs the saved plan)",
    ),
];

/// A flag of one command given to another, where clap only knows it as unexpected, and what to
/// tell the user instead.
const ELSEWHERE: &[(&str, &str)] = &[
    (
        "--verify-key",
        "--verify-key only applies to apply FILE: kubectl appupdate apply FILE --verify-key KEYFILE",
    ),
    (
        "--sign-key",
        "--sign-key only applies with --plan-out FILE; apply FILE checks a signature with --verify-key KEYFILE",
    ),
];

/// The `changes` group's message.
const NOTHING_TO_CHANGE: &str =
    "nothing to change: give at least one of --image, --min, --max or --endpoints (or --undo)";

/// Parses the command line. clap checks every rule; this only chooses the message.
pub fn parse(args: Vec<OsString>) -> Result<Cli, CliError> {
    let err = match <Cli as Parser>::try_parse_from(&args) {
        Ok(cli) if cli.command.is_some() => return with_command_only(cli, &args),
        Ok(cli) => return Ok(cli),
        Err(err) => err,
    };
    if let Some(ContextValue::String(message)) = err.get(ContextKind::Custom) {
        return Err(CliError::Value(message.clone()));
    }
    if err.kind() == ErrorKind::UnknownArgument
        && let Some(ContextValue::String(given)) = err.get(ContextKind::InvalidArg)
        && let Some((_, message)) = ELSEWHERE.iter().find(|(flag, _)| {
            given
                .strip_prefix(flag)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
    {
        return Err(CliError::Rule(message));
    }
    if err.kind() != ErrorKind::MissingRequiredArgument {
        return Err(CliError::Clap(err));
    }
    // Which rule: parse again without the checks and look at what was given.
    let Ok(given) = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(&args)
    else {
        return Err(CliError::Clap(err));
    };
    let on_command_line = |id: &str| given.value_source(id) == Some(ValueSource::CommandLine);
    if let Some((_, _, message)) = NEEDS
        .iter()
        .find(|(flag, needs, _)| on_command_line(flag) && !on_command_line(needs))
    {
        return Err(CliError::Rule(message));
    }
    let any_change = [
        "image",
        "min_replicas",
        "max_replicas",
        "endpoints",
        "undo",
        "to_revision",
    ]
    .iter()
    .any(|id| on_command_line(id));
    if on_command_line("name") && !any_change {
        return Err(CliError::Rule(NOTHING_TO_CHANGE));
    }
    Err(CliError::Clap(err))
}

/// A command (`apply`, `history`, `completion`) takes the cluster flags and its own: an update
/// flag given before it is refused.
fn with_command_only(cli: Cli, args: &[OsString]) -> Result<Cli, CliError> {
    let command = Cli::command();
    let Ok(given) = command.clone().try_get_matches_from(args) else {
        return Ok(cli);
    };
    let stray = command.get_arguments().find(|a| {
        !a.is_global_set()
            && given.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine)
    });
    match stray {
        Some(arg) => Err(CliError::Value(format!(
            "{} belongs to an update, not to the {} command; give it without the command, or drop it",
            arg.get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| arg.get_id().to_string().to_uppercase()),
            given.subcommand_name().unwrap_or_default()
        ))),
        None => Ok(cli),
    }
}

/// `--min`/`--max`: an `i32` of at least 1, with a message that names the flag and the value.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaBound {
    flag: &'static str,
    what: &'static str,
}

impl ReplicaBound {
    const MIN: ReplicaBound = ReplicaBound {
        flag: "--min",
        what: "minimum",
    };
    const MAX: ReplicaBound = ReplicaBound {
        flag: "--max",
        what: "maximum",
    };
}

impl TypedValueParser for ReplicaBound {
    type Value = i32;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<i32, clap::Error> {
        let n = clap::value_parser!(i32).parse_ref(cmd, arg, value)?;
        if n >= 1 {
            return Ok(n);
        }
        let mut err = clap::Error::new(ErrorKind::ValueValidation).with_cmd(cmd);
        err.insert(
            ContextKind::Custom,
            ContextValue::String(format!(
                "{} {n}: the {} replica count must be at least 1",
                self.flag, self.what
            )),
        );
        Err(err)
    }
}

/// `apply --checksum`: `sha256:` and 64 hex digits (lowercased), as `--plan-out` prints it.
pub fn parse_checksum(text: &str) -> Result<String, String> {
    match text.strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(format!("sha256:{}", hex.to_ascii_lowercase()))
        }
        _ => Err(
            "give the checksum --plan-out printed, sha256: and 64 hex digits (not sha256sum of the file)"
                .into(),
        ),
    }
}

/// Parses kubectl-style durations: a bare integer is seconds; otherwise a Go duration such as
/// `1h30m`, `90s`, `500ms`, `1.5s`. `0` means no bound.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty duration; use e.g. 30s, 2m or 1h".into());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_end);
        let value: f64 = num.parse().map_err(|_| {
            format!(
                "invalid duration {:?}; use e.g. 30s, 2m or 1h",
                Untrusted(text)
            )
        })?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "invalid duration {:?}: unknown unit {:?}; use ms, s, m or h",
                    Untrusted(text),
                    Untrusted(unit)
                ));
            }
        };
        total += value * scale;
        rest = next;
    }
    if !total.is_finite() || total > 1e9 {
        return Err(format!("duration {:?} is too long", Untrusted(text)));
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn usage_says_kubectl_appupdate() {
        use clap::CommandFactory;
        let help = Cli::command().render_usage().to_string();
        assert!(help.contains("kubectl appupdate"), "{help}");
    }

    #[test]
    fn endpoint_config_is_an_alias() {
        let cli = Cli::try_parse_args(["kubectl-appupdate", "web", "--endpoint-config", "e.yaml"])
            .unwrap();
        assert_eq!(cli.update.endpoints, Some(PathBuf::from("e.yaml")));
    }

    #[test]
    fn completion_is_a_subcommand_and_name_is_required_otherwise() {
        let cli = Cli::try_parse_args(["kubectl-appupdate", "completion", "bash"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Completion { .. })));
        assert!(Cli::try_parse_args(["kubectl-appupdate", "--image", "x"]).is_err());
    }

    fn refusal(args: &[&str]) -> String {
        let mut argv = vec!["kubectl-appupdate"];
        argv.extend_from_slice(args);
        Cli::try_parse_args(argv).unwrap_err().to_string()
    }

    #[test]
    fn at_least_one_change_is_required() {
        assert_eq!(
            refusal(&["web"]),
            "nothing to change: give at least one of --image, --min, --max or --endpoints (or --undo)"
        );
    }

    #[test]
    fn bounds_are_at_least_one() {
        assert_eq!(
            refusal(&["web", "--min", "0"]),
            "--min 0: the minimum replica count must be at least 1"
        );
        assert_eq!(
            refusal(&["web", "--max=-2"]),
            "--max -2: the maximum replica count must be at least 1"
        );
        // Not a number: clap's own message.
        assert!(
            refusal(&["web", "--max", "x"]).starts_with("error: invalid value 'x' for '--max <N>'")
        );
    }

    #[test]
    fn a_flag_that_needs_another_says_so() {
        for (args, message) in [
            (
                &["web", "--max", "3", "--detailed-exitcode"][..],
                "--detailed-exitcode only applies with --dry-run",
            ),
            (
                &["web", "--max", "3", "--container", "app"][..],
                "--container only selects the container for --image; add --image",
            ),
            (
                &["web", "--max", "3", "--allow-empty-endpoints"][..],
                "--allow-empty-endpoints only applies with --endpoints FILE",
            ),
        ] {
            assert_eq!(refusal(args), message, "{args:?}");
        }
        assert!(
            Cli::try_parse_args([
                "kubectl-appupdate",
                "web",
                "--image",
                "x",
                "--wait",
                "--container",
                "a"
            ])
            .is_ok()
        );
    }

    #[test]
    fn every_needs_entry_is_a_requires_clap_enforces() {
        for (flag, needs, _) in NEEDS {
            let arg = Cli::command()
                .get_arguments()
                .find(|a| a.get_id() == flag)
                .map(|a| a.get_long().unwrap_or_default().to_owned())
                .unwrap();
            let value: &[&str] = match arg.as_str() {
                "container" | "force-undo" | "auth-url" | "gateway" | "auth-service"
                | "ingress-class" | "host" | "tls-secret" | "as-group" | "sign-key"
                | "verify-url" | "verify-url-ca" | "image-key" => &["x"],
                "routes" => &["gateway"],
                "auth-provider" => &["filter"],
                _ => &[],
            };
            let mut argv = vec!["kubectl-appupdate", "web", "--max", "3"];
            let long = format!("--{arg}");
            argv.push(&long);
            argv.extend_from_slice(value);
            let err = <Cli as Parser>::try_parse_from(&argv).unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::MissingRequiredArgument,
                "{flag} needs {needs}"
            );
        }
    }

    #[test]
    fn plan_keys_belong_to_saving_and_to_apply() {
        assert_eq!(
            refusal(&["web", "--max", "3", "--sign-key", "k"]),
            "--sign-key only applies with --plan-out FILE (it signs the saved plan)"
        );
        for args in [
            &["web", "--max", "3", "--verify-key", "k"][..],
            &["web", "--max", "3", "--plan-out", "p", "--verify-key=k"][..],
        ] {
            assert_eq!(
                refusal(args),
                "--verify-key only applies to apply FILE: kubectl appupdate apply FILE --verify-key KEYFILE",
                "{args:?}"
            );
        }
        assert_eq!(
            refusal(&["apply", "p.json", "--sign-key", "k"]),
            "--sign-key only applies with --plan-out FILE; apply FILE checks a signature with --verify-key KEYFILE"
        );
        let cli = Cli::try_parse_args([
            "kubectl-appupdate",
            "web",
            "--max",
            "3",
            "--plan-out",
            "p.json",
            "--sign-key",
            "k",
        ])
        .unwrap();
        assert_eq!(cli.update.sign_key, Some(PathBuf::from("k")));
        let cli =
            Cli::try_parse_args(["kubectl-appupdate", "apply", "p.json", "--verify-key", "k"])
                .unwrap();
        let Some(Command::Apply(apply)) = cli.command else {
            panic!("apply")
        };
        assert_eq!(apply.verify_key, Some(PathBuf::from("k")));
        // Other unexpected flags keep clap's message.
        assert!(matches!(
            Cli::try_parse_args([
                "kubectl-appupdate",
                "web",
                "--max",
                "3",
                "--verify-keys",
                "k"
            ]),
            Err(CliError::Clap(_))
        ));
    }

    #[test]
    fn verify_url_needs_endpoints_and_a_write() {
        assert_eq!(
            refusal(&["web", "--max", "3", "--verify-url", "http://gw"]),
            "--verify-url checks the routes of --endpoints FILE; add --endpoints"
        );
        assert_eq!(
            refusal(&["web", "--endpoints", "e", "--verify-url-ca", "ca.pem"]),
            "--verify-url-ca only applies with --verify-url URL"
        );
        for other in ["--dry-run", "--plan-out=p.json"] {
            let err = refusal(&[
                "web",
                "--endpoints",
                "e",
                "--verify-url",
                "http://gw",
                other,
            ]);
            assert!(err.contains("cannot be used with"), "{other}: {err}");
        }
    }

    #[test]
    fn without_a_name_the_message_is_clap_s() {
        let err = Cli::try_parse_args(["kubectl-appupdate", "--max", "3"]).unwrap_err();
        assert!(matches!(err, CliError::Clap(_)), "{err}");
        assert!(err.to_string().contains("<NAME>"), "{err}");
    }
}
