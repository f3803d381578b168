//! Which proxy, if any, carries the connection to the API server — kubectl's rules, as data.
//!
//! kubectl (client-go) takes the cluster's `proxy-url` when the kubeconfig sets one: `http`,
//! `https` and `socks5` URLs are accepted, anything else is an error, and the proxy is used for
//! every server, loopback included. Otherwise it asks Go's `http.ProxyFromEnvironment`
//! (golang.org/x/net/http/httpproxy):
//!
//! * `HTTPS_PROXY` (else `https_proxy`) for an `https://` server, `HTTP_PROXY` (else
//!   `http_proxy`) for an `http://` one — except in a CGI process (`REQUEST_METHOD` set), where
//!   `HTTP_PROXY` is refused because a client could have set it;
//! * a value without a scheme means `http://`; one that does not parse even then is ignored;
//! * never for `localhost` or a loopback address (127.0.0.0/8, ::1);
//! * `NO_PROXY` (else `no_proxy`), comma-separated, case-insensitive: `*` (no proxy at all),
//!   an IP address or CIDR range, or a host name that matches itself and every subdomain
//!   (`example.com` matches `example.com` and `api.example.com`; `.example.com` and
//!   `*.example.com` only the subdomains); an IP address or host name may carry a port
//!   (`10.0.0.1:6443`), and then only that port matches. A host name never matches an IP
//!   address. Entries that do not parse are ignored.
//!
//! client-go also honours CIDR entries written with leading zeros (`010.0.0.0/8`), which Go
//! itself rejects; so do we. Unlike Go, Unicode host names in `NO_PROXY` are not converted to
//! their ASCII (punycode) form: write `xn--…` names as the kubeconfig's server URL does.
//!
//! Nothing here reads the environment: [`ProxyEnv`] is filled by `settings::Environment`.
//!
//! These rules are ours, not hyper-util's `client::proxy::matcher::Matcher`: that follows
//! curl's `NO_PROXY` rules, which differ from Go's in cases the tests below pin. With Go's test
//! list, `Matcher` proxies `localhost`, `127.0.0.2` and `[::1]` (Go never does); exempts
//! `barbaz.net` for `.barbaz.net` (Go: subdomains only) but not `nested.wildcard.io` for
//! `*.wildcard.io`; never matches an entry with a port (`192.168.1.3:80`,
//! `[2001:db8::52:0:3]:80`); and its `*` exempts host names but not IP addresses. Choosing the
//! proxy differs too: it reads `ALL_PROXY`, drops every proxy in a CGI process (Go refuses
//! `HTTP_PROXY` only), drops a URL with an unknown scheme (Go keeps it, and dialling fails), and
//! knows nothing of the kubeconfig's `proxy-url`.

use appupdate_model::text::Untrusted;
use ipnet::IpNet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The proxy variables of the environment, as kubectl reads them: for each, the upper-case
/// name unless it is empty, else the lower-case one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// `HTTPS_PROXY` / `https_proxy`: the variable that was set and its value.
    pub https_proxy: Option<(&'static str, String)>,
    /// `HTTP_PROXY` / `http_proxy`.
    pub http_proxy: Option<(&'static str, String)>,
    /// `NO_PROXY` / `no_proxy`.
    pub no_proxy: Option<String>,
    /// `REQUEST_METHOD` is set: the process is a CGI handler.
    pub cgi: bool,
}

impl ProxyEnv {
    /// Builds the proxy settings from a variable lookup (the caller reads the environment).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> ProxyEnv {
        let any = |names: [&'static str; 2]| {
            names
                .into_iter()
                .find_map(|n| var(n).filter(|v| !v.is_empty()).map(|v| (n, v)))
        };
        ProxyEnv {
            https_proxy: any(["HTTPS_PROXY", "https_proxy"]),
            http_proxy: any(["HTTP_PROXY", "http_proxy"]),
            no_proxy: any(["NO_PROXY", "no_proxy"]).map(|(_, v)| v),
            cgi: var("REQUEST_METHOD").is_some_and(|v| !v.is_empty()),
        }
    }
}

/// Proxy URLs may carry credentials: the debug form shows the variables' names only.
impl fmt::Debug for ProxyEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyEnv")
            .field("https_proxy", &self.https_proxy.as_ref().map(|(n, _)| n))
            .field("http_proxy", &self.http_proxy.as_ref().map(|(n, _)| n))
            .field("no_proxy", &self.no_proxy)
            .field("cgi", &self.cgi)
            .finish()
    }
}

/// A parsed proxy URL. Its `Display` form never includes the credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// Lower case, e.g. `http`, `socks5`.
    pub scheme: String,
    /// Without brackets for IPv6 literals; percent-escapes decoded.
    pub host: String,
    /// As written (digits), if any.
    pub port: Option<String>,
    /// The user name and password, percent-escapes decoded.
    pub user: Option<Credentials>,
}

/// Proxy credentials; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(…)")
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({self})")
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, bracketed(&self.host))?;
        if let Some(p) = &self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

/// `host`, in brackets when it is an IPv6 address.
pub fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

impl ProxyUrl {
    /// The port to dial: the URL's, else the scheme's default (Go's: 80, 443, 1080).
    pub fn port_or_default(&self) -> Option<u16> {
        match &self.port {
            Some(p) if !p.is_empty() => p.parse().ok(),
            _ => match self.scheme.as_str() {
                "http" => Some(80),
                "https" => Some(443),
                "socks5" | "socks5h" => Some(1080),
                _ => None,
            },
        }
    }
}

/// Where the chosen proxy came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The cluster entry's `proxy-url`.
    Kubeconfig,
    /// An environment variable (its name as set: `HTTPS_PROXY`, `https_proxy`, …).
    Env(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Kubeconfig => f.write_str("the kubeconfig's proxy-url"),
            Source::Env(name) => f.write_str(name),
        }
    }
}

/// The proxy a run goes through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    pub url: ProxyUrl,
    pub source: Source,
}

impl fmt::Display for Proxy {
    /// `http://proxy.corp:3128 (HTTPS_PROXY)`: no credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.url, self.source)
    }
}

/// The API server the connection is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub scheme: String,
    /// Without brackets for IPv6 literals.
    pub host: String,
    pub port: Option<u16>,
}

impl Target {
    pub fn from_uri(uri: &http::Uri) -> Target {
        Target {
            scheme: uri.scheme_str().unwrap_or("https").to_ascii_lowercase(),
            host: uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: uri.port_u16(),
        }
    }

    fn port_or_default(&self) -> String {
        match self.port {
            Some(p) => p.to_string(),
            None => match self.scheme.as_str() {
                "http" => "80".into(),
                "https" => "443".into(),
                _ => String::new(),
            },
        }
    }
}

/// Why no proxy could be chosen: the message names the setting, never its credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// kubectl: `invalid 'proxy-url' … for cluster …`.
    #[error("the cluster's proxy-url is not valid: {0}")]
    InvalidProxyUrl(String),
    /// Go refuses `HTTP_PROXY` in a CGI process.
    #[error(
        "refusing to use {0} for an http:// server while REQUEST_METHOD is set (a CGI environment); unset REQUEST_METHOD or {0}"
    )]
    Cgi(&'static str),
}

/// kubectl's choice of proxy for `server`: the cluster's `proxy-url` (`kubeconfig_proxy_url`,
/// empty = unset) wins; else the environment's, unless `NO_PROXY` or the loopback rule exempts
/// the server.
pub fn select(
    kubeconfig_proxy_url: Option<&str>,
    server: &Target,
    env: &ProxyEnv,
) -> Result<Option<Proxy>, SelectError> {
    if let Some(raw) = kubeconfig_proxy_url.filter(|s| !s.is_empty()) {
        let url = parse_url(raw).map_err(SelectError::InvalidProxyUrl)?;
        return match url.scheme.as_str() {
            "http" | "https" | "socks5" if !url.host.is_empty() || url.port.is_some() => {
                Ok(Some(Proxy {
                    url,
                    source: Source::Kubeconfig,
                }))
            }
            "http" | "https" | "socks5" => Err(SelectError::InvalidProxyUrl(
                "it has no host; write it as scheme://host:port".into(),
            )),
            "" => Err(SelectError::InvalidProxyUrl(
                "it has no scheme; use http://, https:// or socks5://".into(),
            )),
            other => Err(SelectError::InvalidProxyUrl(format!(
                "unsupported scheme {other:?}, must be http, https, or socks5",
                other = Untrusted(other)
            ))),
        };
    }
    from_environment(server, env)
}

/// Go's `httpproxy.Config.ProxyFunc` for one server.
pub fn from_environment(server: &Target, env: &ProxyEnv) -> Result<Option<Proxy>, SelectError> {
    let chosen = match server.scheme.as_str() {
        "https" => env.https_proxy.as_ref(),
        "http" => {
            if let Some((name, _)) = &env.http_proxy
                && env.cgi
            {
                return Err(SelectError::Cgi(name));
            }
            env.http_proxy.as_ref()
        }
        _ => None,
    };
    // A value that does not parse is ignored, as Go does.
    let Some((name, url)) = chosen.and_then(|(n, v)| parse_env_proxy(v).map(|u| (*n, u))) else {
        return Ok(None);
    };
    if !NoProxy::parse(env.no_proxy.as_deref().unwrap_or_default())
        .use_proxy(&server.host, &server.port_or_default())
    {
        return Ok(None);
    }
    Ok(Some(Proxy {
        url,
        source: Source::Env(name),
    }))
}

/// Go's `parseProxy`: a full URL, or `host[:port]` meaning `http://host[:port]`.
fn parse_env_proxy(value: &str) -> Option<ProxyUrl> {
    match parse_url(value) {
        Ok(u) if !u.scheme.is_empty() && !u.host.is_empty() => Some(u),
        first => match parse_url(&format!("http://{value}")) {
            Ok(u) => Some(u),
            Err(_) => first.ok(),
        },
    }
}

/// The parts of Go's `url.Parse` that matter for a proxy URL: scheme, user information, host
/// and port (a path, query or fragment is accepted and ignored). An empty host means the URL
/// had no `//authority`.
pub fn parse_url(raw: &str) -> Result<ProxyUrl, String> {
    if raw.chars().any(|c| c.is_ascii_control()) {
        return Err("it contains a control character".into());
    }
    let without_fragment = raw.split('#').next().unwrap_or_default();
    let without_query = without_fragment.split('?').next().unwrap_or_default();
    let (scheme, rest) = split_scheme(without_query)?;
    let empty = |scheme: String| ProxyUrl {
        scheme,
        host: String::new(),
        port: None,
        user: None,
    };
    let Some(after) = rest.strip_prefix("//") else {
        if scheme.is_empty()
            && !rest.starts_with('/')
            && rest.split('/').next().unwrap_or_default().contains(':')
        {
            return Err("first path segment in URL cannot contain colon".into());
        }
        return Ok(empty(scheme));
    };
    let authority = after.split('/').next().unwrap_or_default();
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    // A `@` after the authority (a password with an unescaped `/`) leaves part of the
    // credentials where the port is: the message does not quote it then.
    let (host, port) = parse_host(hostport).map_err(|e| {
        if raw.contains('@') && e.starts_with("invalid port") {
            "invalid port after host".to_owned()
        } else {
            e
        }
    })?;
    let user = match userinfo {
        None => None,
        Some(u) => {
            if !u.chars().all(|c| {
                c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c) || !c.is_ascii()
            }) {
                return Err("invalid user information".into());
            }
            let (name, password) = match u.split_once(':') {
                Some((n, p)) => (n, Some(p)),
                None => (u, None),
            };
            Some(Credentials {
                username: unescape(name)?,
                password: password.map(unescape).transpose()?,
            })
        }
    };
    Ok(ProxyUrl {
        scheme,
        host,
        port,
        user,
    })
}

/// Go's `getScheme`: a letter, then letters, digits, `+`, `-` or `.`, then `:`; anything else
/// means there is no scheme.
fn split_scheme(raw: &str) -> Result<(String, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((raw[..i].to_ascii_lowercase(), &raw[i + 1..])),
            _ => return Ok((String::new(), raw)),
        }
    }
    Ok((String::new(), raw))
}

fn valid_optional_port(s: &str) -> bool {
    s.is_empty()
        || s.strip_prefix(':')
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseHost`: `[v6]:port`, `host:port` or `host`.
fn parse_host(hostport: &str) -> Result<(String, Option<String>), String> {
    let (host, colon_port) = if hostport.starts_with('[') {
        let Some(end) = hostport.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        (&hostport[1..end], &hostport[end + 1..])
    } else {
        match hostport.rfind(':') {
            Some(i) => (&hostport[..i], &hostport[i..]),
            None => (hostport, ""),
        }
    };
    if !valid_optional_port(colon_port) {
        return Err(format!(
            "invalid port {colon_port:?} after host",
            colon_port = Untrusted(colon_port)
        ));
    }
    if host
        .chars()
        .any(|c| c.is_ascii() && !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:%".contains(c)))
    {
        return Err("invalid character in host name".into());
    }
    let port = colon_port.strip_prefix(':').map(str::to_owned);
    Ok((unescape(host)?, port))
}

/// Percent-decoding; a `%` not followed by two hex digits is an error, as in Go.
fn unescape(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: u8| (b as char).to_digit(16);
            match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err("invalid percent-escape".into()),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-escapes that are not UTF-8".to_owned())
}

/// One `NO_PROXY` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    /// `*`.
    All,
    /// An IP range.
    Cidr(IpNet),
    /// An IP address, with an optional port.
    Ip(IpAddr, Option<String>),
    /// `.suffix` (leading dot included); `exact` also matches the name without the dot.
    Domain {
        suffix: String,
        port: Option<String>,
        exact: bool,
    },
}

/// A parsed `NO_PROXY` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoProxy {
    rules: Vec<Rule>,
}

impl NoProxy {
    /// Go's `config.init` for `NO_PROXY` (plus client-go's lenient CIDR parsing).
    pub fn parse(list: &str) -> NoProxy {
        let mut rules = Vec::new();
        for raw in list.split(',') {
            // client-go: an untrimmed entry that parses as a CIDR range, leading zeros allowed.
            if let Some(net) = parse_cidr(raw, true) {
                rules.push(Rule::Cidr(net));
                continue;
            }
            let p = raw.trim().to_lowercase();
            if p.is_empty() {
                continue;
            }
            if p == "*" {
                return NoProxy {
                    rules: vec![Rule::All],
                };
            }
            if let Some(net) = parse_cidr(&p, false) {
                rules.push(Rule::Cidr(net));
                continue;
            }
            let (mut host, port) = match split_host_port(&p) {
                Some((h, port)) => {
                    if h.is_empty() {
                        continue;
                    }
                    (h.to_owned(), Some(port.to_owned()))
                }
                None => (p.clone(), None),
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                rules.push(Rule::Ip(canonical(ip), port));
                continue;
            }
            if let Some(stripped) = host.strip_prefix("*.") {
                host = format!(".{stripped}");
            }
            let exact = !host.starts_with('.');
            if exact {
                host = format!(".{host}");
            }
            rules.push(Rule::Domain {
                suffix: host,
                port,
                exact,
            });
        }
        NoProxy { rules }
    }

    /// Go's `useProxy`: whether a connection to `host` (no brackets) and `port` goes through
    /// the proxy.
    pub fn use_proxy(&self, host: &str, port: &str) -> bool {
        if host == "localhost" {
            return false;
        }
        // Go parses zoned IPv6 addresses (`fe80::1%eth0`) and then ignores the zone.
        let ip = host
            .parse::<IpAddr>()
            .ok()
            .or_else(|| {
                let (addr, _zone) = host.split_once('%')?;
                addr.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
            })
            .map(canonical);
        if ip.is_some_and(|ip| ip.is_loopback()) {
            return false;
        }
        let host = host.trim().to_lowercase();
        !self.rules.iter().any(|rule| match rule {
            Rule::All => true,
            Rule::Cidr(net) => ip.is_some_and(|ip| net.contains(&ip)),
            Rule::Ip(want, want_port) => {
                ip == Some(*want) && want_port.as_deref().is_none_or(|p| p == port)
            }
            Rule::Domain {
                suffix,
                port: want_port,
                exact,
            } => {
                ip.is_none()
                    && (host.ends_with(suffix.as_str()) || (*exact && host == suffix[1..]))
                    && want_port.as_deref().is_none_or(|p| p == port)
            }
        })
    }
}

/// IPv4-mapped IPv6 addresses are IPv4 addresses, as in Go.
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Go's `net.SplitHostPort` for `host:port` and `[v6]:port` (`None` when there is no port).
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return Some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    if host.contains(':') {
        return None; // "too many colons": a bare IPv6 address
    }
    Some((host, port))
}

/// `ip/bits`; with `lenient`, IPv4 octets may have leading zeros (client-go's
/// `ParseCIDRSloppy`).
fn parse_cidr(s: &str, lenient: bool) -> Option<IpNet> {
    let (addr, bits) = s.split_once('/')?;
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let ip = if lenient && !addr.contains(':') {
        let octets: Vec<u8> = addr
            .split('.')
            .map(|o| {
                if o.is_empty() || o.len() > 3 || !o.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    o.parse::<u8>().ok()
                }
            })
            .collect::<Option<Vec<u8>>>()?;
        let [a, b, c, d] = <[u8; 4]>::try_from(octets).ok()?;
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    } else {
        addr.parse().ok()?
    };
    // Fails on a prefix longer than the address.
    IpNet::new(ip, bits).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of a request URL, through the same parser (Go's tests parse it with url.Parse).
    fn target(url: &str) -> Target {
        let u = parse_url(url).unwrap();
        Target {
            scheme: u.scheme,
            host: u.host,
            port: u.port.and_then(|p| p.parse().ok()),
        }
    }

    fn env(http: &str, https: &str, no: &str, cgi: bool) -> ProxyEnv {
        let some = |name: &'static str, v: &str| (!v.is_empty()).then(|| (name, v.to_owned()));
        ProxyEnv {
            http_proxy: some("HTTP_PROXY", http),
            https_proxy: some("HTTPS_PROXY", https),
            no_proxy: (!no.is_empty()).then(|| no.to_owned()),
            cgi,
        }
    }

    /// golang.org/x/net/http/httpproxy proxy_test.go, `proxyForURLTests`: (HTTP_PROXY,
    /// HTTPS_PROXY, NO_PROXY, CGI, request URL ("" = http://example.com), the proxy Go chooses
    /// or "<nil>" or the error).
    const GO_PROXY_FOR_URL: &[(&str, &str, &str, bool, &str, &str)] = &[
        ("127.0.0.1:8080", "", "", false, "", "http://127.0.0.1:8080"),
        (
            "cache.corp.example.com:1234",
            "",
            "",
            false,
            "",
            "http://cache.corp.example.com:1234",
        ),
        (
            "cache.corp.example.com",
            "",
            "",
            false,
            "",
            "http://cache.corp.example.com",
        ),
        // A single-label name is taken for a scheme by url.Parse.
        ("localhost", "", "", false, "", "http://localhost"),
        (
            "https://cache.corp.example.com",
            "",
            "",
            false,
            "",
            "https://cache.corp.example.com",
        ),
        (
            "http://127.0.0.1:8080",
            "",
            "",
            false,
            "",
            "http://127.0.0.1:8080",
        ),
        (
            "https://127.0.0.1:8080",
            "",
            "",
            false,
            "",
            "https://127.0.0.1:8080",
        ),
        (
            "socks5://127.0.0.1",
            "",
            "",
            false,
            "",
            "socks5://127.0.0.1",
        ),
        // Unknown schemes are kept (and refused when dialling).
        ("foo://host", "", "", false, "", "foo://host"),
        // HTTPS_PROXY is not used for http…
        (
            "http.proxy.tld",
            "secure.proxy.tld",
            "",
            false,
            "http://insecure.tld/",
            "http://http.proxy.tld",
        ),
        // …and is for https.
        (
            "http.proxy.tld",
            "secure.proxy.tld",
            "",
            false,
            "https://secure.tld/",
            "http://secure.proxy.tld",
        ),
        (
            "http.proxy.tld",
            "https://secure.proxy.tld",
            "",
            false,
            "https://secure.tld/",
            "https://secure.proxy.tld",
        ),
        (
            "http.proxy.tld",
            "",
            "",
            false,
            "https://secure.tld/",
            "<nil>",
        ),
        (
            "http.proxy.tld",
            "",
            "",
            false,
            "ftp://insecure.tld/",
            "<nil>",
        ),
        // HTTP_PROXY in a CGI environment may be attacker-controlled.
        ("http://10.1.2.3:8080", "", "", true, "", "error"),
        // HTTPS_PROXY is still used there.
        (
            "",
            "https://secure.proxy.tld",
            "",
            true,
            "https://secure.tld/",
            "https://secure.proxy.tld",
        ),
        ("", "", "", false, "", "<nil>"),
        (
            "proxy",
            "",
            "example.com",
            false,
            "http://example.com/",
            "<nil>",
        ),
        (
            "proxy",
            "",
            ".example.com",
            false,
            "http://example.com/",
            "http://proxy",
        ),
        (
            "proxy",
            "",
            "ample.com",
            false,
            "http://example.com/",
            "http://proxy",
        ),
        (
            "proxy",
            "",
            "example.com",
            false,
            "http://foo.example.com/",
            "<nil>",
        ),
        (
            "proxy",
            "",
            ".foo.com",
            false,
            "http://example.com/",
            "http://proxy",
        ),
        (
            "proxy",
            "",
            ".示例.com",
            false,
            "http://www.示例.com",
            "<nil>",
        ),
        // Go converts Unicode names to punycode on both sides first; these two differ here
        // (see the module documentation).
        (
            "proxy",
            "",
            "xn--fsq092h.com",
            false,
            "http://www.示例.com",
            "http://proxy",
        ),
        (
            "proxy",
            "",
            "示例.com",
            false,
            "http://www.xn--fsq092h.com",
            "http://proxy",
        ),
        // A zoned IPv6 address is an address, not a name under example.com.
        (
            "proxy",
            "",
            "example.com",
            false,
            "http://[1000::%25.example.com]:123",
            "http://proxy",
        ),
    ];

    #[test]
    fn the_environment_rules_choose_what_gos_proxy_func_chooses() {
        for (http, https, no, cgi, req, want) in GO_PROXY_FOR_URL {
            let req = if req.is_empty() {
                "http://example.com"
            } else {
                req
            };
            let got = match from_environment(&target(req), &env(http, https, no, *cgi)) {
                Ok(Some(p)) => p.url.to_string(),
                Ok(None) => "<nil>".to_owned(),
                Err(_) => "error".to_owned(),
            };
            assert_eq!(
                &got, want,
                "HTTP_PROXY={http:?} HTTPS_PROXY={https:?} NO_PROXY={no:?} cgi={cgi} req={req:?}"
            );
        }
    }

    /// proxy_test.go, `UseProxyTests` against its `noProxy` list (each host with port 80).
    const GO_NO_PROXY: &str = "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64";
    const GO_USE_PROXY: &[(&str, bool)] = &[
        // Never proxy localhost.
        ("localhost", false),
        ("127.0.0.1", false),
        ("127.0.0.2", false),
        ("[::1]", false),
        ("[::2]", true),                       // not a loopback address
        ("192.168.1.1", false),                // matches exact IPv4
        ("192.168.1.2", true),                 // ports do not match
        ("192.168.1.3", false),                // matches exact IPv4:port
        ("192.168.1.4", true),                 // no match
        ("10.0.0.2", false),                   // matches IPv4/CIDR
        ("[2001:db8::52:0:1]", false),         // matches exact IPv6
        ("[2001:db8::52:0:2]", true),          // no match
        ("[2001:db8::52:0:3]", false),         // matches exact [IPv6]:port
        ("[2002:db8:a::123]", false),          // matches IPv6/CIDR
        ("[fe80::424b:c8be:1643:a1b6]", true), // no match
        ("barbaz.net", true),                  // does not match as .barbaz.net
        ("www.barbaz.net", false),             // does match as .barbaz.net
        ("foobar.com", false),                 // does match as foobar.com
        ("www.foobar.com", false),             // match because NO_PROXY includes "foobar.com"
        ("foofoobar.com", true),               // not match as a part of foobar.com
        ("baz.com", true),                     // not match as a part of barbaz.com
        ("localhost.net", true),               // not match as suffix of address
        ("local.localhost", true),             // not match as prefix as address
        ("barbarbaz.net", true),               // not match, wrong domain
        ("wildcard.io", true),                 // does not match as *.wildcard.io
        ("nested.wildcard.io", false),         // match as *.wildcard.io
        ("awildcard.io", true),                // not a match because of '*'
    ];

    fn strip(host: &str) -> &str {
        host.trim_start_matches('[').trim_end_matches(']')
    }

    #[test]
    fn no_proxy_matches_what_gos_use_proxy_matches() {
        let rules = NoProxy::parse(GO_NO_PROXY);
        for (host, proxied) in GO_USE_PROXY {
            assert_eq!(rules.use_proxy(strip(host), "80"), *proxied, "{host}");
        }
    }

    #[test]
    fn a_star_exempts_every_host_and_a_malformed_entry_none() {
        let all = NoProxy::parse("*");
        for (host, _) in GO_USE_PROXY {
            assert!(!all.use_proxy(strip(host), "80"), "{host}");
        }
        // proxy_test.go TestInvalidNoProxy: ":1" is ignored (and does not panic).
        assert!(NoProxy::parse(":1").use_proxy("example.com", "80"));
    }

    #[test]
    fn client_go_also_reads_cidr_ranges_with_leading_zeros() {
        let rules = NoProxy::parse("010.000.0.0/8");
        assert!(!rules.use_proxy("10.1.2.3", "443"));
        // …but only untrimmed (client-go splits on commas without trimming; Go rejects the
        // leading zeros).
        assert!(NoProxy::parse("a, 010.000.0.0/8").use_proxy("10.1.2.3", "443"));
    }

    #[test]
    fn ports_in_no_proxy_entries_must_match_the_servers_port() {
        let rules = NoProxy::parse("api.corp:6443, 10.0.0.1:443");
        assert!(!rules.use_proxy("api.corp", "6443"));
        assert!(rules.use_proxy("api.corp", "443"));
        assert!(!rules.use_proxy("10.0.0.1", "443"));
        assert!(rules.use_proxy("10.0.0.1", "6443"));
    }

    #[test]
    fn names_match_case_insensitively_and_never_match_addresses() {
        let rules = NoProxy::parse("Corp.Example, 0");
        assert!(!rules.use_proxy("API.corp.example", "443"));
        assert!(rules.use_proxy("10.0.0.0", "443"));
    }

    fn server(url: &str) -> Target {
        Target::from_uri(&url.parse().unwrap())
    }

    #[test]
    fn the_kubeconfigs_proxy_url_wins_even_for_loopback_and_no_proxy() {
        let e = env("", "http://env-proxy:1", "*", false);
        let p = select(
            Some("socks5://u:p@sock:1080"),
            &server("https://127.0.0.1:6443"),
            &e,
        )
        .unwrap()
        .unwrap();
        assert_eq!(p.url.to_string(), "socks5://sock:1080");
        assert_eq!(p.source, Source::Kubeconfig);
        assert_eq!(
            p.url.user,
            Some(Credentials {
                username: "u".into(),
                password: Some("p".into())
            })
        );
        // An empty proxy-url is unset.
        assert_eq!(
            select(Some(""), &server("https://10.0.0.1"), &e).unwrap(),
            None
        );
    }

    #[test]
    fn the_kubeconfigs_proxy_url_accepts_kubectls_schemes_only() {
        let e = ProxyEnv::default();
        let s = server("https://10.0.0.1:6443");
        for ok in ["http://p:3128", "https://p", "socks5://p:1080"] {
            assert!(select(Some(ok), &s, &e).unwrap().is_some(), "{ok}");
        }
        assert_eq!(
            select(Some("socks5h://p:1080"), &s, &e)
                .unwrap_err()
                .to_string(),
            "the cluster's proxy-url is not valid: unsupported scheme \"socks5h\", must be http, https, or socks5"
        );
        // "proxy:3128" has the scheme "proxy" to Go as well.
        assert!(select(Some("proxy:3128"), &s, &e).is_err());
        assert!(select(Some("http://p:port"), &s, &e).is_err());
    }

    #[test]
    fn https_servers_use_https_proxy_and_http_servers_http_proxy() {
        let e = env("http://plain:1", "http://secure:2", "", false);
        let chosen = |url: &str| {
            select(None, &server(url), &e)
                .unwrap()
                .map(|p| p.to_string())
        };
        assert_eq!(
            chosen("https://api.corp:6443").as_deref(),
            Some("http://secure:2 (HTTPS_PROXY)")
        );
        assert_eq!(
            chosen("http://api.corp:8080").as_deref(),
            Some("http://plain:1 (HTTP_PROXY)")
        );
        assert_eq!(chosen("https://localhost:6443"), None);
        assert_eq!(chosen("https://[::1]:6443"), None);
    }

    #[test]
    fn upper_case_variables_win_unless_empty() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            ProxyEnv::from_lookup(|k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let e = vars(&[
            ("HTTPS_PROXY", "a:1"),
            ("https_proxy", "b:2"),
            ("no_proxy", "x"),
        ]);
        assert_eq!(e.https_proxy, Some(("HTTPS_PROXY", "a:1".to_owned())));
        assert_eq!(e.no_proxy.as_deref(), Some("x"));
        let e = vars(&[
            ("HTTPS_PROXY", ""),
            ("https_proxy", "b:2"),
            ("REQUEST_METHOD", "GET"),
        ]);
        assert_eq!(e.https_proxy, Some(("https_proxy", "b:2".to_owned())));
        assert!(e.cgi);
    }

    #[test]
    fn a_malformed_url_with_credentials_is_not_quoted_back() {
        let e = parse_url("socks5://user:hunter2/secret@proxy:1080").unwrap_err();
        assert_eq!(e, "invalid port after host");
        // Without credentials the port is quoted, as Go does.
        let e = parse_url("http://proxy:80a").unwrap_err();
        assert_eq!(e, "invalid port \":80a\" after host");
    }

    #[test]
    fn credentials_are_decoded_and_never_displayed() {
        let u = parse_url("http://al%40ice:p%3Ass@proxy.corp:3128/").unwrap();
        assert_eq!(u.to_string(), "http://proxy.corp:3128");
        assert_eq!(format!("{u:?}"), "ProxyUrl(http://proxy.corp:3128)");
        let c = u.user.unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_deref()),
            ("al@ice", Some("p:ss"))
        );
        assert_eq!(format!("{c:?}"), "Credentials(…)");
        let e = env("", "http://u:secret@p:1", "", false);
        assert!(!format!("{e:?}").contains("secret"));
        // A password with an unescaped '@' still parses (the last '@' ends it), as in Go.
        let u = parse_url("http://u:p@ss@proxy:1").unwrap();
        assert_eq!(u.user.unwrap().password.as_deref(), Some("p@ss"));
        assert_eq!(u.host, "proxy");
    }

    #[test]
    fn default_ports_are_gos() {
        let port = |u: &str| parse_url(u).unwrap().port_or_default();
        assert_eq!(port("http://p"), Some(80));
        assert_eq!(port("https://p"), Some(443));
        assert_eq!(port("socks5://p"), Some(1080));
        assert_eq!(port("socks5://p:9050"), Some(9050));
        assert_eq!(port("http://[::1]:3128"), Some(3128));
        assert_eq!(
            parse_url("http://[::1]:3128").unwrap().to_string(),
            "http://[::1]:3128"
        );
    }
}
