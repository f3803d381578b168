//! Names and labels: the checks and messages of k8s.io/apimachinery/pkg/util/validation
//! (`IsDNS1123Label`, `IsQualifiedName`, `IsValidLabelValue`, …) and which rule a kind applies to
//! `metadata.name`.

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

/// `validation.RegexError`.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// Matches the DNS-1123 subdomain pattern (no length check).
pub fn matches_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(matches_dns1123_label)
}

/// `IsQualifiedName` (label keys, annotation keys).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.len() {
        1 => parts[0],
        2 => {
            let prefix = parts[0];
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            parts[1]
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            &format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"),
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsValidPortName` (IANA_SVC_NAME).
pub fn is_valid_port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    let b = port.as_bytes();
    if !b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

pub fn port_range_msg() -> &'static str {
    "must be between 1 and 65535, inclusive"
}

/// Which name rule a kind applies to `metadata.name`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    Dns1035Label,
}

/// The messages of `rule` for a name (`prefix`: a `generateName`, checked with a stand-in suffix).
pub fn name_errors(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix {
        name.trim_end_matches('-')
    } else {
        name
    };
    let name = if prefix && name.is_empty() { "a" } else { name };
    match rule {
        NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
        NameRule::Dns1123Label => is_dns1123_label(name),
        NameRule::Dns1035Label => is_dns1035_label(name),
    }
}

/// `IsConfigMapKey`: ConfigMap and Secret keys.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    match value {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        v if v.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

/// `path.IsValidPathSegmentName`: a name that can be one segment of a URL path.
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name == "." || name == ".." {
        errs.push(format!("may not be '{name}'"));
        return errs;
    }
    for illegal in ["/", "%"] {
        if name.contains(illegal) {
            errs.push(format!("may not contain '{illegal}'"));
        }
    }
    errs
}

/// The `httpPathFmt` of `IsDomainPrefixedPath`: `[A-Za-z0-9/\-._~%!$&'()*+,;=:]+`.
pub fn matches_http_path(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c))
}

/// The pattern [`matches_http_path`] checks, as messages quote it.
pub const HTTP_PATH_FMT: &str = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+";

/// `*.example.com`.
pub fn is_wildcard_dns1123_subdomain(host: &str) -> bool {
    match host.strip_prefix("*.") {
        Some(rest) => matches_dns1123_subdomain(rest),
        None => false,
    }
}

/// `utilrand.String(n)`: `n` characters of the alphabet generated names use (no vowels, no
/// look-alike digits), as in `generateName` suffixes and pod names.
pub fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    (0..n)
        .map(|i| char::from(ALPHABET[bytes[i % 16] as usize % ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_value_message_matches_fixture() {
        assert_eq!(
            is_valid_label_value("web:abc123"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("3f9c2a7be41d0c58").is_empty());
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/team").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert_eq!(is_qualified_name("-x").len(), 1);
        assert_eq!(
            is_qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
    }

    #[test]
    fn config_map_keys() {
        assert!(is_config_map_key("app.properties").is_empty());
        assert_eq!(is_config_map_key(".."), vec!["must not be '..'"]);
        assert_eq!(is_config_map_key("..x"), vec!["must not start with '..'"]);
        assert_eq!(
            is_config_map_key("a b"),
            vec![
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            ]
        );
        assert_eq!(
            is_config_map_key(&"k".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
    }

    #[test]
    fn path_segment_names() {
        assert_eq!(is_valid_path_segment_name(".."), vec!["may not be '..'"]);
        assert_eq!(
            is_valid_path_segment_name("a/b%c"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(is_valid_path_segment_name("Cfg").is_empty());
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_subdomain("web.example").is_empty());
        assert_eq!(is_dns1123_subdomain("Web").len(), 1);
        assert_eq!(is_dns1123_label("a.b"), vec!["must not contain dots"]);
        assert!(is_dns1035_label("web").is_empty());
        assert_eq!(is_dns1035_label("1web").len(), 1);
    }
}
