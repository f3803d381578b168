//! `--image-key`'s pure parts: a cosign public key, and whether a cosign signature found in the
//! registry (`appupdate_kube::registry` fetches them) is that key's over the digest the plan
//! writes. What `cosign verify --key KEY --insecure-ignore-tlog` checks, in its two layouts
//! (read in sigstore/cosign v3.1.2, commit 193d2153431f8bb0d945a4c1ee721872f73add67):
//!
//! - **The tag layout** (`cosign sign --new-bundle-format=false`, and cosign before v3): the
//!   tag `sha256-<hex>.sig` is an image whose layers are SimpleSigning payloads
//!   (`application/vnd.dev.cosign.simplesigning.v1+json`), each with its signature, base64, in
//!   the layer annotation `dev.cosignproject.cosign/signature`, over the payload's bytes. The
//!   payload names the digest in `critical.image.docker-manifest-digest`
//!   (`cmd/cosign/cli/sign/sign.go` `signDigest`; sigstore/sigstore
//!   `pkg/signature/payload/payload.go`; checked by `pkg/cosign/verifiers.go`
//!   `SimpleClaimVerifier`).
//! - **The bundle layout** (cosign v3's default): a Sigstore bundle v0.3
//!   (`application/vnd.dev.sigstore.bundle.v0.3+json`) holding a DSSE envelope, whose payload
//!   is an in-toto statement (`application/vnd.in-toto+json`) with the image's digest as its
//!   subject and the predicate type `https://sigstore.dev/cosign/sign/v1`; the signature is
//!   over the envelope's pre-authentication encoding (`DSSEv1 <len> <type> <len> <payload>`).
//!   It is the one layer of a manifest whose `subject` is the image, found through the OCI
//!   referrers API, or where the registry has none, in the index its tag schema keeps at the
//!   tag `sha256-<hex>` (`cmd/cosign/cli/sign/sign.go` `signDigestBundle`,
//!   `cmd/cosign/cli/signcommon/common.go` `NewAttestationBundle`,
//!   `pkg/oci/remote/write.go` `WriteAttestationNewBundleFormat`; verified by
//!   `pkg/cosign/verify.go` `GetBundles` and `verifyImageAttestationsSigstoreBundle`, which
//!   accept only a DSSE envelope, and sigstore-go v1.2.1 `pkg/verify/signature.go`
//!   `verifyEnvelopeWithArtifactDigests`). A bundle holding a message signature instead is not
//!   accepted, as cosign does not accept it for an image.
//!
//! Not checked, as `--insecure-ignore-tlog` does not: a transparency log entry (none can be
//! checked offline), timestamps, certificates. Keys: ECDSA P-256 with SHA-256 (what
//! `cosign generate-key-pair` makes) and P-384 with SHA-384 (cosign's default for that curve);
//! others are refused when the key is read.

use std::fmt;

use base64::Engine as _;
use serde_json::Value;

use crate::text::Untrusted;

/// The media type of a SimpleSigning payload layer (the tag layout).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding a tag-layout signature, base64.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What every Sigstore bundle media type starts with (cosign's `ociremote.Bundle` test).
pub const BUNDLE_MEDIA_TYPE_PREFIX: &str = "application/vnd.dev.sigstore.bundle";
/// The bundle cosign v3 writes.
pub const BUNDLE_V03_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The DSSE payload type of an in-toto statement.
pub const INTOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The predicate type of `cosign sign`'s statement (cosign's `types.CosignSignPredicateType`).
pub const COSIGN_SIGN_PREDICATE_TYPE: &str = "https://sigstore.dev/cosign/sign/v1";
/// The media types asked for when fetching a signature manifest or a referrers index.
pub const ACCEPT_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
pub const ACCEPT_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// The most signatures of one layout looked at (cosign reads up to 1000 layers); an image with
/// more is refused as unreadable rather than fetched without end.
pub const MAX_SIGNATURES: usize = 32;

/// A cosign public key (`cosign.pub`: PEM `PUBLIC KEY`, SubjectPublicKeyInfo).
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    algorithm: KeyAlgorithm,
    /// The key as ring takes it: the uncompressed point.
    point: Vec<u8>,
    /// `sha256:<hex>` of the SubjectPublicKeyInfo DER.
    fingerprint: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyAlgorithm {
    P256,
    P384,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({}, {})", self.kind(), self.fingerprint)
    }
}

const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// Whether a key file holds a PEM public key (of any algorithm): what `--verify-key` and the
/// other shared-secret keys refuse.
pub fn is_pem_public_key(content: &[u8]) -> bool {
    String::from_utf8_lossy(content)
        .lines()
        .any(|l| l.trim().starts_with("-----BEGIN ") && l.contains("PUBLIC KEY-----"))
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) of ECDSA P-256 or P-384.
    pub fn from_pem(content: &[u8]) -> Result<PublicKey, String> {
        let text = std::str::from_utf8(content)
            .map_err(|_| "it is not a PEM public key (not text)".to_owned())?;
        let begin = "-----BEGIN PUBLIC KEY-----";
        let Some(start) = text.find(begin) else {
            if text.contains("PRIVATE KEY-----") {
                return Err("it is a private key; give the public key (cosign.pub, from cosign generate-key-pair or cosign public-key)".into());
            }
            return Err("it is not a PEM public key (no -----BEGIN PUBLIC KEY----- line)".into());
        };
        let body = &text[start + begin.len()..];
        let Some(end) = body.find("-----END PUBLIC KEY-----") else {
            return Err("the PEM public key has no -----END PUBLIC KEY----- line".into());
        };
        let b64: String = body[..end].split_whitespace().collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| "the PEM public key is not valid base64".to_owned())?;
        PublicKey::from_spki(&der)
    }

    /// A SubjectPublicKeyInfo, DER.
    pub fn from_spki(der: &[u8]) -> Result<PublicKey, String> {
        let bad = || "the public key is not a valid SubjectPublicKeyInfo".to_owned();
        let (spki, rest) = der_take(der, 0x30).ok_or_else(bad)?;
        if !rest.is_empty() {
            return Err(bad());
        }
        let (algorithm, after) = der_take(spki, 0x30).ok_or_else(bad)?;
        let (bits, tail) = der_take(after, 0x03).ok_or_else(bad)?;
        if !tail.is_empty() {
            return Err(bad());
        }
        let (oid, params) = der_take(algorithm, 0x06).ok_or_else(bad)?;
        let algorithm = if oid == OID_EC_PUBLIC_KEY {
            let (curve, _) = der_take(params, 0x06).ok_or_else(bad)?;
            if curve == OID_P256 {
                KeyAlgorithm::P256
            } else if curve == OID_P384 {
                KeyAlgorithm::P384
            } else {
                return Err("it is an ECDSA key on a curve other than P-256 or P-384, which is not supported".into());
            }
        } else if oid == OID_RSA {
            return Err("it is an RSA key, which is not supported yet: use an ECDSA P-256 key (cosign generate-key-pair)".into());
        } else if oid == OID_ED25519 {
            return Err("it is an Ed25519 key, which is not supported yet (cosign signs with Ed25519ph): use an ECDSA P-256 key (cosign generate-key-pair)".into());
        } else {
            return Err("it is a public key of an unknown algorithm: use an ECDSA P-256 key (cosign generate-key-pair)".into());
        };
        // A BIT STRING: its unused-bits count (0), then the uncompressed point.
        let point = match bits.split_first() {
            Some((0, point)) if point.first() == Some(&0x04) => point.to_vec(),
            _ => return Err(bad()),
        };
        let expected = match algorithm {
            KeyAlgorithm::P256 => 65,
            KeyAlgorithm::P384 => 97,
        };
        if point.len() != expected {
            return Err(bad());
        }
        Ok(PublicKey {
            algorithm,
            point,
            fingerprint: sha256_digest(der),
        })
    }

    /// `ECDSA P-256`.
    pub fn kind(&self) -> &'static str {
        match self.algorithm {
            KeyAlgorithm::P256 => "ECDSA P-256",
            KeyAlgorithm::P384 => "ECDSA P-384",
        }
    }

    /// `sha256:<hex>` of the key's SubjectPublicKeyInfo: what a saved plan records.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether `signature` (ASN.1 DER, as cosign writes it) is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithm: &dyn ring::signature::VerificationAlgorithm = match self.algorithm {
            KeyAlgorithm::P256 => &ring::signature::ECDSA_P256_SHA256_ASN1,
            KeyAlgorithm::P384 => &ring::signature::ECDSA_P384_SHA384_ASN1,
        };
        ring::signature::UnparsedPublicKey::new(algorithm, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

/// One DER element of `tag` at the start of `input` (short and long definite lengths): its
/// content and what follows it.
fn der_take(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = input.split_first()?;
    if first != tag {
        return None;
    }
    let (&len0, rest) = rest.split_first()?;
    let (len, rest) = if len0 < 0x80 {
        (usize::from(len0), rest)
    } else {
        let n = usize::from(len0 & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, bytes);
    format!("sha256:{}", crate::text::hex(hash.as_ref()))
}

/// Whether `digest` is `sha256:<64 hex>`: the only digests a signature's manifests and blobs
/// are asked by (a registry's answer names them, and they go into request paths).
pub fn is_sha256_digest(digest: &str) -> bool {
    sha256_hex(digest).is_some()
}

/// The hex of a `sha256:<64 hex>` digest; `None` for anything else.
fn sha256_hex(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The tag layout's tag for `digest`: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Option<String> {
    sha256_hex(digest).map(|h| format!("sha256-{h}.sig"))
}

/// The referrers tag schema's tag for `digest`: `sha256-<hex>`.
pub fn referrers_tag(digest: &str) -> Option<String> {
    sha256_hex(digest).map(|h| format!("sha256-{h}"))
}

/// Where a signature was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The tag `sha256-<hex>.sig`.
    Tag,
    /// A Sigstore bundle found through the referrers API.
    BundleReferrers,
    /// A Sigstore bundle found in the referrers tag schema's index (`sha256-<hex>`).
    BundleTag,
}

impl Layout {
    /// How the plan says where the signature was.
    pub fn describe(self) -> &'static str {
        match self {
            Layout::Tag => "its sha256-….sig tag",
            Layout::BundleReferrers => "a Sigstore bundle found through the referrers API",
            Layout::BundleTag => "a Sigstore bundle found through the referrers tag sha256-…",
        }
    }
}

/// What one signature is, for the key and the digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The key's, over a payload that names the digest.
    Verified,
    /// Not the key's (or not a valid signature at all).
    OtherKey,
    /// The key's, over a payload that names another digest (the one named, shown as found).
    OtherDigest(String),
    /// It cannot be read: why.
    Unreadable(String),
}

/// Why an image is not signed by the key, from the verdicts of every signature found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsigned {
    /// No signature in either layout.
    NoSignature,
    /// Signatures, none of them the key's.
    OtherKeys(usize),
    /// The key signed a payload naming another digest.
    OtherDigest(String),
    /// A signature could not be read, and none verified.
    Unreadable(String),
}

impl Unsigned {
    /// What is wrong, for `--image X: …; nothing was written`: `digest` is the one the plan
    /// would write, `key` names the key (`--image-key cosign.pub`).
    pub fn explain(&self, digest: &str, key: &str) -> String {
        let digest = Untrusted(digest);
        match self {
            Unsigned::NoSignature => format!(
                "it is not signed: no cosign signature for {digest} (neither a sha256-….sig tag nor a Sigstore bundle among its referrers), and {key} requires one"
            ),
            Unsigned::OtherKeys(n) => format!(
                "it is signed only by other keys: {} for {digest}, and none verifies with {key}",
                if *n == 1 {
                    "1 cosign signature".to_owned()
                } else {
                    format!("{n} cosign signatures")
                }
            ),
            Unsigned::OtherDigest(other) => format!(
                "its cosign signature by {key} names another digest ({}), not {digest}, the one that would be written",
                Untrusted(other)
            ),
            Unsigned::Unreadable(why) => format!(
                "its cosign signature cannot be read ({why}), and no other verifies with {key}"
            ),
        }
    }
}

/// The verdicts of all signatures found, folded: the layout of one that verifies, else why
/// none does — a signature by the key for another digest first, then one that cannot be
/// read, then the count of signatures by other keys.
pub fn fold(verdicts: &[(Layout, Verdict)]) -> Result<Layout, Unsigned> {
    if let Some((layout, _)) = verdicts.iter().find(|(_, v)| *v == Verdict::Verified) {
        return Ok(*layout);
    }
    if let Some(other) = verdicts.iter().find_map(|(_, v)| match v {
        Verdict::OtherDigest(d) => Some(d.clone()),
        _ => None,
    }) {
        return Err(Unsigned::OtherDigest(other));
    }
    if let Some(why) = verdicts.iter().find_map(|(_, v)| match v {
        Verdict::Unreadable(w) => Some(w.clone()),
        _ => None,
    }) {
        return Err(Unsigned::Unreadable(why));
    }
    match verdicts.len() {
        0 => Err(Unsigned::NoSignature),
        n => Err(Unsigned::OtherKeys(n)),
    }
}

/// Base64 as Go's encoders write it (standard, padded) or protojson also reads it (URL-safe,
/// unpadded).
fn decode_b64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let text = text.trim();
    GeneralPurpose::new(&base64::alphabet::STANDARD, config)
        .decode(text)
        .or_else(|_| GeneralPurpose::new(&base64::alphabet::URL_SAFE, config).decode(text))
        .ok()
}

/// One layer of a tag-layout signature manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureLayer {
    /// The payload blob's digest.
    pub digest: String,
    /// The `dev.cosignproject.cosign/signature` annotation.
    pub signature: Option<String>,
}

/// The SimpleSigning layers of a `sha256-<hex>.sig` manifest (other layers are left out, as
/// cosign leaves them).
pub fn signature_layers(manifest: &[u8]) -> Result<Vec<SignatureLayer>, String> {
    let doc: Value = serde_json::from_slice(manifest)
        .map_err(|_| "the .sig tag's manifest is not JSON".to_owned())?;
    let layers = doc
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| "the .sig tag's manifest has no layers".to_owned())?;
    Ok(layers
        .iter()
        .filter(|l| l.get("mediaType").and_then(Value::as_str) == Some(SIMPLE_SIGNING_MEDIA_TYPE))
        .filter_map(|l| {
            Some(SignatureLayer {
                digest: l.get("digest").and_then(Value::as_str)?.to_owned(),
                signature: l
                    .pointer("/annotations/dev.cosignproject.cosign~1signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect())
}

/// A tag-layout signature: `signature` (base64, from the layer's annotation) over `payload`
/// (the layer's blob), whose `critical.image.docker-manifest-digest` must be `digest`.
pub fn verify_simple_signing(
    key: &PublicKey,
    payload: &[u8],
    signature: Option<&str>,
    digest: &str,
) -> Verdict {
    let Some(signature) = signature else {
        return Verdict::Unreadable(format!(
            "a layer of the .sig tag has no {SIGNATURE_ANNOTATION} annotation"
        ));
    };
    let Some(signature) = decode_b64(signature) else {
        return Verdict::Unreadable("a signature of the .sig tag is not base64".into());
    };
    if !key.verifies(payload, &signature) {
        return Verdict::OtherKey;
    }
    let named = serde_json::from_slice::<Value>(payload).ok().and_then(|p| {
        p.pointer("/critical/image/docker-manifest-digest")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match named {
        Some(d) if d == digest => Verdict::Verified,
        Some(d) => Verdict::OtherDigest(d),
        None => Verdict::Unreadable(
            "a payload of the .sig tag names no critical.image.docker-manifest-digest".into(),
        ),
    }
}

/// The manifests of a referrers index (the referrers API's answer, or the tag schema's index)
/// that may hold a Sigstore bundle: those whose `artifactType` is a bundle's, or says nothing
/// (cosign fetches every referrer; one of another artifact type is no bundle, as cosign's own
/// referrer manifests and the registries that list them name the bundle's type).
pub fn bundle_referrers(index: &[u8]) -> Result<Vec<String>, String> {
    let doc: Value =
        serde_json::from_slice(index).map_err(|_| "the referrers index is not JSON".to_owned())?;
    let manifests = doc
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or_else(|| "the referrers index lists no manifests".to_owned())?;
    Ok(manifests
        .iter()
        .filter(|m| {
            m.get("artifactType")
                .and_then(Value::as_str)
                .is_none_or(|t| t.is_empty() || t.starts_with(BUNDLE_MEDIA_TYPE_PREFIX))
        })
        .filter_map(|m| m.get("digest").and_then(Value::as_str).map(str::to_owned))
        .collect())
}

/// The bundle blob's digest of a referrer manifest: its one layer, of a bundle media type (as
/// cosign's `ociremote.Bundle` requires); `None` when it is not a bundle manifest.
pub fn bundle_layer(manifest: &[u8]) -> Option<String> {
    let doc: Value = serde_json::from_slice(manifest).ok()?;
    let layers = doc.get("layers").and_then(Value::as_array)?;
    let [layer] = layers.as_slice() else {
        return None;
    };
    layer
        .get("mediaType")
        .and_then(Value::as_str)
        .filter(|t| t.starts_with(BUNDLE_MEDIA_TYPE_PREFIX))?;
    layer
        .get("digest")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Whether a bundle media type is v0.3 or later (cosign's `MinVersion("v0.3")`):
/// `…bundle.v0.3+json` or `…bundle+json;version=0.3`.
fn bundle_at_least_v03(media_type: &str) -> bool {
    let version =
        if let Some(rest) = media_type.strip_prefix("application/vnd.dev.sigstore.bundle.v") {
            rest.strip_suffix("+json")
        } else {
            media_type.strip_prefix("application/vnd.dev.sigstore.bundle+json;version=")
        };
    let Some(version) = version else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => major > 0 || minor >= 3,
        (Some(major), None) => major > 0,
        _ => false,
    }
}

/// DSSE's pre-authentication encoding: what the envelope's signature is over.
pub fn dsse_pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A bundle-layout signature: a Sigstore bundle v0.3 whose DSSE envelope is signed by the key
/// and whose in-toto statement has `digest` among its subjects' `sha256` digests.
pub fn verify_bundle(key: &PublicKey, bundle: &[u8], digest: &str) -> Verdict {
    let unreadable = |why: &str| Verdict::Unreadable(format!("a Sigstore bundle {why}"));
    let Ok(doc) = serde_json::from_slice::<Value>(bundle) else {
        return unreadable("is not JSON");
    };
    let media = doc.get("mediaType").and_then(Value::as_str).unwrap_or("");
    if !bundle_at_least_v03(media) {
        return unreadable(&format!(
            "is of media type {:?}, not a Sigstore bundle v0.3 or later",
            Untrusted(media)
        ));
    }
    let Some(envelope) = doc.get("dsseEnvelope") else {
        if doc.get("messageSignature").is_some() {
            return unreadable(
                "holds a message signature, which cosign does not accept for an image (it signs an in-toto statement in a DSSE envelope)",
            );
        }
        return unreadable("holds no DSSE envelope");
    };
    let payload_type = envelope
        .get("payloadType")
        .and_then(Value::as_str)
        .unwrap_or("");
    if payload_type != INTOTO_PAYLOAD_TYPE {
        return unreadable(&format!(
            "signs a payload of type {:?}, not an in-toto statement",
            Untrusted(payload_type)
        ));
    }
    let Some(payload) = envelope
        .get("payload")
        .and_then(Value::as_str)
        .and_then(decode_b64)
    else {
        return unreadable("has a DSSE payload that is not base64");
    };
    let signatures = envelope
        .get("signatures")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // A bundle's envelope holds exactly one signature (sigstore-go).
    let [signature] = signatures else {
        return unreadable(&format!(
            "has {} DSSE signatures, not one",
            signatures.len()
        ));
    };
    let Some(signature) = signature
        .get("sig")
        .and_then(Value::as_str)
        .and_then(decode_b64)
    else {
        return unreadable("has a DSSE signature that is not base64");
    };
    if !key.verifies(&dsse_pae(payload_type, &payload), &signature) {
        return Verdict::OtherKey;
    }
    let Ok(statement) = serde_json::from_slice::<Value>(&payload) else {
        return unreadable("signs a statement that is not JSON");
    };
    let named: Vec<String> = statement
        .get("subject")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.pointer("/digest/sha256").and_then(Value::as_str))
        .map(|hex| format!("sha256:{hex}"))
        .collect();
    if named.iter().any(|d| d == digest) {
        return Verdict::Verified;
    }
    match named.into_iter().next() {
        Some(other) => Verdict::OtherDigest(other),
        None => unreadable("signs a statement with no sha256 subject"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{
        ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING, EcdsaKeyPair,
        EcdsaSigningAlgorithm, KeyPair as _,
    };
    use serde_json::json;

    const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    struct Signer {
        pair: EcdsaKeyPair,
        rng: SystemRandom,
        spki: Vec<u8>,
    }

    impl Signer {
        fn new(alg: &'static EcdsaSigningAlgorithm) -> Signer {
            let rng = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
            let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
            let point = pair.public_key().as_ref().to_vec();
            // SubjectPublicKeyInfo: the algorithm (id-ecPublicKey, the curve) and the point.
            let mut prefix: Vec<u8> = if point.len() == 65 {
                vec![
                    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
                    0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
                ]
            } else {
                vec![
                    0x30, 0x76, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
                    0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22, 0x03, 0x62, 0x00,
                ]
            };
            prefix.extend_from_slice(&point);
            Signer {
                pair,
                rng,
                spki: prefix,
            }
        }

        fn pem(&self) -> String {
            let b64 = base64::engine::general_purpose::STANDARD.encode(&self.spki);
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(64)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
                lines.join("\n")
            )
        }

        fn key(&self) -> PublicKey {
            PublicKey::from_pem(self.pem().as_bytes()).unwrap()
        }

        fn sign(&self, message: &[u8]) -> Vec<u8> {
            self.pair
                .sign(&self.rng, message)
                .unwrap()
                .as_ref()
                .to_vec()
        }

        fn sign_b64(&self, message: &[u8]) -> String {
            base64::engine::general_purpose::STANDARD.encode(self.sign(message))
        }

        /// A cosign v3 bundle over a statement naming `digest`, as cosign writes it.
        fn bundle(&self, digest: &str) -> Vec<u8> {
            let hex = digest.strip_prefix("sha256:").unwrap();
            let statement = format!(
                r#"{{"_type":"https://in-toto.io/Statement/v1","subject":[{{"digest":{{"sha256":"{hex}"}},"annotations":{{}}}}],"predicateType":"{COSIGN_SIGN_PREDICATE_TYPE}","predicate":{{}}}}"#
            );
            self.bundle_of(INTOTO_PAYLOAD_TYPE, statement.as_bytes())
        }

        fn bundle_of(&self, payload_type: &str, payload: &[u8]) -> Vec<u8> {
            let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
            serde_json::to_vec(&json!({
                "mediaType": BUNDLE_V03_MEDIA_TYPE,
                "verificationMaterial": {"publicKey": {"hint": "x"}},
                "dsseEnvelope": {
                    "payload": b64(payload),
                    "payloadType": payload_type,
                    "signatures": [{"sig": b64(&self.sign(&dsse_pae(payload_type, payload)))}]
                }
            }))
            .unwrap()
        }
    }

    fn simple_signing(digest: &str) -> Vec<u8> {
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"registry.example/web"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        )
        .into_bytes()
    }

    #[test]
    fn a_pem_public_key_of_p256_or_p384_is_read_and_others_are_refused() {
        for alg in [
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &ECDSA_P384_SHA384_ASN1_SIGNING,
        ] {
            let signer = Signer::new(alg);
            let key = signer.key();
            assert!(key.fingerprint().starts_with("sha256:"));
            assert!(key.verifies(b"m", &signer.sign(b"m")));
            assert!(!key.verifies(b"n", &signer.sign(b"m")));
            assert!(is_pem_public_key(signer.pem().as_bytes()));
        }
        assert_eq!(
            Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING).key().kind(),
            "ECDSA P-256"
        );
        assert!(
            PublicKey::from_pem(b"0123456789abcdef0123456789abcdef")
                .unwrap_err()
                .contains("not a PEM public key")
        );
        assert!(
            PublicKey::from_pem(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
                .unwrap_err()
                .contains("private key")
        );
        assert!(!is_pem_public_key(b"0123456789abcdef0123456789abcdef"));
        // Ed25519 (OID 1.3.101.112) and a truncated key.
        let ed = [
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ]
        .iter()
        .copied()
        .chain([7u8; 32])
        .collect::<Vec<u8>>();
        assert!(PublicKey::from_spki(&ed).unwrap_err().contains("Ed25519"));
        let signer = Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING);
        assert!(PublicKey::from_spki(&signer.spki[..40]).is_err());
        assert!(PublicKey::from_spki(&[]).is_err());
    }

    #[test]
    fn a_tag_layout_signature_is_the_keys_over_a_payload_naming_the_digest() {
        let signer = Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING);
        let other = Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING);
        let key = signer.key();
        let payload = simple_signing(DIGEST);
        let sig = signer.sign_b64(&payload);
        assert_eq!(
            verify_simple_signing(&key, &payload, Some(&sig), DIGEST),
            Verdict::Verified
        );
        assert_eq!(
            verify_simple_signing(&other.key(), &payload, Some(&sig), DIGEST),
            Verdict::OtherKey
        );
        // The key's signature copied onto another image: it names the first one.
        assert_eq!(
            verify_simple_signing(&key, &payload, Some(&sig), OTHER),
            Verdict::OtherDigest(DIGEST.into())
        );
        // A payload changed after signing.
        let changed = simple_signing(OTHER);
        assert_eq!(
            verify_simple_signing(&key, &changed, Some(&sig), OTHER),
            Verdict::OtherKey
        );
        assert!(matches!(
            verify_simple_signing(&key, &payload, Some("%%%"), DIGEST),
            Verdict::Unreadable(_)
        ));
        assert!(matches!(
            verify_simple_signing(&key, &payload, None, DIGEST),
            Verdict::Unreadable(_)
        ));
        let no_digest = br#"{"critical":{}}"#;
        assert!(matches!(
            verify_simple_signing(&key, no_digest, Some(&signer.sign_b64(no_digest)), DIGEST),
            Verdict::Unreadable(_)
        ));
    }

    #[test]
    fn a_bundle_is_the_keys_dsse_envelope_over_a_statement_naming_the_digest() {
        let signer = Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING);
        let key = signer.key();
        assert_eq!(
            verify_bundle(&key, &signer.bundle(DIGEST), DIGEST),
            Verdict::Verified
        );
        assert_eq!(
            verify_bundle(&key, &signer.bundle(DIGEST), OTHER),
            Verdict::OtherDigest(DIGEST.into())
        );
        let other = Signer::new(&ECDSA_P256_SHA256_ASN1_SIGNING);
        assert_eq!(
            verify_bundle(&other.key(), &signer.bundle(DIGEST), DIGEST),
            Verdict::OtherKey
        );
        // P-384 signs with SHA-384, as cosign does for that curve.
        let p384 = Signer::new(&ECDSA_P384_SHA384_ASN1_SIGNING);
        assert_eq!(
            verify_bundle(&p384.key(), &p384.bundle(DIGEST), DIGEST),
            Verdict::Verified
        );
        // A statement changed after signing.
        let mut doc: Value = serde_json::from_slice(&signer.bundle(DIGEST)).unwrap();
        let swapped: Value = serde_json::from_slice(&signer.bundle(OTHER)).unwrap();
        doc["dsseEnvelope"]["payload"] = swapped["dsseEnvelope"]["payload"].clone();
        assert_eq!(
            verify_bundle(&key, &serde_json::to_vec(&doc).unwrap(), OTHER),
            Verdict::OtherKey
        );
        // The payload type is signed too: another one is refused before the signature.
        let other_type = signer.bundle_of("text/plain", DIGEST.as_bytes());
        assert!(
            matches!(verify_bundle(&key, &other_type, DIGEST), Verdict::Unreadable(w) if w.contains("not an in-toto statement"))
        );
        // What cosign does not accept for an image: a message signature, an old bundle, two
        // signatures, not JSON.
        let message = json!({"mediaType": BUNDLE_V03_MEDIA_TYPE, "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": "AA=="}, "signature": "AA=="}});
        assert!(matches!(
            verify_bundle(&key, &serde_json::to_vec(&message).unwrap(), DIGEST),
            Verdict::Unreadable(w) if w.contains("message signature")
        ));
        let mut old = doc.clone();
        old["mediaType"] = json!("application/vnd.dev.sigstore.bundle+json;version=0.2");
        assert!(matches!(
            verify_bundle(&key, &serde_json::to_vec(&old).unwrap(), DIGEST),
            Verdict::Unreadable(w) if w.contains("not a Sigstore bundle v0.3")
        ));
        let mut two: Value = serde_json::from_slice(&signer.bundle(DIGEST)).unwrap();
        let sig = two["dsseEnvelope"]["signatures"][0].clone();
        two["dsseEnvelope"]["signatures"] = json!([sig.clone(), sig]);
        assert!(matches!(
            verify_bundle(&key, &serde_json::to_vec(&two).unwrap(), DIGEST),
            Verdict::Unreadable(w) if w.contains("2 DSSE signatures")
        ));
        assert!(matches!(
            verify_bundle(&key, b"<html>", DIGEST),
            Verdict::Unreadable(_)
        ));
        // Rekor entries and a public key hint are there in real bundles: not checked offline.
        let mut with_tlog: Value = serde_json::from_slice(&signer.bundle(DIGEST)).unwrap();
        with_tlog["verificationMaterial"]["tlogEntries"] = json!([{"logIndex": "1"}]);
        assert_eq!(
            verify_bundle(&key, &serde_json::to_vec(&with_tlog).unwrap(), DIGEST),
            Verdict::Verified
        );
    }

    #[test]
    fn bundle_media_types_from_v03_on_are_accepted() {
        assert!(bundle_at_least_v03(BUNDLE_V03_MEDIA_TYPE));
        assert!(bundle_at_least_v03(
            "application/vnd.dev.sigstore.bundle.v0.4+json"
        ));
        assert!(bundle_at_least_v03(
            "application/vnd.dev.sigstore.bundle+json;version=0.3"
        ));
        assert!(!bundle_at_least_v03(
            "application/vnd.dev.sigstore.bundle+json;version=0.2"
        ));
        assert!(!bundle_at_least_v03(
            "application/vnd.dev.sigstore.bundle.v0.1+json"
        ));
        assert!(!bundle_at_least_v03("application/json"));
    }

    #[test]
    fn manifests_name_their_signature_layers_and_bundles() {
        let sig = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": 2, "digest": "sha256:c"},
        "layers": [
            {"mediaType": SIMPLE_SIGNING_MEDIA_TYPE, "size": 1, "digest": "sha256:a",
             "annotations": {SIGNATURE_ANNOTATION: "MEUC"}},
            {"mediaType": "application/octet-stream", "size": 1, "digest": "sha256:b"},
            {"mediaType": SIMPLE_SIGNING_MEDIA_TYPE, "size": 1, "digest": "sha256:d"}
        ]});
        assert_eq!(
            signature_layers(&serde_json::to_vec(&sig).unwrap()).unwrap(),
            vec![
                SignatureLayer {
                    digest: "sha256:a".into(),
                    signature: Some("MEUC".into())
                },
                SignatureLayer {
                    digest: "sha256:d".into(),
                    signature: None
                }
            ]
        );
        assert!(signature_layers(b"{}").is_err());
        let index = json!({"schemaVersion": 2, "mediaType": ACCEPT_INDEX, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:1", "size": 1,
             "artifactType": BUNDLE_V03_MEDIA_TYPE},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:2", "size": 1,
             "artifactType": "application/spdx+json"},
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:3", "size": 1}
        ]});
        assert_eq!(
            bundle_referrers(&serde_json::to_vec(&index).unwrap()).unwrap(),
            vec!["sha256:1".to_owned(), "sha256:3".to_owned()]
        );
        let referrer = json!({"schemaVersion": 2, "layers": [
            {"mediaType": BUNDLE_V03_MEDIA_TYPE, "digest": "sha256:b", "size": 1}]});
        assert_eq!(
            bundle_layer(&serde_json::to_vec(&referrer).unwrap()),
            Some("sha256:b".into())
        );
        let two = json!({"layers": [
            {"mediaType": BUNDLE_V03_MEDIA_TYPE, "digest": "sha256:b"},
            {"mediaType": BUNDLE_V03_MEDIA_TYPE, "digest": "sha256:c"}]});
        assert_eq!(bundle_layer(&serde_json::to_vec(&two).unwrap()), None);
        assert_eq!(
            signature_tag(DIGEST).unwrap(),
            format!("sha256-{}.sig", &DIGEST[7..])
        );
        assert_eq!(
            referrers_tag(DIGEST).unwrap(),
            format!("sha256-{}", &DIGEST[7..])
        );
        assert_eq!(signature_tag("sha256:short"), None);
        assert!(is_sha256_digest(DIGEST));
        assert!(!is_sha256_digest(&format!("{DIGEST}/../x")));
        assert!(!is_sha256_digest("sha512:11"));
    }

    #[test]
    fn the_verdicts_fold_into_one_reason() {
        use Layout::*;
        assert_eq!(fold(&[]), Err(Unsigned::NoSignature));
        assert_eq!(
            fold(&[(Tag, Verdict::OtherKey), (BundleTag, Verdict::Verified)]),
            Ok(BundleTag)
        );
        assert_eq!(
            fold(&[(Tag, Verdict::OtherKey), (Tag, Verdict::OtherKey)]),
            Err(Unsigned::OtherKeys(2))
        );
        assert_eq!(
            fold(&[
                (Tag, Verdict::Unreadable("x".into())),
                (Tag, Verdict::OtherDigest(OTHER.into()))
            ]),
            Err(Unsigned::OtherDigest(OTHER.into()))
        );
        assert_eq!(
            fold(&[
                (Tag, Verdict::OtherKey),
                (Tag, Verdict::Unreadable("x".into()))
            ]),
            Err(Unsigned::Unreadable("x".into()))
        );
        let key = "--image-key cosign.pub";
        assert_eq!(
            Unsigned::OtherKeys(1).explain(DIGEST, key),
            format!(
                "it is signed only by other keys: 1 cosign signature for {DIGEST}, and none verifies with {key}"
            )
        );
        assert!(
            Unsigned::NoSignature
                .explain(DIGEST, key)
                .starts_with("it is not signed: no cosign signature for sha256:1111")
        );
        // A digest from the registry is shown escaped.
        assert!(
            !Unsigned::OtherDigest("sha256:\u{1b}[31m".into())
                .explain(DIGEST, key)
                .contains('\u{1b}')
        );
    }
}
