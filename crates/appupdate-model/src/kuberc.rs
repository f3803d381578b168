//! kubectl's preferences file (kuberc) as far as this plugin obeys it: the credential plugin
//! policy, `credentialPluginPolicy` and `credentialPluginAllowlist`. Pure: the text is parsed
//! here and the decision made here; reading the file and resolving a command on `PATH` (what
//! Go's `exec.LookPath` does) are the caller's, handed in as a function.
//!
//! Matched as kubectl v1.35 (the release that made the policy beta) matches it:
//! `staging/src/k8s.io/kubectl/pkg/config/types.go` (`Preference.CredentialPluginPolicy`,
//! `CredentialPluginAllowlist`, `AllowlistEntry.Name`) and client-go
//! `plugin/pkg/client/auth/exec/exec.go`: the policy `""` is `AllowAll`, `DenyAll` runs no
//! plugin, `Allowlist` runs a plugin when, for some entry, `exec.LookPath` of the entry's `name`
//! and `exec.LookPath` of the (cleaned) command both succeed and are the same string; an entry
//! with no field set, or an allowlist under another policy, is a configuration error.
//!
//! Later client-go (kubernetes PR #137272, after v1.35) renames the Go field
//! `clientcmd/api.AllowlistEntry.Name` to `Command`; the key kubectl documents in the kuberc
//! file is `name`, and that is the one read here. Any other key in an entry (`command`
//! included) is one this plugin does not know: it never allows anything, and an entry with no
//! `name` is refused as kubectl refuses an entry with no field set — the whole file then allows
//! no plugin.

use serde_json::Value;

/// Which credential plugins may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every plugin (no policy, `""` or `AllowAll`).
    AllowAll,
    /// None.
    DenyAll,
    /// Those an entry names (a basename looked up on `PATH`, or a path); none when empty.
    Allowlist(Vec<String>),
}

/// Why a kuberc file cannot be used; it then allows no credential plugin.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubercError {
    #[error("it is not valid YAML")]
    Yaml,
    #[error("it is not a kubectl preferences document (a mapping is expected)")]
    NotAMapping,
    #[error("its apiVersion {0:?} is not kubectl.config.k8s.io/v1alpha1 or v1beta1")]
    ApiVersion(String),
    #[error(
        "credentialPluginPolicy {0:?} is not one of AllowAll, DenyAll, Allowlist (the names are case-sensitive)"
    )]
    UnknownPolicy(String),
    #[error("credentialPluginPolicy is not a string")]
    PolicyNotAString,
    #[error("credentialPluginAllowlist is not a list")]
    AllowlistNotAList,
    #[error("credentialPluginAllowlist is given but credentialPluginPolicy is not Allowlist")]
    AllowlistWithoutPolicy,
    #[error("credentialPluginAllowlist entry {0} has no name")]
    EntryWithoutName(usize),
}

/// Parses a kuberc file's text into its credential plugin policy. Everything else in the file
/// (aliases, defaults) is kubectl's and ignored.
pub fn parse(text: &str) -> Result<Policy, KubercError> {
    let doc: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_str(text).map_err(|_| KubercError::Yaml)?
    };
    let map = match doc {
        // An empty file sets nothing: kubectl behaves as without one.
        Value::Null => return Ok(Policy::AllowAll),
        Value::Object(map) => map,
        _ => return Err(KubercError::NotAMapping),
    };
    if let Some(version) = map.get("apiVersion") {
        let ok = version.as_str().is_some_and(|v| {
            v == "kubectl.config.k8s.io/v1alpha1" || v == "kubectl.config.k8s.io/v1beta1"
        });
        if !ok {
            return Err(KubercError::ApiVersion(
                version
                    .as_str()
                    .map_or_else(|| version.to_string(), str::to_owned),
            ));
        }
    }
    let policy = match map.get("credentialPluginPolicy") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(KubercError::PolicyNotAString),
    };
    let allowlist = match map.get("credentialPluginAllowlist") {
        None | Some(Value::Null) => None,
        Some(Value::Array(entries)) => Some(entries),
        Some(_) => return Err(KubercError::AllowlistNotAList),
    };
    match policy {
        "" | "AllowAll" | "DenyAll" if allowlist.is_some_and(|a| !a.is_empty()) => {
            Err(KubercError::AllowlistWithoutPolicy)
        }
        "" | "AllowAll" => Ok(Policy::AllowAll),
        "DenyAll" => Ok(Policy::DenyAll),
        "Allowlist" => {
            let mut names = Vec::new();
            for (index, entry) in allowlist.into_iter().flatten().enumerate() {
                match entry.get("name").and_then(Value::as_str) {
                    Some(name) if !name.is_empty() => names.push(name.to_owned()),
                    _ => return Err(KubercError::EntryWithoutName(index + 1)),
                }
            }
            Ok(Policy::Allowlist(names))
        }
        other => Err(KubercError::UnknownPolicy(other.to_owned())),
    }
}

/// Why a plugin may not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// `credentialPluginPolicy: DenyAll`.
    DenyAll,
    /// `Allowlist` with no entry.
    EmptyAllowlist,
    /// `Allowlist`, and no entry resolves to the command's path.
    NotListed,
    /// `Allowlist`, and the command itself is not found as `exec.LookPath` looks.
    NotFound,
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Denied::DenyAll => "its credentialPluginPolicy is DenyAll",
            Denied::EmptyAllowlist => {
                "its credentialPluginPolicy is Allowlist and credentialPluginAllowlist is empty"
            }
            Denied::NotListed => "the plugin is not in its credentialPluginAllowlist",
            Denied::NotFound => {
                "its credentialPluginPolicy is Allowlist and the plugin is not found, so it cannot be matched"
            }
        })
    }
}

/// Whether `policy` lets the exec plugin `command` (as the kubeconfig names it, relative paths
/// already made absolute) run. `look_path` is Go's `exec.LookPath`: a name with a path
/// separator is checked as it is, a basename is searched on `PATH`; `None` when not found (or
/// not executable).
pub fn allows(
    policy: &Policy,
    command: &str,
    look_path: impl Fn(&str) -> Option<String>,
) -> Result<(), Denied> {
    match policy {
        Policy::AllowAll => Ok(()),
        Policy::DenyAll => Err(Denied::DenyAll),
        Policy::Allowlist(names) if names.is_empty() => Err(Denied::EmptyAllowlist),
        Policy::Allowlist(names) => {
            let Some(resolved) = look_path(&clean(command)) else {
                return Err(Denied::NotFound);
            };
            if names
                .iter()
                .any(|name| look_path(name).is_some_and(|n| n == resolved))
            {
                Ok(())
            } else {
                Err(Denied::NotListed)
            }
        }
    }
}

/// Go's `filepath.Clean` for the separators of this platform: repeated separators and `.`
/// dropped, `..` taken back lexically.
pub fn clean(path: &str) -> String {
    let sep = std::path::MAIN_SEPARATOR;
    let is_sep = |c: char| c == sep || c == '/';
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with(is_sep);
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(is_sep) {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            p => parts.push(p),
        }
    }
    let body = parts.join(&sep.to_string());
    match (rooted, body.is_empty()) {
        (true, _) => format!("{sep}{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PATH` holds /usr/bin with `get-identity` and `cloudco-login`; `/opt/cloudco-login`
    /// exists too.
    fn look(name: &str) -> Option<String> {
        let on_path = ["get-identity", "cloudco-login"];
        if name.contains('/') {
            [
                "/usr/bin/get-identity",
                "/usr/bin/cloudco-login",
                "/opt/cloudco-login",
            ]
            .contains(&name)
            .then(|| name.to_owned())
        } else {
            on_path.contains(&name).then(|| format!("/usr/bin/{name}"))
        }
    }

    fn policy(text: &str) -> Policy {
        parse(text).expect("a valid kuberc")
    }

    const HEAD: &str = "apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n";

    #[test]
    fn no_policy_allows_all() {
        for text in [
            "",
            HEAD,
            &format!("{HEAD}credentialPluginPolicy: AllowAll\n"),
            &format!("{HEAD}credentialPluginPolicy: \"\"\n"),
            &format!("{HEAD}aliases:\n- name: getn\n  command: get\n"),
        ] {
            assert_eq!(policy(text), Policy::AllowAll, "{text}");
            assert_eq!(allows(&policy(text), "anything", look), Ok(()));
        }
    }

    #[test]
    fn deny_all_denies_every_plugin() {
        let p = policy(&format!("{HEAD}credentialPluginPolicy: DenyAll\n"));
        assert_eq!(p, Policy::DenyAll);
        assert_eq!(allows(&p, "get-identity", look), Err(Denied::DenyAll));
        assert_eq!(
            allows(&p, "/usr/bin/get-identity", look),
            Err(Denied::DenyAll)
        );
    }

    #[test]
    fn allowlist_by_basename_matches_the_path_it_resolves_to() {
        let p = policy(&format!(
            "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: get-identity\n"
        ));
        assert_eq!(allows(&p, "get-identity", look), Ok(()));
        // The kubeconfig names the same file by its full path: the same program.
        assert_eq!(allows(&p, "/usr/bin/get-identity", look), Ok(()));
        assert_eq!(allows(&p, "/usr/bin/../bin/get-identity", look), Ok(()));
        assert_eq!(allows(&p, "cloudco-login", look), Err(Denied::NotListed));
    }

    #[test]
    fn allowlist_by_full_path_matches_that_file_only() {
        let p = policy(&format!(
            "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /opt/cloudco-login\n"
        ));
        assert_eq!(allows(&p, "/opt/cloudco-login", look), Ok(()));
        // Same basename, another file (the one on PATH): not allowed.
        assert_eq!(allows(&p, "cloudco-login", look), Err(Denied::NotListed));
        assert_eq!(
            allows(&p, "/usr/bin/cloudco-login", look),
            Err(Denied::NotListed)
        );
    }

    #[test]
    fn an_entry_or_a_command_that_is_not_found_never_matches() {
        let p = policy(&format!(
            "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: missing\n- name: /nowhere/get-identity\n"
        ));
        assert_eq!(allows(&p, "get-identity", look), Err(Denied::NotListed));
        let p = policy(&format!(
            "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: missing\n"
        ));
        // Both missing: two failed look-ups are not a match.
        assert_eq!(allows(&p, "missing", look), Err(Denied::NotFound));
    }

    #[test]
    fn an_empty_allowlist_denies() {
        for text in [
            format!("{HEAD}credentialPluginPolicy: Allowlist\n"),
            format!("{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist: []\n"),
        ] {
            let p = policy(&text);
            assert_eq!(p, Policy::Allowlist(Vec::new()));
            assert_eq!(
                allows(&p, "get-identity", look),
                Err(Denied::EmptyAllowlist)
            );
        }
    }

    #[test]
    fn a_key_it_does_not_know_never_widens_the_list() {
        // `command` (the later Go field name), a glob-looking key, anything: refused.
        for entry in [
            "command: get-identity",
            "path: /usr/bin/get-identity",
            "name: \"\"",
        ] {
            let text = format!(
                "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /opt/cloudco-login\n- {entry}\n"
            );
            assert_eq!(
                parse(&text),
                Err(KubercError::EntryWithoutName(2)),
                "{entry}"
            );
        }
        // Next to a name, another key is ignored: it neither widens nor narrows the entry.
        let p = policy(&format!(
            "{HEAD}credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /opt/cloudco-login\n  command: get-identity\n"
        ));
        assert_eq!(p, Policy::Allowlist(vec!["/opt/cloudco-login".into()]));
        assert_eq!(allows(&p, "get-identity", look), Err(Denied::NotListed));
        // An unknown top-level key is kubectl's business, not a policy.
        let p = policy(&format!(
            "{HEAD}credentialPluginAllowAll: true\ncredentialPluginPolicy: DenyAll\n"
        ));
        assert_eq!(p, Policy::DenyAll);
    }

    #[test]
    fn a_malformed_file_is_an_error() {
        let cases = [
            ("credentialPluginPolicy: [", KubercError::Yaml),
            ("- a\n- b\n", KubercError::NotAMapping),
            ("just text", KubercError::NotAMapping),
            (
                "apiVersion: v1\nkind: Config\n",
                KubercError::ApiVersion("v1".into()),
            ),
            (
                "credentialPluginPolicy: denyall\n",
                KubercError::UnknownPolicy("denyall".into()),
            ),
            (
                "credentialPluginPolicy: [DenyAll]\n",
                KubercError::PolicyNotAString,
            ),
            (
                "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist: get-identity\n",
                KubercError::AllowlistNotAList,
            ),
            (
                "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- get-identity\n",
                KubercError::EntryWithoutName(1),
            ),
            (
                "credentialPluginPolicy: DenyAll\ncredentialPluginAllowlist:\n- name: get-identity\n",
                KubercError::AllowlistWithoutPolicy,
            ),
            (
                "credentialPluginAllowlist:\n- name: get-identity\n",
                KubercError::AllowlistWithoutPolicy,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Err(want), "{text}");
        }
    }

    #[test]
    fn clean_is_lexical_as_go_filepath_clean() {
        if std::path::MAIN_SEPARATOR != '/' {
            return;
        }
        for (path, want) in [
            ("get-identity", "get-identity"),
            ("/usr//bin/./x", "/usr/bin/x"),
            ("/usr/bin/../lib/x", "/usr/lib/x"),
            ("/../x", "/x"),
            ("../x", "../x"),
            ("a/..", "."),
            ("", "."),
        ] {
            assert_eq!(clean(path), want, "{path}");
        }
    }
}
