//! Kubernetes name rules, as the API server checks them (apimachinery's `IsDNS1123Label`,
//! `IsDNS1035Label`, `IsDNS1123Subdomain`): lowercase ASCII letters, digits and `-`,
//! alphanumeric at both ends. One label check serves all three. As in apimachinery, a
//! subdomain's parts are not held to the 63-character limit of a label: only the whole is
//! (253).

/// Longest label (RFC 1123).
const LABEL_MAX: usize = 63;
/// Longest subdomain (RFC 1123).
const SUBDOMAIN_MAX: usize = 253;

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9-]`, starting with a character `first` accepts and ending with a letter or digit.
fn is_label_shaped(s: &str, first: fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    b.first().copied().is_some_and(first)
        && b.last().copied().is_some_and(lower_alnum)
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// A DNS-1123 label, e.g. a namespace name.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= LABEL_MAX && is_label_shaped(s, lower_alnum)
}

/// A DNS-1035 label (a DNS-1123 label that starts with a letter), e.g. a Service name.
pub fn is_dns1035_label(s: &str) -> bool {
    s.len() <= LABEL_MAX && is_label_shaped(s, |c| c.is_ascii_lowercase())
}

/// A DNS-1123 subdomain — labels joined by `.`, at most 253 characters — e.g. an Ingress
/// name.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX && s.split('.').all(|part| is_label_shaped(part, lower_alnum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_lowercase_alphanumerics_and_dashes_with_alphanumeric_ends() {
        for ok in ["a", "web", "web-2", "0web", "a".repeat(63).as_str()] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Web",
            "a.b",
            "a_b",
            "ä",
            "a".repeat(64).as_str(),
        ] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn a_dns1035_label_starts_with_a_letter() {
        assert!(is_dns1035_label("web-2"));
        assert!(!is_dns1035_label("2web"));
        assert!(!is_dns1035_label(""));
    }

    #[test]
    fn a_subdomain_is_dot_separated_labels_of_at_most_253_characters() {
        assert!(is_dns1123_subdomain("web-04f8996da763b7a9"));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        for bad in ["", "a..b", "-a", "a.", ".a", "A.b"] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }
}
