//! A real container registry on loopback for the image tests: Debian's `docker-registry` (the
//! CNCF distribution registry 2.8), one instance per test on a free port, its storage in a
//! temporary directory; images pushed over the distribution API (blobs, then the manifest or
//! index), with no docker daemon.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;

/// The user of the private instance, and its password.
pub const USER: &str = "tester";
pub const PASSWORD: &str = "s3cret";
/// `tester:s3cret`, bcrypt (cost 4, made once with Python's `crypt`): the registry's htpasswd.
const HTPASSWD: &str = "tester:$2b$04$Q.ywmqKX.TpHdjtzDNFqqezZrOPl1yeS3T9FMt15EUayM4jpex5xS\n";

/// Where the registry binary is; `None` when it is not installed (the tests then say so and
/// pass nothing: `.ci/run` installs it).
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("docker-registry"))
        .find(|p| p.is_file())
}

pub struct Registry {
    pub addr: SocketAddr,
    child: Child,
    /// The registry's access log (its stdout and stderr).
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// `Authorization` for the private instance.
    auth: Option<String>,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    closed_addr().port()
}

/// An address on loopback nothing listens on (a port bound, then let go): a registry that
/// cannot be reached.
pub fn closed_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address")
}

/// The plugin run with the image check as a user has it (no `APPUPDATE_IMAGE_CHECK`: `auto`,
/// unless the arguments say otherwise), with the docker configuration in `docker`, or none.
pub fn checked(
    env: &super::Env,
    docker: Option<&std::path::Path>,
    args: &[&str],
) -> std::process::Output {
    let none = env.dir.path().join("no-docker-config");
    let mut c = env.cmd();
    c.env_remove(super::IMAGE_CHECK_VAR)
        .env("DOCKER_CONFIG", docker.unwrap_or(&none))
        .args(args);
    c.output().expect("binary runs")
}

impl Registry {
    /// A public instance (anyone may pull and push).
    pub fn start() -> Option<Registry> {
        Registry::start_with(false)
    }

    /// An instance behind Basic authentication ([`USER`], [`PASSWORD`]).
    pub fn start_private() -> Option<Registry> {
        Registry::start_with(true)
    }

    /// An instance with distribution's `auth: token`, trusting `tokens`' signer; the tests'
    /// own pushes carry a token it minted with push access to `repositories`.
    pub fn start_token(
        tokens: &super::token_auth::TokenService,
        repositories: &[&str],
    ) -> Option<Registry> {
        let access: Vec<(&str, &[&str])> = repositories
            .iter()
            .map(|r| (*r, &["pull", "push"][..]))
            .collect();
        let header = format!("Bearer {}", tokens.mint("pusher", &access));
        Registry::launch(
            tokens.registry_auth(),
            Some(header),
            tempfile::tempdir().ok()?,
        )
    }

    fn start_with(private: bool) -> Option<Registry> {
        let dir = tempfile::tempdir().expect("temp dir");
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(&htpasswd, HTPASSWD).expect("htpasswd written");
        let auth = if private {
            format!(
                "auth: {{ htpasswd: {{ realm: test-realm, path: {} }} }}\n",
                htpasswd.display()
            )
        } else {
            String::new()
        };
        let header = private.then(|| {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
            )
        });
        Registry::launch(auth, header, dir)
    }

    /// Starts the registry with `auth` (its configuration's `auth:` section, or nothing) and
    /// `header` as the `Authorization` of the tests' own requests.
    fn launch(auth: String, header: Option<String>, dir: tempfile::TempDir) -> Option<Registry> {
        let Some(bin) = binary() else {
            eprintln!(
                "SKIPPED: docker-registry is not installed (apt-get install -y docker-registry)"
            );
            return None;
        };
        let port = free_port();
        let config = format!(
            "version: 0.1\nlog: {{ level: error }}\nstorage: {{ filesystem: {{ rootdirectory: {} }}, delete: {{ enabled: true }} }}\nhttp: {{ addr: 127.0.0.1:{port} }}\n{auth}",
            dir.path().join("data").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("config written");
        let log = dir.path().join("access.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .expect("docker-registry starts");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
        let registry = Registry {
            addr,
            child,
            log,
            _dir: dir,
            auth: header,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(answer) = registry.request("GET", "/v2/", &[], b"") {
                assert!(
                    answer.status == 200 || answer.status == 401,
                    "the registry answers /v2/ with {}",
                    answer.status
                );
                break;
            }
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    /// The requests the registry logged for `GET <path>` (its access log: `"GET <path> HTTP`).
    pub fn gets(&self, path: &str) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.matches(&format!("\"GET {path} HTTP")).count()
    }

    /// `127.0.0.1:PORT/REPO:TAG`.
    pub fn image(&self, repo_tag: &str) -> String {
        format!("{}/{repo_tag}", self.addr)
    }

    /// One HTTP/1.1 request (`Connection: close`), with the private instance's credentials.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Answer> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(auth) = &self.auth {
            head.push_str(&format!("Authorization: {auth}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, _) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers: Vec<(String, String)> = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Ok(Answer { status, headers })
    }

    /// Pushes a blob; its digest.
    pub fn push_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = digest(bytes);
        let start = self
            .request("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], b"")
            .expect("upload started");
        assert_eq!(start.status, 202, "blob upload start");
        let location = start.header("location").expect("an upload location");
        let path = location
            .strip_prefix(&format!("http://{}", self.addr))
            .unwrap_or(location);
        let sep = if path.contains('?') { '&' } else { '?' };
        let put = self
            .request(
                "PUT",
                &format!("{path}{sep}digest={digest}"),
                &[("Content-Type", "application/octet-stream")],
                bytes,
            )
            .expect("blob put");
        assert_eq!(put.status, 201, "blob upload");
        digest
    }

    /// Pushes a manifest (or index) under `reference` (a tag or a digest); its digest.
    pub fn push_manifest(&self, repo: &str, reference: &str, manifest: &Value) -> String {
        let bytes = serde_json::to_vec(manifest).expect("json");
        let media = manifest["mediaType"].as_str().expect("a media type");
        let put = self
            .request(
                "PUT",
                &format!("/v2/{repo}/manifests/{reference}"),
                &[("Content-Type", media)],
                &bytes,
            )
            .expect("manifest put");
        assert_eq!(put.status, 201, "manifest upload of {repo}:{reference}");
        digest(&bytes)
    }

    /// A single-platform image (an OCI manifest whose config names `os/arch`) under `tag`; its
    /// digest.
    pub fn push_single(&self, repo: &str, tag: &str, os: &str, arch: &str) -> String {
        let manifest = self.image_manifest(repo, tag, os, arch);
        self.push_manifest(repo, tag, &manifest)
    }

    fn image_manifest(&self, repo: &str, salt: &str, os: &str, arch: &str) -> Value {
        let config = serde_json::to_vec(&json!({
            "architecture": arch, "os": os,
            "config": {"Labels": {"salt": salt}},
            "rootfs": {"type": "layers", "diff_ids": []}
        }))
        .expect("json");
        let layer = format!("layer of {repo} {salt} {os}/{arch}").into_bytes();
        let config_digest = self.push_blob(repo, &config);
        let layer_digest = self.push_blob(repo, &layer);
        json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}]
        })
    }

    /// A multi-platform image (an OCI index of one manifest per platform, plus an
    /// `unknown/unknown` attestation entry) under `tag`; the index's digest.
    pub fn push_index(&self, repo: &str, tag: &str, platforms: &[(&str, &str)]) -> String {
        let mut entries = Vec::new();
        for (os, arch) in platforms {
            let manifest = self.image_manifest(repo, tag, os, arch);
            let bytes = serde_json::to_vec(&manifest).expect("json");
            let d = self.push_manifest(repo, &digest(&bytes), &manifest);
            entries.push(json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": d, "size": bytes.len(),
                "platform": {"os": os, "architecture": arch}
            }));
        }
        let attestation = self.image_manifest(repo, &format!("{tag}-att"), "unknown", "unknown");
        let bytes = serde_json::to_vec(&attestation).expect("json");
        let d = self.push_manifest(repo, &digest(&bytes), &attestation);
        entries.push(json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": d, "size": bytes.len(),
            "platform": {"os": "unknown", "architecture": "unknown"},
            "annotations": {"vnd.docker.reference.type": "attestation-manifest"}
        }));
        let index = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": entries
        });
        self.push_manifest(repo, tag, &index)
    }
}

pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub fn digest(bytes: &[u8]) -> String {
    let hex: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}
