//! The open-files limit (`ulimit -n`): raised at start, and how many clusters it lets a run
//! have a connection open to at once.
//!
//! Every connection to a cluster is a descriptor. A terminal on macOS starts with a soft limit
//! of 256, Linux's default is 1 024: a fleet run that kept one connection per cluster open
//! from its reads to its end failed with "Too many open files" at about 250 clusters on a Mac.
//! Two things make any fleet fit:
//!
//! * **Raised at start** ([`raise`]), as Go programs — kubectl among them — have done since Go
//!   1.19: on Unix the soft limit goes to the hard limit. On macOS the hard limit is usually
//!   "unlimited" while the kernel refuses a soft limit above `kern.maxfilesperproc`; Go reads
//!   that sysctl and caps at it. rustix has no sysctl and this crate forbids `unsafe`, so here
//!   the hard limit is tried first (the kernel takes it when it is at most
//!   `kern.maxfilesperproc`, as after `ulimit -Hn 4096`), then `OPEN_MAX` (10 240), which
//!   Apple's setrlimit(2) names for this case and which a default system's
//!   `kern.maxfilesperproc` allows. When neither is taken the limit stays as it was. Nothing is
//!   said either way: the bound below works from whatever limit there is.
//! * **Bounded connections** ([`connection_bound`]): a fleet run has at most as many clusters
//!   connected at once as the soft limit leaves once [`RESERVED`] descriptors are set aside for
//!   everything else, and by default at most [`DEFAULT_MOST`]; `--max-connections N` sets it
//!   (within what the limit leaves). A run over more clusters than the bound goes through them
//!   in batches at every stage (reads and planning, the dry run, the writes and their
//!   `--wait`), closing each cluster's connection when its part of the stage is done and
//!   opening a new one at the next (`appupdate_kube::connections`).
//!
//! **What child processes inherit.** The processes the plugin starts — an exec credential
//! plugin of a kubeconfig user (started by kube), a docker credential helper (started by the
//! image check) — inherit the raised soft limit. Go's `os/exec` puts the original soft limit
//! back in its children between fork and exec; that needs a `pre_exec` hook, which is
//! `unsafe`, and kube starts the exec plugins itself, so the plugin does not. What it can
//! change for a child: a program that keeps more than 1 024 files open at once and waits on
//! them with select(2) — credential plugins and helpers open a handful.

/// Descriptors kept for everything but the clusters' connections: standard input, output and
/// error; the runtime's own (its event queue and waker), the signal handler's pipe; the
/// kubeconfig, plan, key and endpoints files while they are read; the terminal for the
/// question; the image check's connections to registries; a credential plugin's or helper's
/// pipes while it runs. A fleet run measured 11 of them open besides its connections.
pub const RESERVED: u64 = 32;

/// The bound when `--max-connections` is not given and the open files allow more (a limit of
/// 1 024 allows 992). An open connection holds ~60 KB of TLS and HTTP/2 buffers and a cluster
/// at work the state of its requests: 2 000 clusters at once peaked at 192 MiB for a dry run
/// and 295 MiB for an apply, in batches of 512 at 84 and 121 MiB (docs/performance.md, item
/// 18). A fleet of up to 512 clusters keeps one connection per cluster for the whole run.
pub const DEFAULT_MOST: usize = 512;

/// `OPEN_MAX` of macOS's `<sys/syslimits.h>`: what setrlimit(2) says to set the soft limit to
/// when the hard limit is unlimited.
#[cfg(target_os = "macos")]
const OPEN_MAX: u64 = 10_240;

/// The limit of open files as it is: the soft limit (`None`: unlimited) and the hard one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFiles {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// The limit now (`None` where the platform has none of this kind).
pub fn current() -> Option<OpenFiles> {
    #[cfg(unix)]
    {
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        Some(OpenFiles {
            soft: now.current,
            hard: now.maximum,
        })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The soft limits to try at start, in order, for a process whose limit is `now`: the hard
/// limit, and on macOS (`macos`) `OPEN_MAX` too (or only, when the hard limit is unlimited);
/// none that would lower the soft limit.
pub fn targets(now: OpenFiles, macos: bool, open_max: u64) -> Vec<u64> {
    let Some(soft) = now.soft else {
        return Vec::new();
    };
    let mut targets = Vec::new();
    if let Some(hard) = now.hard {
        targets.push(hard);
    }
    if macos {
        targets.push(now.hard.map_or(open_max, |hard| hard.min(open_max)));
    }
    targets.dedup();
    targets.retain(|&t| t > soft);
    targets
}

/// Raises the soft limit of open files toward the hard limit (see the module's documentation);
/// the first of [`targets`] the system takes. Called once, at start.
pub fn raise() {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, setrlimit};
        let Some(now) = current() else {
            return;
        };
        #[cfg(target_os = "macos")]
        let (macos, open_max) = (true, OPEN_MAX);
        #[cfg(not(target_os = "macos"))]
        let (macos, open_max) = (false, 0);
        for soft in targets(now, macos, open_max) {
            let raised = Rlimit {
                current: Some(soft),
                maximum: now.hard,
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                return;
            }
        }
    }
}

/// How many clusters a fleet run may have a connection open to at once, with the soft limit
/// `soft` (`None`: unlimited), `--max-connections` (`asked`) and `--parallel` (`parallel`,
/// clusters written at once, each with its connection open: it raises the default bound);
/// or the one line that says which limit is too small and how to raise it.
pub fn connection_bound(
    soft: Option<u64>,
    asked: Option<usize>,
    parallel: Option<usize>,
) -> Result<usize, String> {
    let available = match soft {
        None => usize::MAX,
        Some(soft) => usize::try_from(soft.saturating_sub(RESERVED)).unwrap_or(usize::MAX),
    };
    let limit = |soft: u64| {
        format!(
            "the open-files limit is {soft} (ulimit -n) and this tool keeps {RESERVED} of them for its own files, so at most {} connections can be open at once",
            soft.saturating_sub(RESERVED)
        )
    };
    if available == 0 {
        let soft = soft.unwrap_or_default();
        return Err(format!(
            "too few open files allowed to connect to a cluster: {}; raise the limit, e.g. ulimit -n 1024 (its hard limit, ulimit -Hn, may need raising first)",
            limit(soft)
        ));
    }
    let bound = match asked {
        Some(n) if n > available => {
            return Err(format!(
                "--max-connections {n} is more than the open files allow: {}; lower --max-connections, or raise the limit (ulimit -n {})",
                limit(soft.unwrap_or_default()),
                (n as u64).saturating_add(RESERVED)
            ));
        }
        Some(n) => n.max(1),
        None => available
            .min(DEFAULT_MOST)
            .max(parallel.unwrap_or(0))
            .min(available),
    };
    if let Some(p) = parallel.filter(|&p| p > bound) {
        let why = match asked {
            Some(n) => format!("--max-connections is {n}"),
            None => limit(soft.unwrap_or_default()),
        };
        let raise = match asked {
            Some(_) => "raise --max-connections".to_owned(),
            None => format!(
                "raise the limit (ulimit -n {})",
                (p as u64).saturating_add(RESERVED)
            ),
        };
        return Err(format!(
            "--parallel {p} writes {p} clusters at once, one connection each, but {why}; lower --parallel to {bound}, or {raise}"
        ));
    }
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(soft: Option<u64>, hard: Option<u64>) -> OpenFiles {
        OpenFiles { soft, hard }
    }

    #[test]
    fn the_soft_limit_goes_to_the_hard_one_and_on_macos_to_open_max_at_most() {
        // Linux: to the hard limit; never down; an unlimited soft limit stays.
        assert_eq!(
            targets(files(Some(1024), Some(524_288)), false, 0),
            [524_288]
        );
        assert!(targets(files(Some(64), Some(64)), false, 0).is_empty());
        assert!(targets(files(None, None), false, 0).is_empty());
        assert!(targets(files(Some(256), None), false, 0).is_empty());
        // macOS: an unlimited hard limit gives OPEN_MAX; a finite one is tried first, then
        // OPEN_MAX when it is lower.
        assert_eq!(targets(files(Some(256), None), true, 10_240), [10_240]);
        assert_eq!(
            targets(files(Some(256), Some(100_000)), true, 10_240),
            [100_000, 10_240]
        );
        assert_eq!(targets(files(Some(256), Some(4096)), true, 10_240), [4096]);
        assert!(targets(files(Some(20_000), None), true, 10_240).is_empty());
    }

    #[test]
    fn the_bound_is_what_the_limit_leaves_after_the_reserve() {
        assert_eq!(connection_bound(Some(256), None, None), Ok(224));
        assert_eq!(connection_bound(Some(64), None, None), Ok(32));
        assert_eq!(connection_bound(Some(33), None, None), Ok(1));
        // By default at most DEFAULT_MOST, unless --parallel writes more at once.
        assert_eq!(connection_bound(Some(1024), None, None), Ok(DEFAULT_MOST));
        assert_eq!(connection_bound(None, None, None), Ok(DEFAULT_MOST));
        assert_eq!(
            connection_bound(Some(1024), None, Some(8)),
            Ok(DEFAULT_MOST)
        );
        assert_eq!(connection_bound(Some(1024), None, Some(700)), Ok(700));
        assert_eq!(connection_bound(Some(600), None, Some(550)), Ok(550));
        // --max-connections sets it, within what the limit leaves.
        assert_eq!(connection_bound(Some(256), Some(100), Some(100)), Ok(100));
        assert_eq!(connection_bound(None, Some(5), None), Ok(5));
        assert_eq!(connection_bound(Some(4096), Some(2000), None), Ok(2000));
    }

    #[test]
    fn a_limit_too_small_is_one_line_that_says_which_and_how_to_raise_it() {
        let too_low = connection_bound(Some(32), None, None).unwrap_err();
        assert_eq!(
            too_low,
            "too few open files allowed to connect to a cluster: the open-files limit is 32 (ulimit -n) and this tool keeps 32 of them for its own files, so at most 0 connections can be open at once; raise the limit, e.g. ulimit -n 1024 (its hard limit, ulimit -Hn, may need raising first)"
        );
        let asked = connection_bound(Some(256), Some(300), None).unwrap_err();
        assert_eq!(
            asked,
            "--max-connections 300 is more than the open files allow: the open-files limit is 256 (ulimit -n) and this tool keeps 32 of them for its own files, so at most 224 connections can be open at once; lower --max-connections, or raise the limit (ulimit -n 332)"
        );
        let parallel = connection_bound(Some(256), None, Some(300)).unwrap_err();
        assert_eq!(
            parallel,
            "--parallel 300 writes 300 clusters at once, one connection each, but the open-files limit is 256 (ulimit -n) and this tool keeps 32 of them for its own files, so at most 224 connections can be open at once; lower --parallel to 224, or raise the limit (ulimit -n 332)"
        );
        let both = connection_bound(Some(4096), Some(10), Some(20)).unwrap_err();
        assert_eq!(
            both,
            "--parallel 20 writes 20 clusters at once, one connection each, but --max-connections is 10; lower --parallel to 10, or raise --max-connections"
        );
        for line in [too_low, asked, parallel, both] {
            assert!(!line.contains('\n'));
        }
    }

    #[cfg(unix)]
    #[test]
    fn raising_leaves_the_soft_limit_at_least_where_it_was() {
        let before = current().and_then(|l| l.soft);
        raise();
        let after = current().and_then(|l| l.soft);
        assert!(after.is_none() || after >= before);
    }
}
