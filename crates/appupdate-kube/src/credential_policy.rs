//! kubectl's credential plugin policy, read from its preferences file (kuberc) once per run and
//! checked before any client is built: an exec plugin the policy does not allow is never
//! started. The policy itself (parsing, matching) is [`appupdate_model::kuberc`]; this reads
//! the file and looks commands up on `PATH` as Go's `exec.LookPath` does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use appupdate_model::kuberc::{self, Denied, KubercError, Policy};

use crate::files;
use crate::selection::{CredentialPolicySource, KubercSource};

/// The policy a run obeys, with the file it came from for messages.
#[derive(Clone, Debug)]
pub struct CredentialPolicy {
    /// The kuberc file, `None` when there is none (or it is turned off).
    pub file: Option<PathBuf>,
    /// The policy, or why the file cannot be used (it then allows no plugin).
    pub policy: Result<Policy, Unusable>,
    path: Option<OsString>,
}

/// Why a kuberc cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unusable {
    Unreadable(String),
    Invalid(KubercError),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Unreadable(why) => write!(f, "it cannot be read: {why}"),
            Unusable::Invalid(why) => write!(f, "{why}"),
        }
    }
}

/// Why a plugin is not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Denied(Denied),
    Unusable(Unusable),
}

impl Refusal {
    /// The end of the refusal's message.
    pub fn what_to_do(&self) -> &'static str {
        match self {
            Refusal::Denied(_) => "allow it in the kuberc, or use another --context or --user",
            Refusal::Unusable(_) => "fix the kuberc",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Denied(d) => write!(f, "{d}"),
            Refusal::Unusable(u) => write!(
                f,
                "the file cannot be used ({u}), and a kuberc that cannot be used allows no credential plugin"
            ),
        }
    }
}

impl CredentialPolicy {
    /// Reads the kuberc `source` names. A missing `~/.kube/kuberc` is no policy; a missing
    /// `KUBERC` file, an unreadable or a malformed one allows no plugin.
    pub fn load(source: &CredentialPolicySource) -> CredentialPolicy {
        let (file, explicit) = match &source.kuberc {
            KubercSource::Off | KubercSource::Nowhere => (None, false),
            KubercSource::Env(p) => (Some(p.clone()), true),
            KubercSource::Home(p) => (Some(p.clone()), false),
        };
        let policy = match &file {
            None => Ok(Policy::AllowAll),
            Some(p) => read(p, explicit),
        };
        CredentialPolicy {
            file: if matches!(policy, Ok(Policy::AllowAll)) && !explicit {
                file.filter(|p| p.exists())
            } else {
                file
            },
            policy,
            path: source.path.clone(),
        }
    }

    /// Whether the exec plugin `command` may run.
    pub fn check(&self, command: &str) -> Result<(), Refusal> {
        match &self.policy {
            Ok(policy) => kuberc::allows(policy, command, |name| {
                look_path(name, self.path.as_deref())
            })
            .map_err(Refusal::Denied),
            Err(why) => Err(Refusal::Unusable(why.clone())),
        }
    }
}

fn read(path: &Path, explicit: bool) -> Result<Policy, Unusable> {
    match files::read_text(path, files::FileKind::Kuberc) {
        Ok(text) => kuberc::parse(&text).map_err(Unusable::Invalid),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok(Policy::AllowAll),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Unusable::Unreadable("no such file".into()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(Unusable::Unreadable("permission denied".into()))
        }
        Err(e) => Err(Unusable::Unreadable(e.to_string())),
    }
}

/// Go's `exec.LookPath`: a name with a path separator is the file itself, a basename is the
/// first executable file of that name in a `PATH` directory; a relative directory's match is
/// refused (Go's `ErrDot`). The path is returned as found, not made canonical.
pub fn look_path(name: &str, path: Option<&std::ffi::OsStr>) -> Option<String> {
    let has_separator = name.contains('/') || name.contains(std::path::MAIN_SEPARATOR);
    if has_separator {
        return executable(Path::new(name)).then(|| name.to_owned());
    }
    let path = path?;
    for dir in std::env::split_paths(path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        for candidate in candidates(&dir.join(name)) {
            if executable(&candidate) {
                if !candidate.is_absolute() {
                    return None;
                }
                return candidate.to_str().map(str::to_owned);
            }
        }
    }
    None
}

#[cfg(unix)]
fn candidates(path: &Path) -> Vec<PathBuf> {
    vec![path.to_owned()]
}

/// Windows: the name as given when it has an extension, else with `.com`, `.exe`, `.bat`,
/// `.cmd` (Go's defaults when PATHEXT is not read).
#[cfg(not(unix))]
fn candidates(path: &Path) -> Vec<PathBuf> {
    if path.extension().is_some() {
        return vec![path.to_owned()];
    }
    [".com", ".exe", ".bat", ".cmd"]
        .iter()
        .map(|ext| {
            let mut p = path.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        })
        .collect()
}

#[cfg(unix)]
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| !m.is_dir() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_dir())
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn look_path_finds_executables_as_go_does() {
        let dir = tempfile_dir();
        let bin = script(&dir, "cloud-login", 0o755);
        script(&dir, "not-executable", 0o644);
        std::fs::create_dir(dir.join("a-directory")).unwrap();
        let path = std::env::join_paths([dir.join("nope"), dir.clone()]).unwrap();
        assert_eq!(
            look_path("cloud-login", Some(&path)),
            Some(bin.to_str().unwrap().to_owned())
        );
        assert_eq!(look_path("not-executable", Some(&path)), None);
        assert_eq!(look_path("a-directory", Some(&path)), None);
        assert_eq!(look_path("cloud-login", None), None);
        assert_eq!(
            look_path(bin.to_str().unwrap(), None),
            Some(bin.to_str().unwrap().to_owned())
        );
        // A relative PATH entry is never trusted (Go's ErrDot).
        assert_eq!(
            look_path("cloud-login", Some(std::ffi::OsStr::new("."))),
            None
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_home_kuberc_is_no_policy_and_a_missing_named_one_allows_nothing() {
        let dir = tempfile_dir();
        let missing = dir.join("kuberc");
        let home = CredentialPolicy::load(&CredentialPolicySource {
            kuberc: KubercSource::Home(missing.clone()),
            path: None,
        });
        assert_eq!(home.check("anything"), Ok(()));
        let named = CredentialPolicy::load(&CredentialPolicySource {
            kuberc: KubercSource::Env(missing),
            path: None,
        });
        assert!(matches!(named.check("anything"), Err(Refusal::Unusable(_))));
        let off = CredentialPolicy::load(&CredentialPolicySource {
            kuberc: KubercSource::Off,
            path: None,
        });
        assert_eq!(off.check("anything"), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "appupdate-kuberc-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
