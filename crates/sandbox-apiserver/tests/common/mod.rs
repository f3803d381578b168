//! A small blocking HTTP/1.1 client (rustls when the sandbox serves TLS) for the integration
//! tests: one connection per request, `Connection: close`, chunked bodies decoded.
#![allow(clippy::unwrap_used, dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandbox_apiserver::{Identity, Sandbox};
use serde_json::Value;

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

trait Io: Read + Write + Send {}
impl<T: Read + Write + Send> Io for T {}

pub struct Conn {
    io: Box<dyn Io>,
    buf: Vec<u8>,
}

fn tls_config(ca_der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca_der.to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

impl Conn {
    pub fn open(sb: &Sandbox) -> Conn {
        let mut tcp = TcpStream::connect(sb.addr()).unwrap();
        let io: Box<dyn Io> = match sb.ca_der() {
            Some(ca) => {
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
                let mut conn = rustls::ClientConnection::new(tls_config(ca), name).unwrap();
                // The handshake gets a generous bound of its own: on a busy machine it can take
                // longer than the short read timeout the body reads poll with.
                tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                while conn.is_handshaking() {
                    conn.complete_io(&mut tcp).unwrap();
                }
                tcp.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                Box::new(rustls::StreamOwned::new(conn, tcp))
            }
            None => {
                tcp.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                Box::new(tcp)
            }
        };
        Conn {
            io,
            buf: Vec::new(),
        }
    }

    pub fn send(
        &mut self,
        token: Option<&str>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) {
        let mut req =
            format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        if let Some(t) = token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let mut has_ua = false;
        for (k, v) in headers {
            has_ua |= k.eq_ignore_ascii_case("user-agent");
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !has_ua {
            req.push_str("User-Agent: curl/8.5.0\r\n");
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        req.push_str("\r\n");
        self.io.write_all(req.as_bytes()).unwrap();
        if let Some(b) = body {
            self.io.write_all(b).unwrap();
        }
        self.io.flush().unwrap();
    }

    /// Read whatever arrives until `deadline` or EOF; `true` at EOF.
    fn fill_until(&mut self, deadline: Instant) -> bool {
        let mut tmp = [0u8; 16384];
        loop {
            if Instant::now() >= deadline {
                return false;
            }
            match self.io.read(&mut tmp) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return true,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// Read the status line and headers (waiting up to `timeout`).
    pub fn read_head(&mut self, timeout: Duration) -> Option<(u16, Vec<(String, String)>)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                self.buf.drain(..pos + 4);
                let mut lines = head.split("\r\n");
                let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
                let headers = lines
                    .filter_map(|l| {
                        l.split_once(':')
                            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    })
                    .collect();
                return Some((status, headers));
            }
            if self.fill_until(deadline.min(Instant::now() + Duration::from_millis(100)))
                && !self.buf.windows(4).any(|w| w == b"\r\n\r\n")
            {
                return None;
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// The decoded body received within `timeout` (or until the end of the response).
    pub fn read_body(&mut self, headers: &[(String, String)], timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        let chunked = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        let length: Option<usize> = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok());
        let mut out = Vec::new();
        loop {
            if chunked {
                // Decode complete chunks in the buffer.
                while let Some(line_end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    let size_text = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
                    let size =
                        usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                            .unwrap_or(0);
                    if size == 0 {
                        return out;
                    }
                    if self.buf.len() < line_end + 2 + size + 2 {
                        break;
                    }
                    out.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
                    self.buf.drain(..line_end + 2 + size + 2);
                }
            } else if let Some(len) = length
                && self.buf.len() >= len
            {
                out.extend_from_slice(&self.buf[..len]);
                self.buf.drain(..len);
                return out;
            }
            let eof = self.fill_until(deadline.min(Instant::now() + Duration::from_millis(100)));
            if eof || Instant::now() >= deadline {
                if !chunked {
                    out.append(&mut self.buf);
                }
                return out;
            }
        }
    }
}

/// One request, whole response.
pub fn request(
    sb: &Sandbox,
    token: Option<&str>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    let mut c = Conn::open(sb);
    c.send(token, method, path, headers, body);
    let (status, headers) = c
        .read_head(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no response to {method} {path}"));
    let body = c.read_body(&headers, Duration::from_secs(20));
    Resp {
        status,
        headers,
        body,
    }
}

pub fn admin(sb: &Sandbox) -> String {
    sb.token(Identity::Admin)
}

pub fn get(sb: &Sandbox, path: &str) -> Resp {
    request(sb, Some(&admin(sb)), "GET", path, &[], None)
}

pub fn send_json(sb: &Sandbox, method: &str, path: &str, content_type: &str, body: &Value) -> Resp {
    let bytes = serde_json::to_vec(body).unwrap();
    request(
        sb,
        Some(&admin(sb)),
        method,
        path,
        &[("Content-Type", content_type)],
        Some(&bytes),
    )
}

/// A scratch directory removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let d = std::env::temp_dir().join(format!(
            "sandbox-apiserver-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
