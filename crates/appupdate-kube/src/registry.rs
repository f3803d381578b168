//! The image check's client: what a tag means in its registry, over the OCI distribution API
//! (`GET /v2/<name>/manifests/<tag>`, then the config blob of a single-platform image), with
//! the credentials docker would use. The pure parts (names, challenges, manifests, the docker
//! config) are [`appupdate_model::image`]'s.
//!
//! Each registry is reached over the API server's connector ([`crate::transport::plain_client`]):
//! TLS checked against the system's trusted roots, HTTP/1.1, the proxy the environment chooses
//! for the registry by kubectl's rules ([`crate::proxy::from_environment`]: `HTTPS_PROXY`,
//! `NO_PROXY`, never for loopback). Plain HTTP only for `localhost`, `127.0.0.0/8`, `::1` and the
//! hosts of `--insecure-registry`.
//!
//! Credentials: none first; on `401` with a `Bearer` challenge, a token from its realm (with the
//! user's Basic credentials when there are some, anonymous otherwise), cached for the image's
//! other requests; on a `Basic` challenge, the user's Basic credentials. Those come from the
//! docker config's `credHelpers`, `auths` or `credsStore`; a helper
//! (`docker-credential-<name> get`) runs only when a registry asks, without a terminal (the
//! server's address on stdin, its answer on stdout, stderr discarded), within
//! [`HELPER_TIMEOUT`].
//!
//! With a key (`--image-key`), the digest's cosign signatures are fetched too, in the same
//! session (its credentials, its bound): the Sigstore bundles among its referrers (the referrers
//! API, else the tag schema's `sha256-<hex>` index), then the `sha256-<hex>.sig` tag; each is
//! judged by [`appupdate_model::cosign`], and the first that verifies ends the search.
//!
//! Bounded: the whole check of one image within [`RegistrySettings::timeout`]; bodies within
//! [`BODY_LIMIT`].
//!
//! With `-v`, every request is one line in [`RegistrySettings::log`], as the cluster's are:
//! method, URL (user information as `…`, and no query but a token request's `service` and
//! `scope`: a storage redirect's query is a credential), what it asked for, status and time.
//! Headers (tokens, Basic credentials) are never logged.

use std::collections::HashMap;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, USER_AGENT, WWW_AUTHENTICATE};
use http::{HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use kube::client::Body;

use crate::probe::reason;
use crate::proxy::{ProxyEnv, Target};
use crate::transport::Connector;
use appupdate_model::cosign::{self, Layout, PublicKey, Unsigned, Verdict};
use appupdate_model::image::{
    self, CredentialSource, DockerConfig, ImageRef, Manifest, Platform, parse_challenge,
};
use appupdate_model::text::Untrusted;

/// The default bound on the check of one image, from the first connection to the last answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound on one run of a credential helper.
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of a manifest, a config blob or a token answer read.
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;

type Plain = Client<Connector, Body>;

/// What the check needs, resolved by the plugin's `settings`.
#[derive(Clone, Debug, Default)]
pub struct RegistrySettings {
    /// `--insecure-registry`: hosts (with their port) spoken to in plain HTTP.
    pub insecure: Vec<String>,
    /// The proxy variables, for kubectl's choice of proxy per registry.
    pub proxy_env: ProxyEnv,
    /// The docker config (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), when
    /// there is one.
    pub docker_config: Option<DockerConfig>,
    /// The bound on the check of one image.
    pub timeout: Duration,
    /// The `User-Agent` sent.
    pub user_agent: String,
    /// Where `-v` logs each request (see the module docs).
    pub log: RequestLogger,
}

/// Where `-v` logs each registry request, one escaped line each (`None`: nowhere).
#[derive(Clone, Default)]
pub struct RequestLogger(pub Option<crate::cluster::RequestLog>);

impl std::fmt::Debug for RequestLogger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(log)"
        } else {
            "None"
        })
    }
}

/// What the registry says a reference is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub image: ImageRef,
    /// The digest of what the tag names: the index's when it is one.
    pub digest: String,
    /// The platforms it runs on (attestations left out).
    pub platforms: Vec<Platform>,
    /// The requests it took (tokens, manifest, config blob, signatures).
    pub requests: u32,
    /// With a key: where a signature by it over [`Resolved::digest`] was found, or why none
    /// was.
    pub signature: Option<Result<Layout, Unsigned>>,
}

/// Why a reference could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// The registry lets us read the repository and says the tag (or digest) is not in it.
    NotFound(String),
    /// The registry does not tell: it asks for credentials we do not have or refuses them
    /// (401, 403), or it does not name the repository to us (`NAME_UNKNOWN`).
    CannotTell(String),
    /// No answer: the connection, TLS, the proxy, the name.
    Unreachable(String),
    /// The check took longer than its bound.
    TimedOut(Duration),
    /// The answer cannot be used (not a manifest, a malformed reference).
    Unusable(String),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::NotFound(why)
            | Unresolved::CannotTell(why)
            | Unresolved::Unreachable(why)
            | Unresolved::Unusable(why) => f.write_str(why),
            Unresolved::TimedOut(d) => {
                write!(f, "the registry did not answer within {}s", d.as_secs_f64())
            }
        }
    }
}

/// Resolves `reference` in its registry (see the module docs), within the settings' bound.
pub async fn resolve(reference: &str, settings: &RegistrySettings) -> Result<Resolved, Unresolved> {
    resolve_signed(reference, settings, None).await
}

/// [`resolve`], and with `key`, the search for a cosign signature by it over the digest found
/// ([`Resolved::signature`]), within the same bound.
pub async fn resolve_signed(
    reference: &str,
    settings: &RegistrySettings,
    key: Option<&PublicKey>,
) -> Result<Resolved, Unresolved> {
    let bound = if settings.timeout.is_zero() {
        DEFAULT_TIMEOUT
    } else {
        settings.timeout
    };
    match tokio::time::timeout(bound, resolve_unbounded(reference, settings, key)).await {
        Ok(r) => r,
        Err(_) => Err(Unresolved::TimedOut(bound)),
    }
}

async fn resolve_unbounded(
    reference: &str,
    settings: &RegistrySettings,
    key: Option<&PublicKey>,
) -> Result<Resolved, Unresolved> {
    let image = ImageRef::parse(reference).map_err(Unresolved::Unusable)?;
    let scheme = if image::plain_http(&image.registry, &settings.insecure) {
        "http"
    } else {
        "https"
    };
    let mut session = Session {
        settings,
        base: format!("{scheme}://{}", image.api_host()),
        registry: image.registry.clone(),
        repository: image.repository.clone(),
        clients: HashMap::new(),
        authorization: None,
        credentials: None,
        requests: 0,
    };
    let shown = Untrusted(image.to_string()).to_string();
    let url = format!(
        "{}/v2/{}/manifests/{}",
        session.base,
        image.repository,
        image.manifest_reference()
    );
    let answer = session.get(&url, image::ACCEPT).await?;
    match answer.status {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND => {
            let codes = image::error_codes(&answer.body);
            if codes.iter().any(|c| c == "NAME_UNKNOWN") {
                return Err(Unresolved::CannotTell(format!(
                    "the registry {} does not know the repository {}{}",
                    Untrusted(&image.registry),
                    Untrusted(&image.repository),
                    session.credentials_note()
                )));
            }
            return Err(Unresolved::NotFound(format!(
                "{shown} does not exist: the registry has no {} {} in {}",
                if image.digest.is_some() {
                    "manifest"
                } else {
                    "tag"
                },
                Untrusted(image.manifest_reference()),
                Untrusted(&image.repository)
            )));
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            return Err(Unresolved::CannotTell(format!(
                "the registry {} refuses to show {} ({}){}",
                Untrusted(&image.registry),
                Untrusted(&image.repository),
                answer.status,
                session.credentials_note()
            )));
        }
        other => {
            return Err(Unresolved::Unreachable(format!(
                "the registry {} answered {other}",
                Untrusted(&image.registry)
            )));
        }
    }
    let digest = answer
        .header_digest
        .clone()
        .filter(|d| d.starts_with("sha256:"))
        .unwrap_or_else(|| cosign::sha256_digest(&answer.body));
    let platforms = match image::parse_manifest(answer.content_type.as_deref(), &answer.body)
        .map_err(Unresolved::Unusable)?
    {
        Manifest::Index { platforms } => platforms,
        Manifest::Image { config } => {
            let url = format!("{}/v2/{}/blobs/{}", session.base, image.repository, config);
            let blob = session.get(&url, "*/*").await?;
            if blob.status != StatusCode::OK {
                return Err(Unresolved::Unusable(format!(
                    "the registry {} has no config blob for {shown} ({})",
                    Untrusted(&image.registry),
                    blob.status
                )));
            }
            image::config_platform(&blob.body).into_iter().collect()
        }
    };
    let signature = match key {
        Some(key) => Some(session.signatures(key, &digest).await?),
        None => None,
    };
    Ok(Resolved {
        image,
        digest,
        platforms,
        requests: session.requests,
        signature,
    })
}

/// An answer, read.
struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    header_digest: Option<String>,
    challenge: Option<String>,
    location: Option<String>,
    body: Vec<u8>,
}

/// The requests of one image's check: one client per origin, the authorization earned.
struct Session<'a> {
    settings: &'a RegistrySettings,
    /// `https://host[:port]` of the registry.
    base: String,
    registry: String,
    repository: String,
    clients: HashMap<String, Plain>,
    /// The `Authorization` the registry accepted (a token, or Basic credentials).
    authorization: Option<HeaderValue>,
    /// The user's credentials for the registry, once looked up (`Some(None)`: none).
    credentials: Option<Option<(String, String)>>,
    requests: u32,
}

impl Session<'_> {
    /// The cosign signatures of `digest` (see the module docs): where one by `key` is, or why
    /// none is. `Err` when the registry does not let them be read.
    async fn signatures(
        &mut self,
        key: &PublicKey,
        digest: &str,
    ) -> Result<Result<Layout, Unsigned>, Unresolved> {
        let mut verdicts: Vec<(Layout, Verdict)> = Vec::new();
        let (layout, index) = self.referrers(digest).await?;
        if let Some(index) = index {
            let listed = match cosign::bundle_referrers(&index) {
                Ok(listed) => listed,
                Err(why) => {
                    verdicts.push((layout, Verdict::Unreadable(why)));
                    Vec::new()
                }
            };
            for referrer in listed.iter().take(cosign::MAX_SIGNATURES) {
                if let Some(verdict) = self.bundle(key, referrer, digest).await? {
                    let verified = verdict == Verdict::Verified;
                    verdicts.push((layout, verdict));
                    if verified {
                        return Ok(Ok(layout));
                    }
                }
            }
        }
        let Some(tag) = cosign::signature_tag(digest) else {
            return Ok(cosign::fold(&verdicts));
        };
        let answer = self.manifest(&tag, cosign::ACCEPT_MANIFEST).await?;
        if let Some(body) = answer {
            match cosign::signature_layers(&body) {
                Ok(layers) => {
                    for layer in layers.iter().take(cosign::MAX_SIGNATURES) {
                        let verdict = match self.blob(&layer.digest).await? {
                            Ok(payload) => cosign::verify_simple_signing(
                                key,
                                &payload,
                                layer.signature.as_deref(),
                                digest,
                            ),
                            Err(why) => Verdict::Unreadable(why),
                        };
                        let verified = verdict == Verdict::Verified;
                        verdicts.push((Layout::Tag, verdict));
                        if verified {
                            return Ok(Ok(Layout::Tag));
                        }
                    }
                }
                Err(why) => verdicts.push((Layout::Tag, Verdict::Unreadable(why))),
            }
        }
        Ok(cosign::fold(&verdicts))
    }

    /// The referrers of `digest`: the referrers API's index, else (a registry without the API:
    /// 404, 400, 406, or an answer that is not an index) the tag schema's index at
    /// `sha256-<hex>`; `None` when neither lists anything.
    async fn referrers(&mut self, digest: &str) -> Result<(Layout, Option<Vec<u8>>), Unresolved> {
        let url = format!("{}/v2/{}/referrers/{digest}", self.base, self.repository);
        let answer = self.get(&url, cosign::ACCEPT_INDEX).await?;
        match answer.status {
            StatusCode::OK
                if answer
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.starts_with(cosign::ACCEPT_INDEX)) =>
            {
                return Ok((Layout::BundleReferrers, Some(answer.body)));
            }
            StatusCode::OK
            | StatusCode::NOT_FOUND
            | StatusCode::BAD_REQUEST
            | StatusCode::NOT_ACCEPTABLE => {}
            status => return Err(self.refused("its referrers", status)),
        }
        let Some(tag) = cosign::referrers_tag(digest) else {
            return Ok((Layout::BundleTag, None));
        };
        Ok((
            Layout::BundleTag,
            self.manifest(&tag, cosign::ACCEPT_INDEX).await?,
        ))
    }

    /// A referrer's bundle, judged; `None` when the referrer is not a bundle.
    async fn bundle(
        &mut self,
        key: &PublicKey,
        referrer: &str,
        digest: &str,
    ) -> Result<Option<Verdict>, Unresolved> {
        if !cosign::is_sha256_digest(referrer) {
            return Ok(Some(Verdict::Unreadable(format!(
                "a referrer's digest {:?} is not a sha256 digest",
                Untrusted(referrer)
            ))));
        }
        let Some(manifest) = self.manifest(referrer, cosign::ACCEPT_MANIFEST).await? else {
            return Ok(Some(Verdict::Unreadable(format!(
                "the referrer {} is listed but not in the registry",
                Untrusted(referrer)
            ))));
        };
        if cosign::sha256_digest(&manifest) != referrer {
            return Ok(Some(Verdict::Unreadable(format!(
                "the registry's manifest {} does not have that digest",
                Untrusted(referrer)
            ))));
        }
        let Some(layer) = cosign::bundle_layer(&manifest) else {
            return Ok(None);
        };
        Ok(Some(match self.blob(&layer).await? {
            Ok(bundle) => cosign::verify_bundle(key, &bundle, digest),
            Err(why) => Verdict::Unreadable(why),
        }))
    }

    /// A manifest of the repository by tag or digest; `None` when the registry has none.
    async fn manifest(
        &mut self,
        reference: &str,
        accept: &str,
    ) -> Result<Option<Vec<u8>>, Unresolved> {
        let url = format!("{}/v2/{}/manifests/{reference}", self.base, self.repository);
        let answer = self.get(&url, accept).await?;
        match answer.status {
            StatusCode::OK => Ok(Some(answer.body)),
            StatusCode::NOT_FOUND => Ok(None),
            status => Err(self.refused(&format!("the manifest {}", Untrusted(reference)), status)),
        }
    }

    /// A blob of the repository, checked against its digest; `Err(why)` (inner) when it is
    /// missing or is not what its digest says.
    async fn blob(&mut self, digest: &str) -> Result<Result<Vec<u8>, String>, Unresolved> {
        if !cosign::is_sha256_digest(digest) {
            return Ok(Err(format!(
                "a blob's digest {:?} is not a sha256 digest",
                Untrusted(digest)
            )));
        }
        let url = format!("{}/v2/{}/blobs/{digest}", self.base, self.repository);
        let answer = self.get(&url, "*/*").await?;
        match answer.status {
            StatusCode::OK if cosign::sha256_digest(&answer.body) == digest => Ok(Ok(answer.body)),
            StatusCode::OK => Ok(Err(format!(
                "the registry's blob {} does not have that digest",
                Untrusted(digest)
            ))),
            StatusCode::NOT_FOUND => Ok(Err(format!(
                "the blob {} is not in the registry",
                Untrusted(digest)
            ))),
            status => Err(self.refused(&format!("the blob {}", Untrusted(digest)), status)),
        }
    }

    /// A signature request the registry did not answer: it refuses (cannot tell) or fails.
    fn refused(&self, what: &str, status: StatusCode) -> Unresolved {
        let registry = Untrusted(&self.registry);
        let repository = Untrusted(&self.repository);
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Unresolved::CannotTell(format!(
                "the registry {registry} refuses to show {what} in {repository} ({status}){}",
                self.credentials_note()
            )),
            status => Unresolved::Unreachable(format!(
                "the registry {registry} answered {status} for {what} in {repository}"
            )),
        }
    }

    /// What a refusal says about the credentials.
    fn credentials_note(&self) -> &'static str {
        match &self.credentials {
            Some(Some(_)) => " with the credentials of the docker config",
            _ => " without credentials (none in the docker config)",
        }
    }

    /// GET `url`, answering the registry's challenge once, following a redirect (a blob's
    /// storage) up to three times without our credentials when it leaves the registry.
    async fn get(&mut self, url: &str, accept: &str) -> Result<Answer, Unresolved> {
        let mut answer = self.send(url, accept, self.authorization.clone()).await?;
        if answer.status == StatusCode::UNAUTHORIZED
            && let Some(challenge) = answer.challenge.as_deref().and_then(parse_challenge)
            && let Some(authorization) = self.answer_challenge(&challenge).await?
        {
            answer = self.send(url, accept, Some(authorization.clone())).await?;
            if answer.status != StatusCode::UNAUTHORIZED {
                self.authorization = Some(authorization);
            }
        }
        let mut hops = 0;
        while answer.status.is_redirection() && hops < 3 {
            let Some(location) = answer.location.clone() else {
                break;
            };
            let next = if location.starts_with('/') {
                format!("{}{location}", self.base)
            } else {
                location
            };
            let same = next.starts_with(&format!("{}/", self.base));
            let authorization = if same {
                self.authorization.clone()
            } else {
                None
            };
            answer = self.send(&next, accept, authorization).await?;
            hops += 1;
        }
        Ok(answer)
    }

    /// The `Authorization` a challenge asks for, when we can give one.
    async fn answer_challenge(
        &mut self,
        challenge: &image::Challenge,
    ) -> Result<Option<HeaderValue>, Unresolved> {
        let credentials = self.credentials().await;
        if challenge.scheme.eq_ignore_ascii_case("basic") {
            return Ok(credentials.map(|(u, p)| basic(&u, &p)));
        }
        if !challenge.scheme.eq_ignore_ascii_case("bearer") {
            return Ok(None);
        }
        let Some(realm) = challenge.params.get("realm") else {
            return Ok(None);
        };
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(service) = challenge.params.get("service") {
            query.push(("service".into(), service.clone()));
        }
        let scope = challenge
            .params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{}:pull", self.repository));
        query.push(("scope".into(), scope));
        let encoded: Vec<String> = query
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                )
            })
            .collect();
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", encoded.join("&"));
        if !url.starts_with("https://") && !url.starts_with("http://") {
            return Ok(None);
        }
        let answer = self
            .send(
                &url,
                "application/json",
                credentials.map(|(u, p)| basic(&u, &p)),
            )
            .await?;
        if answer.status != StatusCode::OK {
            return Ok(None);
        }
        let token: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|_| {
            Unresolved::Unusable(format!(
                "the token service of {} did not answer with JSON",
                Untrusted(&self.registry)
            ))
        })?;
        let token = token
            .get("token")
            .or_else(|| token.get("access_token"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        if token.is_empty() {
            return Ok(None);
        }
        Ok(HeaderValue::from_str(&format!("Bearer {token}")).ok())
    }

    /// The user's credentials for the registry, looked up once.
    async fn credentials(&mut self) -> Option<(String, String)> {
        if let Some(known) = &self.credentials {
            return known.clone();
        }
        let found = match self
            .settings
            .docker_config
            .as_ref()
            .and_then(|c| c.credentials_for(&self.registry))
        {
            None => None,
            Some(CredentialSource::Basic { username, password }) => Some((username, password)),
            Some(CredentialSource::Helper(name)) => run_helper(&name, &self.registry).await,
        };
        self.credentials = Some(found.clone());
        found
    }

    async fn send(
        &mut self,
        url: &str,
        accept: &str,
        authorization: Option<HeaderValue>,
    ) -> Result<Answer, Unresolved> {
        let uri: http::Uri = url.parse().map_err(|_| {
            Unresolved::Unusable(format!("{:?} is not a valid URL", Untrusted(url)))
        })?;
        let origin = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map(|a| a.as_str()).unwrap_or_default()
        );
        let target = Target::from_uri(&uri);
        let proxy = crate::proxy::from_environment(&target, &self.settings.proxy_env)
            .map_err(|e| Unresolved::Unreachable(e.to_string()))?;
        if !self.clients.contains_key(&origin) {
            let origin_uri: http::Uri = origin.parse().map_err(|_| {
                Unresolved::Unusable(format!("{:?} is not a valid URL", Untrusted(url)))
            })?;
            let mut config = kube::Config::new(origin_uri);
            config.connect_timeout = Some(self.settings.timeout.max(Duration::from_secs(1)));
            // Reading the system's trusted roots takes tens of milliseconds of CPU: on a
            // thread of its own, so that the cluster's requests go on meanwhile.
            let for_client = proxy.clone();
            let client = tokio::task::spawn_blocking(move || {
                crate::transport::plain_client(&config, for_client.as_ref()).map_err(|e| {
                    appupdate_model::text::one_line(
                        &appupdate_model::text::error_chain(&e).join(": "),
                    )
                })
            })
            .await
            .map_err(|_| Unresolved::Unusable("the client was not set up".into()))?
            .map_err(|e| Unresolved::Unreachable(format!("cannot set up TLS: {e}")))?;
            self.clients.insert(origin.clone(), client);
        }
        let Some(client) = self.clients.get(&origin) else {
            return Err(Unresolved::Unusable("no client".into()));
        };
        let mut builder = Request::get(uri).header(ACCEPT, accept);
        if let Ok(agent) = HeaderValue::from_str(&self.settings.user_agent) {
            builder = builder.header(USER_AGENT, agent);
        }
        if let Some(auth) = authorization {
            builder = builder.header(AUTHORIZATION, auth);
        }
        if origin.starts_with("http://")
            && let Some(auth) = proxy
                .as_ref()
                .filter(|p| matches!(p.url.scheme.as_str(), "http" | "https"))
                .and_then(|p| crate::proxy_connector::basic_authorization(&p.url))
        {
            builder = builder.header(http::header::PROXY_AUTHORIZATION, auth);
        }
        let request = builder
            .body(Body::empty())
            .map_err(|_| Unresolved::Unusable("the request cannot be built".into()))?;
        self.requests += 1;
        let started = std::time::Instant::now();
        let logged = |outcome: &str| {
            if let Some(log) = &self.settings.log.0 {
                log(&format!(
                    "  GET {} (registry {}): {outcome} in {} ms",
                    Untrusted(logged_url(url)),
                    requested(url),
                    started.elapsed().as_millis()
                ));
            }
        };
        let response = client.request(request).await.map_err(|e| {
            let why = reason(&e);
            logged(&format!("failed ({why})"));
            Unresolved::Unreachable(format!(
                "cannot reach the registry {}: {why}",
                Untrusted(&self.registry),
            ))
        })?;
        logged(&response.status().to_string());
        let (parts, body) = response.into_parts();
        let header = |name: http::header::HeaderName| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let body = http_body_util::Limited::new(body, BODY_LIMIT)
            .collect()
            .await
            .map_err(|_| {
                Unresolved::Unusable(format!(
                    "the registry {}'s answer is larger than {} MiB or was cut short",
                    Untrusted(&self.registry),
                    BODY_LIMIT / (1024 * 1024)
                ))
            })?
            .to_bytes()
            .to_vec();
        Ok(Answer {
            status: parts.status,
            content_type: header(CONTENT_TYPE),
            header_digest: header(http::header::HeaderName::from_static(
                "docker-content-digest",
            )),
            challenge: header(WWW_AUTHENTICATE),
            location: header(LOCATION),
            body,
        })
    }
}

/// What a request asks the registry for, named from its URL for the `-v` line.
fn requested(url: &str) -> &'static str {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    if path.contains("/v2/") {
        if path.contains("/manifests/") {
            return "manifest";
        }
        if path.contains("/blobs/") {
            return "blob";
        }
        if path.contains("/referrers/") {
            return "referrers";
        }
        return "API";
    }
    if query
        .split('&')
        .any(|p| p.starts_with("scope=") || p.starts_with("service="))
    {
        "token"
    } else {
        "redirect"
    }
}

/// `url` as the `-v` line shows it: user information as `…`, and of its query only a token
/// request's `service` and `scope` (anything else, as a storage redirect's signature, is `…`).
fn logged_url(url: &str) -> String {
    let (rest, query) = match url.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (url, None),
    };
    let rest = match rest.split_once("://") {
        Some((scheme, after)) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            // User information is `…`, as everywhere a URL is shown (docs/security.md).
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://…@{host}{path}"),
                None => format!("{scheme}://{authority}{path}"),
            }
        }
        None => rest.to_owned(),
    };
    let Some(query) = query else {
        return rest;
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| p.starts_with("service=") || p.starts_with("scope="))
        .collect();
    let hidden = query.split('&').count() > kept.len();
    match (kept.is_empty(), hidden) {
        (true, _) => format!("{rest}?…"),
        (false, false) => format!("{rest}?{}", kept.join("&")),
        (false, true) => format!("{rest}?{}&…", kept.join("&")),
    }
}

fn basic(username: &str, password: &str) -> HeaderValue {
    use base64::Engine as _;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
    value.set_sensitive(true);
    value
}

/// `docker-credential-<name> get` for `registry`: its server address on stdin, its answer on
/// stdout; no terminal (stderr discarded, its own process group), within [`HELPER_TIMEOUT`],
/// killed when it runs longer. `None` when it fails or has nothing for the registry.
async fn run_helper(name: &str, registry: &str) -> Option<(String, String)> {
    use tokio::io::AsyncWriteExt as _;
    if name.is_empty() || name.contains(['/', '\\']) {
        return None;
    }
    let server = if registry == image::DOCKER_HUB {
        "https://index.docker.io/v1/".to_owned()
    } else {
        registry.to_owned()
    };
    let mut command = tokio::process::Command::new(format!("docker-credential-{name}"));
    command
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let run = async {
        let mut child = command.spawn().ok()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(server.as_bytes()).await.ok()?;
            drop(stdin);
        }
        let output = child.wait_with_output().await.ok()?;
        if !output.status.success() {
            return None;
        }
        match image::helper_answer(&output.stdout).ok()?? {
            CredentialSource::Basic { username, password } => Some((username, password)),
            CredentialSource::Helper(_) => None,
        }
    };
    tokio::time::timeout(HELPER_TIMEOUT, run).await.ok()?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v_lines_name_the_request_without_credentials() {
        assert_eq!(
            requested("http://127.0.0.1:5000/v2/web/manifests/2"),
            "manifest"
        );
        assert_eq!(
            requested("https://r.example/v2/a/b/blobs/sha256:00"),
            "blob"
        );
        assert_eq!(
            requested("https://auth.example/token?service=r&scope=repository%3Aweb%3Apull"),
            "token"
        );
        assert_eq!(
            requested("https://s3.example/blob?X-Amz-Signature=s"),
            "redirect"
        );
        assert_eq!(
            logged_url(
                "https://user:pass@auth.example/token?service=r&scope=repository%3Aweb%3Apull"
            ),
            "https://…@auth.example/token?service=r&scope=repository%3Aweb%3Apull"
        );
        assert_eq!(
            logged_url("https://auth.example/token?account=me&service=r&scope=s"),
            "https://auth.example/token?service=r&scope=s&…"
        );
        assert_eq!(
            logged_url("https://s3.example/data?X-Amz-Credential=a&X-Amz-Signature=b"),
            "https://s3.example/data?…"
        );
        assert_eq!(
            logged_url("http://127.0.0.1:5000/v2/web/manifests/2"),
            "http://127.0.0.1:5000/v2/web/manifests/2"
        );
    }

    #[test]
    fn a_body_without_a_digest_header_is_digested() {
        assert_eq!(
            cosign::sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    /// A registry that asks for a bearer token (`401` with `WWW-Authenticate: Bearer`), the
    /// token endpoint it names, and the manifest for that token: one request per line of the
    /// flow, in order, each on a connection of its own (`Connection: close`).
    async fn token_registry() -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        stand_in(|addr, head| {
            let line = head.lines().next().unwrap_or_default();
            let bearer = head
                .lines()
                .any(|l| l.eq_ignore_ascii_case("authorization: Bearer tok-123"));
            let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"digest":"sha256:aa","platform":{"os":"linux","architecture":"arm64"}}]}"#;
            let answer = if line
                .starts_with("GET /token?service=fake&scope=repository%3Aweb%3Apull ")
            {
                let token = r#"{"token": "tok-123"}"#;
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{token}",
                    token.len()
                )
            } else if line.starts_with("GET /v2/web/manifests/1 ") && bearer {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.index.v1+json\r\nDocker-Content-Digest: sha256:feed\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{index}",
                    index.len()
                )
            } else {
                format!(
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"fake\",scope=\"repository:web:pull\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            };
            (format!("{line} bearer={bearer}"), answer)
        })
        .await
    }

    #[tokio::test]
    async fn a_bearer_challenge_is_answered_with_an_anonymous_token() {
        let (addr, seen) = token_registry().await;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let settings = RegistrySettings {
            timeout: Duration::from_secs(5),
            log: RequestLogger(Some(std::sync::Arc::new(move |l: &str| {
                sink.lock().unwrap().push(l.to_owned())
            }))),
            ..RegistrySettings::default()
        };
        let resolved = resolve(&format!("{addr}/web:1"), &settings).await.unwrap();
        // -v: one line per request, the token never in them.
        let lines = lines.lock().unwrap().clone();
        let shape: Vec<String> = lines
            .iter()
            .map(|l| l.split(" in ").next().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            shape,
            vec![
                format!(
                    "  GET http://{addr}/v2/web/manifests/1 (registry manifest): 401 Unauthorized"
                ),
                format!(
                    "  GET http://{addr}/token?service=fake&scope=repository%3Aweb%3Apull (registry token): 200 OK"
                ),
                format!("  GET http://{addr}/v2/web/manifests/1 (registry manifest): 200 OK"),
            ]
        );
        assert!(
            lines
                .iter()
                .all(|l| l.ends_with(" ms") && !l.contains("tok-123")),
            "{lines:?}"
        );
        assert_eq!(resolved.digest, "sha256:feed");
        assert_eq!(
            appupdate_model::image::platform_list(&resolved.platforms),
            "linux/arm64"
        );
        assert_eq!(resolved.requests, 3);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                "GET /v2/web/manifests/1 HTTP/1.1 bearer=false".to_owned(),
                "GET /token?service=fake&scope=repository%3Aweb%3Apull HTTP/1.1 bearer=false"
                    .to_owned(),
                "GET /v2/web/manifests/1 HTTP/1.1 bearer=true".to_owned(),
            ]
        );
    }

    /// The recorded cosign fixtures (tests/data/cosign, made by its make-fixtures.py).
    const FIXTURES: &str = include_str!("../../../tests/data/cosign/fixtures.json");
    const COSIGN_PUB: &[u8] = include_bytes!("../../../tests/data/cosign/cosign.pub");
    const OTHER_PUB: &[u8] = include_bytes!("../../../tests/data/cosign/other.pub");

    /// A registry with the referrers API (distribution 2.8 has none), serving the fixtures'
    /// bundle-signed image: its index, the referrers API's answer for it, the referrer manifest
    /// and the blobs. Everything else is 404: the tag schema's index is not there. Each request
    /// line is logged.
    async fn referrers_registry() -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        String,
    ) {
        let fx: serde_json::Value = serde_json::from_str(FIXTURES).unwrap();
        let image = fx["images"]["bundleLayout"].clone();
        let digest = image["digest"].as_str().unwrap().to_owned();
        let mut routes: HashMap<String, (String, String)> = HashMap::new();
        for m in fx["manifests"].as_array().unwrap() {
            let text = m["text"].as_str().unwrap().to_owned();
            let media = m["mediaType"].as_str().unwrap().to_owned();
            let reference = m["reference"].as_str().unwrap();
            // Only what a registry with the API holds: no tag schema index.
            if reference.starts_with("sha256-") {
                continue;
            }
            routes.insert(
                format!("/v2/web/manifests/{reference}"),
                (media.clone(), text.clone()),
            );
            routes.insert(
                format!("/v2/web/manifests/{}", m["digest"].as_str().unwrap()),
                (media, text),
            );
        }
        for (d, text) in fx["blobs"].as_object().unwrap() {
            routes.insert(
                format!("/v2/web/blobs/{d}"),
                (
                    "application/octet-stream".into(),
                    text.as_str().unwrap().to_owned(),
                ),
            );
        }
        routes.insert(
            format!("/v2/web/referrers/{digest}"),
            (
                "application/vnd.oci.image.index.v1+json".into(),
                fx["signatures"]["bundleLayout"]["referrersApi"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
        );
        let (addr, seen) = stand_in(move |_, head| {
            let line = head.lines().next().unwrap_or_default();
            let path = line.split_whitespace().nth(1).unwrap_or_default();
            let answer = match routes.get(path) {
                Some((media, body)) => format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {media}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ),
                None => {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_owned()
                }
            };
            (path.to_owned(), answer)
        })
        .await;
        (addr, seen, digest)
    }

    /// A stand-in registry on loopback: for each connection, reads one request's head, logs
    /// the first part of what `answer` returns and writes the second (a whole response that
    /// closes the connection). `answer` is given the stand-in's address.
    async fn stand_in(
        answer: impl Fn(std::net::SocketAddr, &str) -> (String, String) + Send + 'static,
    ) -> (
        std::net::SocketAddr,
        std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let (entry, response) = answer(addr, &head);
                log.lock().unwrap().push(entry);
                let _ = socket.write_all(response.as_bytes()).await;
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn a_bundle_is_found_through_the_referrers_api() {
        let (addr, seen, digest) = referrers_registry().await;
        let settings = RegistrySettings {
            timeout: Duration::from_secs(5),
            ..RegistrySettings::default()
        };
        let key = PublicKey::from_pem(COSIGN_PUB).unwrap();
        let image = format!("{addr}/web:signed-bundle");
        let resolved = resolve_signed(&image, &settings, Some(&key)).await.unwrap();
        assert_eq!(resolved.digest, digest);
        assert_eq!(resolved.signature, Some(Ok(Layout::BundleReferrers)));
        let seen = seen.lock().unwrap().clone();
        let hex = digest.trim_start_matches("sha256:");
        assert_eq!(seen[1], format!("/v2/web/referrers/{digest}"), "{seen:?}");
        assert!(
            !seen.iter().any(|p| p.contains(&format!("sha256-{hex}"))),
            "neither the tag schema's index nor the .sig tag is asked once a bundle verifies: {seen:?}"
        );
        assert_eq!(
            resolved.requests, 4,
            "index, referrers, referrer, bundle: {seen:?}"
        );

        // Another key: the one bundle is not its; the .sig tag is looked for too.
        let other = PublicKey::from_pem(OTHER_PUB).unwrap();
        let resolved = resolve_signed(&image, &settings, Some(&other))
            .await
            .unwrap();
        assert_eq!(resolved.signature, Some(Err(Unsigned::OtherKeys(1))));
        // Without a key, nothing but the index.
        let resolved = resolve(&image, &settings).await.unwrap();
        assert_eq!(resolved.signature, None);
        assert_eq!(resolved.requests, 1);
    }

    /// Nothing listens: the check says it could not reach the registry, naming it.
    #[tokio::test]
    async fn a_registry_that_is_not_there_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let settings = RegistrySettings {
            timeout: Duration::from_secs(5),
            ..RegistrySettings::default()
        };
        let err = resolve(&format!("{addr}/web:1"), &settings)
            .await
            .unwrap_err();
        let Unresolved::Unreachable(why) = err else {
            panic!("unreachable: {err:?}")
        };
        assert!(why.contains(&addr.to_string()), "{why}");
        assert!(why.contains("connection refused"), "{why}");
    }
}
