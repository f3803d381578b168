//! Nothing in an endpoints file can alter the generated nginx configuration, in any route
//! style.
//!
//! Exhaustive over ASCII (every code point 0–127) and over representative non-ASCII (line and
//! paragraph separators, NEL, no-break and zero-width spaces, BOM, bidi overrides, fullwidth
//! and look-alike `;` `/` `$` `"`, combining marks, an emoji, private use, U+FFFD): each
//! character is put inside a path and inside a scope, through the parser API and the planner.
//!
//! The characters that could change what nginx reads — whitespace and control characters
//! (they end a directive's argument), `;` (ends a directive), `"` `'` `` ` `` (end a quoted
//! string), `{` `}` (blocks), `$` (variables), `#` (comments), `\` (escapes), the regular
//! expression metacharacters `( ) * + ? [ ] ^ |` and `%` (paths are locations,
//! regexes under `use-regex`), `<` `>` and every non-ASCII character (no byte-level surprises)
//! — must be rejected with a `FILE:LINE` error. Every accepted character must lie outside that
//! set, and for every accepted path and scope the generated snippet keeps its exact shape: the
//! same directives, quotes and semicolons as for a plain letter.
//!
//! For every style (nginx-snippet, nginx-auth, gateway with either auth provider — the
//! `envoy-gateway` one adding a SecurityPolicy), every accepted character in a path or a scope
//! yields the same objects as a plain letter except exactly where the path (or the scope token)
//! sits; there, a nginx-auth regex path holds no unescaped regex character, a
//! gateway path satisfies the HTTPRoute schema's path rules, and a scope token only
//! base64url characters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::endpoints_file::{self, ErrorKind};
use appupdate_model::plan::{AuthProvider, RouteStyle};
use appupdate_plan::routes::{self, BackendPort, RouteContext};
use serde_json::Value;

/// The snippet-style Ingress of the first group of `f`.
fn snippet_ingress(f: &EndpointsFile) -> Value {
    let ctx = RouteContext::new("web", BackendPort::Number(80));
    routes::create_bodies(RouteStyle::NginxSnippet, &ctx, f, "shop")
        .unwrap()
        .remove(0)
}

fn snippet_of(ingress: &Value) -> String {
    ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"]
        .as_str()
        .unwrap()
        .to_owned()
}

const NON_ASCII: &[char] = &[
    '\u{0085}',
    '\u{00A0}',
    '\u{00AD}',
    '\u{00E9}',
    '\u{0130}',
    '\u{0301}',
    '\u{037E}',
    '\u{1680}',
    '\u{180E}',
    '\u{2000}',
    '\u{200B}',
    '\u{200D}',
    '\u{2028}',
    '\u{2029}',
    '\u{202E}',
    '\u{2066}',
    '\u{212A}',
    '\u{2215}',
    '\u{3000}',
    '\u{E000}',
    '\u{FEFF}',
    '\u{FF02}',
    '\u{FF04}',
    '\u{FF0F}',
    '\u{FF1B}',
    '\u{FFFD}',
    '\u{1F600}',
    '\u{10FFFD}',
];

/// Could change what nginx (or a regex location) reads, if it got into the configuration.
fn dangerous(c: char) -> bool {
    !c.is_ascii()
        || c.is_ascii_control()
        || c.is_whitespace()
        || ";\"'`{}$#\\()*+?[]^|%<>".contains(c)
}

/// A YAML double-quoted scalar holding exactly `s` (every character escaped).
fn yaml_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        out.push_str(&format!("\\U{:08X}", u32::from(c)));
    }
    out.push('"');
    out
}

fn chars() -> Vec<char> {
    (0u8..=127)
        .map(char::from)
        .chain(NON_ASCII.iter().copied())
        .collect()
}

/// The snippet's shape: everything but letters and digits.
fn shape(snippet: &str) -> String {
    snippet
        .chars()
        .filter(|c| !c.is_ascii_alphanumeric())
        .collect()
}

#[test]
fn every_character_that_could_alter_the_snippet_is_rejected_in_paths() {
    let (mut rejected, mut accepted) = (0, 0);
    let baseline = {
        let f = endpoints_file::parse("endpoints:\n  - path: /axb\n", "e.yaml").unwrap();
        shape(&snippet_of(&snippet_ingress(&f)))
    };
    for c in chars() {
        let path = format!("/a{c}b");
        let text = format!("endpoints:\n  - path: {}\n", yaml_quoted(&path));
        match endpoints_file::parse(&text, "e.yaml") {
            Err(e) => {
                rejected += 1;
                assert_eq!(e.line, 2, "{c:?}: {e}");
                assert!(
                    matches!(e.kind, ErrorKind::InvalidPath),
                    "{c:?} U+{:04X}: {e}",
                    u32::from(c)
                );
                assert!(e.to_string().starts_with("e.yaml:2: "), "{e}");
            }
            Ok(f) => {
                accepted += 1;
                assert!(
                    !dangerous(c),
                    "{c:?} (U+{:04X}) is accepted in a path",
                    u32::from(c)
                );
                let ing = snippet_ingress(&f);
                assert_eq!(shape(&snippet_of(&ing)), baseline, "{c:?}");
                // The path reaches the Ingress as written, under the app's prefix.
                assert_eq!(
                    ing["spec"]["rules"][0]["http"]["paths"][0]["path"],
                    format!("/web{path}")
                );
            }
        }
    }
    for c in chars().into_iter().filter(|&c| dangerous(c)) {
        let text = format!(
            "endpoints:\n  - path: {}\n",
            yaml_quoted(&format!("/a{c}b"))
        );
        assert!(
            endpoints_file::parse(&text, "e.yaml").is_err(),
            "{c:?} must be rejected"
        );
    }
    println!("paths: {rejected} characters rejected, {accepted} accepted");
    assert_eq!(rejected + accepted, 128 + NON_ASCII.len());
}

#[test]
fn every_character_that_could_alter_the_snippet_is_rejected_in_scopes() {
    let (mut rejected, mut accepted) = (0, 0);
    let snippet_for = |scope: &str| {
        let text = format!(
            "endpoints:\n  - path: /a\n    scopes: [{}]\n",
            yaml_quoted(scope)
        );
        endpoints_file::parse(&text, "e.yaml").map(|f| snippet_of(&snippet_ingress(&f)))
    };
    let baseline = shape(&snippet_for("axb").unwrap());
    for c in chars() {
        match snippet_for(&format!("a{c}b")) {
            Err(e) => {
                rejected += 1;
                assert_eq!(e.line, 3, "{c:?}: {e}");
                assert!(matches!(e.kind, ErrorKind::InvalidScope), "{c:?}: {e}");
            }
            Ok(snippet) => {
                accepted += 1;
                assert!(
                    !dangerous(c),
                    "{c:?} (U+{:04X}) is accepted in a scope",
                    u32::from(c)
                );
                // Same directives, quotes and semicolons; the scope sits inside the quotes.
                let same = shape(&snippet.replace(&format!("a{c}b"), "axb"));
                assert_eq!(same, baseline, "{c:?}: {snippet}");
                assert!(
                    snippet.contains(&format!("set $scopes \"a{c}b\";\n")),
                    "{snippet}"
                );
            }
        }
    }
    println!("scopes: {rejected} characters rejected, {accepted} accepted");
    assert_eq!(rejected + accepted, 128 + NON_ASCII.len());
}

#[test]
fn the_accepted_sets_are_exactly_the_documented_ones() {
    let documented_path: Vec<char> = chars()
        .into_iter()
        .filter(|c| c.is_ascii_alphanumeric() || endpoints_file::PATH_PUNCTUATION.contains(*c))
        .collect();
    for c in &documented_path {
        assert!(!dangerous(*c), "{c:?}");
    }
    let documented_scope: Vec<char> = chars()
        .into_iter()
        .filter(|c| c.is_ascii_alphanumeric() || endpoints_file::SCOPE_PUNCTUATION.contains(*c))
        .collect();
    for c in &documented_scope {
        assert!(!dangerous(*c), "{c:?}");
    }
}

// ---- every route style ----

use appupdate_plan::routes::refs::{AuthUrl, ObjectRef, ServiceRef};
use appupdate_plan::routes::{gateway, nginx_auth, path_core, scope_token};

/// A context with everything each style needs.
fn full_context() -> RouteContext {
    let mut ctx = RouteContext::new("web", BackendPort::Number(80));
    ctx.attachment.ingress_class = Some("nginx".into());
    ctx.attachment.auth_url = Some(AuthUrl::parse("http://oauth.auth.svc:8080/verify").unwrap());
    ctx.attachment.parent_refs = Some(serde_json::json!([ObjectRef::parse("gw/public")
        .unwrap()
        .parent_ref()]));
    ctx.attachment.auth_service = Some(ServiceRef::parse("auth/oauth:8080").unwrap());
    ctx
}

/// Every style, the gateway one with each auth provider.
fn variants() -> Vec<(RouteStyle, Option<AuthProvider>)> {
    let mut v: Vec<_> = RouteStyle::ALL.iter().map(|s| (*s, None)).collect();
    v.push((RouteStyle::Gateway, Some(AuthProvider::EnvoyGateway)));
    v
}

/// The objects `style` creates for one endpoint, serialised.
fn generated(
    (style, provider): (RouteStyle, Option<AuthProvider>),
    path: &str,
    scope: Option<&str>,
) -> Option<String> {
    let mut text = format!("endpoints:\n  - path: {}\n", yaml_quoted(path));
    if let Some(s) = scope {
        text.push_str(&format!("    scopes: [{}]\n", yaml_quoted(s)));
    }
    let f = endpoints_file::parse(&text, "e.yaml").ok()?;
    let mut ctx = full_context();
    ctx.attachment.auth_provider = provider;
    let bodies = routes::create_bodies(style, &ctx, &f, "shop").unwrap();
    if provider.is_some() && scope.is_some() {
        assert_eq!(bodies.len(), 2, "a route and its SecurityPolicy");
    }
    Some(serde_json::to_string(&bodies).unwrap())
}

/// Where a path lands in each style.
fn path_forms(style: RouteStyle, path: &str) -> Vec<String> {
    match style {
        RouteStyle::NginxSnippet => vec![format!("/web{path}")],
        RouteStyle::NginxAuth => vec![nginx_auth::regex_path("web", path)],
        RouteStyle::Gateway => vec![
            gateway::match_prefix("web", path),
            path_core(path).to_owned(),
        ],
    }
}

/// No character of a regular expression is left unescaped between the template's parts.
fn regex_is_literal(regex: &str, path: &str) -> bool {
    let middle = regex
        .strip_prefix("/web/(")
        .and_then(|r| r.strip_suffix("(?:/.*)?)$"))
        .unwrap_or_else(|| panic!("{regex} for {path}"));
    !middle
        .replace("[.]", "")
        .chars()
        .any(|c| "\\.^$|?*+()[]{}".contains(c))
}

/// What the Gateway API's HTTPRoute schema accepts in a PathPrefix value.
fn gateway_path_ok(p: &str) -> bool {
    p.starts_with('/')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-/._~!$&'()*+,;=:@".contains(c))
        && !["//", "/./", "/../", "#", "%2f", "%2F"]
            .iter()
            .any(|bad| p.contains(bad))
        && !p.ends_with("/..")
        && !p.ends_with("/.")
}

#[test]
fn no_accepted_path_alters_the_routes_of_any_style() {
    for v in variants() {
        let style = v.0;
        let baseline = generated(v, "/axb", None).unwrap();
        for c in chars() {
            let path = format!("/a{c}b");
            let Some(text) = generated(v, &path, None) else {
                continue;
            };
            let mut same = text.clone();
            for (from, to) in path_forms(style, &path)
                .iter()
                .zip(path_forms(style, "/axb"))
            {
                assert!(
                    text.contains(from.as_str()),
                    "{style}: {from} not in {text}"
                );
                same = same.replace(from.as_str(), &to);
            }
            assert_eq!(same, baseline, "{style}: {c:?} changed more than the path");
            match style {
                RouteStyle::NginxSnippet => {}
                RouteStyle::NginxAuth => {
                    let regex = nginx_auth::regex_path("web", &path);
                    assert!(regex_is_literal(&regex, &path), "{c:?}: {regex}");
                }
                RouteStyle::Gateway => {
                    for p in path_forms(style, &path) {
                        assert!(gateway_path_ok(&p), "{c:?}: {p}");
                    }
                }
            }
        }
    }
}

#[test]
fn no_accepted_scope_alters_the_routes_of_any_style() {
    for v in variants() {
        let style = v.0;
        let baseline = generated(v, "/a", Some("axb")).unwrap();
        for c in chars() {
            let scope = format!("a{c}b");
            let Some(text) = generated(v, "/a", Some(&scope)) else {
                continue;
            };
            let token = scope_token(std::slice::from_ref(&scope));
            assert!(
                token
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{token}"
            );
            let same = match style {
                // The scope sits inside the snippet's quotes (checked above, character by
                // character); the token is not used.
                RouteStyle::NginxSnippet => {
                    text.replace(&format!("\\\"{scope}\\\""), "\\\"axb\\\"")
                }
                _ => {
                    assert!(
                        !text.contains(&scope),
                        "{style}: raw scope {scope} in {text}"
                    );
                    text.replace(&token, &scope_token(&["axb".to_owned()]))
                }
            };
            // The identifier and name are hashes of the scopes: put the baseline's back.
            let id = routes::scope_identifier(std::slice::from_ref(&scope));
            let same = same.replace(&id, &routes::scope_identifier(&["axb".to_owned()]));
            assert_eq!(same, baseline, "{style}: {c:?} changed more than the scope");
        }
    }
}
