//! The token service of a registry run with distribution's `auth: token`: a small HTTP server of
//! the tests' own that answers `GET /token?service=…&scope=…` with a JWT the registry accepts
//! (ES256, signed by a key whose self-signed certificate is the registry's `rootcertbundle`,
//! named in the token's `x5c` header), as Docker Hub's, GHCR's or Harbor's token services do.
//!
//! Who gets what: [`USER`]/[`PASSWORD`] (Basic) may pull every repository; anonymous requests
//! may pull the repositories named public, and get a token without access to the others (the
//! registry then answers `401 insufficient_scope`, as Docker Hub does); wrong credentials get
//! `401` from the token service itself.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcgen::{CertificateParams, DnType, KeyPair, SigningKey as _};
use serde_json::{Value, json};

pub use super::registry::{PASSWORD, USER};

/// The registry's `auth.token.service` and the tokens' audience.
pub const SERVICE: &str = "appupdate-test-registry";
/// The registry's `auth.token.issuer` and the tokens' issuer.
pub const ISSUER: &str = "appupdate-test-token-service";

/// One request the token service answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// `anonymous`, the user whose credentials were right, or `wrong:<user>`.
    pub who: String,
    /// The `service` asked for.
    pub service: String,
    /// The `scope`s asked for.
    pub scopes: Vec<String>,
    /// The status answered.
    pub status: u16,
}

struct Signer {
    key: KeyPair,
    /// The certificate (DER) of `key`, in every token's `x5c`.
    cert: Vec<u8>,
}

pub struct TokenService {
    pub addr: SocketAddr,
    /// The certificate of the signing key, PEM: the registry's `rootcertbundle`.
    pub root_cert_bundle: PathBuf,
    signer: Arc<Signer>,
    asked: Arc<Mutex<Vec<Asked>>>,
    issued: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl TokenService {
    /// Serves on a free loopback port; anonymous pulls are allowed of `public` only.
    pub fn start(public: &[&str]) -> TokenService {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "appupdate test token signer");
        let key = KeyPair::generate().expect("a P-256 key");
        let cert = params.self_signed(&key).expect("a certificate");
        let dir = tempfile::tempdir().expect("temp dir");
        let root_cert_bundle = dir.path().join("token-signer.pem");
        std::fs::write(&root_cert_bundle, cert.pem()).expect("bundle written");
        let signer = Arc::new(Signer {
            key,
            cert: cert.der().to_vec(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let addr = listener.local_addr().expect("its address");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let issued = Arc::new(Mutex::new(Vec::new()));
        let public: Vec<String> = public.iter().map(|p| (*p).to_owned()).collect();
        let (s, a, i) = (signer.clone(), asked.clone(), issued.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (s, a, i, public) = (s.clone(), a.clone(), i.clone(), public.clone());
                std::thread::spawn(move || answer(stream, &s, &a, &i, &public));
            }
        });
        TokenService {
            addr,
            root_cert_bundle,
            signer,
            asked,
            issued,
            _dir: dir,
        }
    }

    /// The `auth:` section of a registry configuration that trusts this service.
    pub fn registry_auth(&self) -> String {
        format!(
            "auth: {{ token: {{ realm: \"http://{}/token\", service: {SERVICE}, issuer: {ISSUER}, rootcertbundle: {} }} }}\n",
            self.addr,
            self.root_cert_bundle.display()
        )
    }

    /// A token for `subject` with `access` (`(repository, actions)`), as the service issues
    /// them: for the tests' own pushes.
    pub fn mint(&self, subject: &str, access: &[(&str, &[&str])]) -> String {
        let access: Vec<Value> = access
            .iter()
            .map(|(name, actions)| json!({"type": "repository", "name": name, "actions": actions}))
            .collect();
        token(&self.signer, subject, &access)
    }

    /// Every request answered so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    /// Every token issued to a client so far.
    pub fn issued(&self) -> Vec<String> {
        self.issued.lock().unwrap().clone()
    }
}

fn token(signer: &Signer, subject: &str, access: &[Value]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let header = json!({"typ": "JWT", "alg": "ES256", "x5c": [STANDARD.encode(&signer.cert)]});
    let claims = json!({
        "iss": ISSUER, "sub": subject, "aud": SERVICE,
        "exp": now + 3600, "nbf": now - 10, "iat": now,
        "jti": format!("{subject}-{now}-{}", rand_suffix()),
        "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der = signer.key.sign(signing_input.as_bytes()).expect("signed");
    format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(raw_signature(&der))
    )
}

/// A token id part that differs between tokens of the same second.
fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// An ECDSA P-256 signature as JWS wants it (`r || s`, 32 bytes each) from its DER form
/// (`SEQUENCE { INTEGER r, INTEGER s }`), which is what the key signs in.
fn raw_signature(der: &[u8]) -> [u8; 64] {
    assert_eq!(der[0], 0x30, "a DER sequence");
    let mut out = [0u8; 64];
    let mut at = 2;
    for half in 0..2 {
        assert_eq!(der[at], 0x02, "a DER integer");
        let len = der[at + 1] as usize;
        let int = &der[at + 2..at + 2 + len];
        let int = &int[int.iter().take_while(|b| **b == 0).count()..];
        out[half * 32 + 32 - int.len()..(half + 1) * 32].copy_from_slice(int);
        at += 2 + len;
    }
    out
}

/// `%XX` escapes decoded (a query's value as the client encoded it).
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn answer(
    mut stream: TcpStream,
    signer: &Signer,
    asked: &Mutex<Vec<Asked>>,
    issued: &Mutex<Vec<String>>,
    public: &[String],
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let target = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let param = |name: &str| -> Vec<String> {
        query
            .split('&')
            .filter_map(|p| p.split_once('='))
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| percent_decoded(v))
            .collect()
    };
    let basic = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if !k.trim().eq_ignore_ascii_case("authorization") {
            return None;
        }
        let encoded = v.trim().strip_prefix("Basic ")?;
        let text = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
        let (u, p) = text.split_once(':')?;
        Some((u.to_owned(), p.to_owned()))
    });
    let who = match &basic {
        None => "anonymous".to_owned(),
        Some((u, p)) if u == USER && p == PASSWORD => u.clone(),
        Some((u, _)) => format!("wrong:{u}"),
    };
    let scopes = param("scope");
    let service = param("service").into_iter().next().unwrap_or_default();
    let (status, body) = if who.starts_with("wrong:") || !target.starts_with("/token?") {
        (
            401,
            json!({"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]})
                .to_string(),
        )
    } else {
        let access: Vec<Value> = scopes
            .iter()
            .filter_map(|s| {
                let mut parts = s.splitn(3, ':');
                let (kind, name, _actions) = (parts.next()?, parts.next()?, parts.next()?);
                let allowed = kind == "repository"
                    && (who != "anonymous" || public.iter().any(|p| p == name));
                allowed.then(|| json!({"type": "repository", "name": name, "actions": ["pull"]}))
            })
            .collect();
        let t = token(signer, &who, &access);
        issued.lock().unwrap().push(t.clone());
        (
            200,
            json!({"token": t, "access_token": t, "expires_in": 3600}).to_string(),
        )
    };
    asked.lock().unwrap().push(Asked {
        who,
        service,
        scopes,
        status,
    });
    let reason = if status == 200 { "OK" } else { "Unauthorized" };
    let _ = stream.write_all(
        format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}
