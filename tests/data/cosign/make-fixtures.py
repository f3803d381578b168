#!/usr/bin/env python3
"""Makes the cosign fixtures of the image-signature tests: fixtures.json, the public key that
signed them (cosign.pub), and one that signed nothing (other.pub).

cosign itself cannot be installed where these tests run (it is a Go program, and no Go module
can be fetched here), so these are NOT cosign's output: this script writes, byte for byte where
the source decides the bytes, what `cosign sign --key cosign.key --tlog-upload=false` writes, as
read in sigstore/cosign v3.1.2 (commit 193d2153431f8bb0d945a4c1ee721872f73add67) and the
libraries it pins:

- the tag layout (`--new-bundle-format=false`): cmd/cosign/cli/sign/sign.go `signDigest`; the
  payload from sigstore/sigstore v1.10.8 pkg/signature/payload/payload.go (Go's json.Marshal
  of SimpleContainerImage); written by pkg/oci/remote/write.go `WriteSignatures` at the tag
  `sha256-<hex>.sig` (pkg/oci/remote/options.go), one layer of media type
  `application/vnd.dev.cosign.simplesigning.v1+json` with the annotation
  `dev.cosignproject.cosign/signature` (pkg/oci/static/signature.go). The signature image's
  config blob is go-containerregistry's for an empty image with one layer, approximated here:
  no verifier reads it.
- the bundle layout (v3's default): cmd/cosign/cli/sign/sign.go `signDigestBundle` (an in-toto
  statement v1 whose one subject is the image's digest, predicate type
  `https://sigstore.dev/cosign/sign/v1`, empty predicate, protojson field order),
  cmd/cosign/cli/signcommon/common.go `NewAttestationBundle` (a DSSE envelope of payload type
  `application/vnd.in-toto+json`), sigstore-go v1.2.1 pkg/sign/signer.go `Bundle` and
  pkg/sign/content.go `DSSEData` (the signature over DSSE's pre-authentication encoding, the
  public key hint of internal/key/svkeypair.go: base64 of the SHA-256 of the key's DER), and
  pkg/oci/remote/write.go `WriteAttestationNewBundleFormat`/`WriteReferrer`: a manifest with
  the `{}` config of media type `application/vnd.oci.empty.v1+json`, the bundle as its one
  layer, the image as its `subject`, `artifactType`
  `application/vnd.dev.sigstore.bundle.v0.3+json`, pushed by digest. Where the registry has
  no referrers API (distribution 2.8), go-containerregistry's remote.Put
  (pkg/v1/remote/write.go `commitSubjectReferrers`) keeps an OCI index of the referrers at
  the tag `sha256-<hex>` (the distribution spec's referrers tag schema). `referrers` below is
  what a registry with the API answers for the image (the distribution spec v1.1, "Listing
  Referrers": the descriptor with the manifest's artifactType and annotations).

Left out, as `--tlog-upload=false` leaves them out: Rekor entries, timestamps. protojson
spaces its output differently from one cosign build to another; it is compact here. The
registry name recorded in the payload is `localhost:5000/web`: the tests' registry listens on a
port of its own, and neither cosign nor this plugin checks that name.

The image signed is a small OCI index (linux/amd64, linux/arm64) whose blobs are in the file
too, so that the tests push exactly the image the signatures name.

These keys are test keys: they sign nothing but these fixtures.

Needs python3 with `cryptography` (pip install cryptography). Run it from
anywhere; it rewrites the files beside it (new keys and signatures each time).
"""

import base64
import hashlib
import json
import os

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = "web"
RECORDED_NAME = "localhost:5000/web"
CREATED = "2026-12-07T00:00:00Z"

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
INTOTO = "application/vnd.in-toto+json"
SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"


def go_json(value):
    """Go's json.Marshal: no spaces, fields in the order given (struct order; maps sorted)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def digest(text):
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def b64(data):
    return base64.b64encode(data).decode()


class Fixtures:
    def __init__(self):
        self.blobs = {}
        self.manifests = []

    def blob(self, text):
        d = digest(text)
        self.blobs[d] = text
        return d, len(text.encode())

    def manifest(self, reference, media_type, text):
        d = digest(text)
        self.manifests.append(
            {"reference": reference or d, "mediaType": media_type, "digest": d, "text": text}
        )
        return d, len(text.encode())


def image(fx, tag):
    """A two-platform OCI index under `tag`, shaped like tests/it/common/registry.rs's."""
    entries = []
    for arch in ("amd64", "arm64"):
        config = go_json(
            {
                "architecture": arch,
                "os": "linux",
                "config": {"Labels": {"salt": tag}},
                "rootfs": {"type": "layers", "diff_ids": []},
            }
        )
        config_digest, config_size = fx.blob(config)
        layer_digest, layer_size = fx.blob(f"layer of {REPOSITORY} {tag} linux/{arch}")
        manifest = go_json(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": layer_digest,
                        "size": layer_size,
                    }
                ],
            }
        )
        d, size = fx.manifest(None, OCI_MANIFEST, manifest)
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": d,
                "size": size,
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    index = go_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
    d, size = fx.manifest(tag, OCI_INDEX, index)
    return d, size


def sign(key, data):
    """ECDSA P-256 over SHA-256, ASN.1 DER: sigstore's ECDSA signer for a P-256 key."""
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def tag_layout(fx, key, image_digest):
    payload = go_json(
        {
            "critical": {
                "identity": {"docker-reference": RECORDED_NAME},
                "image": {"docker-manifest-digest": image_digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    )
    signature = b64(sign(key, payload.encode()))
    payload_digest, payload_size = fx.blob(payload)
    config = go_json(
        {
            "architecture": "",
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
            "config": {},
        }
    )
    config_digest, config_size = fx.blob(config)
    manifest = go_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "size": config_size, "digest": config_digest},
            "layers": [
                {
                    "mediaType": SIMPLE_SIGNING,
                    "size": payload_size,
                    "digest": payload_digest,
                    "annotations": {"dev.cosignproject.cosign/signature": signature},
                }
            ],
        }
    )
    tag = "sha256-" + image_digest.split(":")[1] + ".sig"
    d, _ = fx.manifest(tag, OCI_MANIFEST, manifest)
    return {"tag": tag, "manifest": d}


def bundle_layout(fx, key, public_der, image_digest, image_size):
    hex_digest = image_digest.split(":")[1]
    statement = go_json(
        {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"digest": {"sha256": hex_digest}, "annotations": {}}],
            "predicateType": SIGN_PREDICATE,
            "predicate": {},
        }
    )
    pae = f"DSSEv1 {len(INTOTO)} {INTOTO} {len(statement.encode())} {statement}"
    bundle = go_json(
        {
            "mediaType": BUNDLE_V03,
            "verificationMaterial": {
                "publicKey": {"hint": b64(hashlib.sha256(public_der).digest())}
            },
            "dsseEnvelope": {
                "payload": b64(statement.encode()),
                "payloadType": INTOTO,
                "signatures": [{"sig": b64(sign(key, pae.encode()))}],
            },
        }
    )
    bundle_digest, bundle_size = fx.blob(bundle)
    config_digest, config_size = fx.blob("{}")
    annotations = {
        "dev.sigstore.bundle.content": "dsse-envelope",
        "dev.sigstore.bundle.predicateType": SIGN_PREDICATE,
        "org.opencontainers.image.created": CREATED,
    }
    manifest = go_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_EMPTY,
                "size": config_size,
                "digest": config_digest,
                "artifactType": BUNDLE_V03,
            },
            "layers": [{"mediaType": BUNDLE_V03, "size": bundle_size, "digest": bundle_digest}],
            "annotations": annotations,
            "subject": {"mediaType": OCI_INDEX, "size": image_size, "digest": image_digest},
            "artifactType": BUNDLE_V03,
        }
    )
    referrer, referrer_size = fx.manifest(None, OCI_MANIFEST, manifest)
    # go-containerregistry's fallback: the referrers tag schema's index.
    fallback = go_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "size": referrer_size,
                    "digest": referrer,
                    "artifactType": BUNDLE_V03,
                }
            ],
        }
    )
    tag = "sha256-" + hex_digest
    index, _ = fx.manifest(tag, OCI_INDEX, fallback)
    # What a registry with the referrers API answers for the image.
    api = go_json(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": referrer,
                    "size": referrer_size,
                    "artifactType": BUNDLE_V03,
                    "annotations": annotations,
                }
            ],
        }
    )
    return {"referrer": referrer, "tag": tag, "index": index, "referrersApi": api}


def public_pem(key):
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def main():
    cosign_key = ec.generate_private_key(ec.SECP256R1())
    public_der = cosign_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fx = Fixtures()
    tag_image, _ = image(fx, "signed-tag")
    bundle_image, bundle_size = image(fx, "signed-bundle")
    signatures = {
        "tagLayout": tag_layout(fx, cosign_key, tag_image),
        "bundleLayout": bundle_layout(fx, cosign_key, public_der, bundle_image, bundle_size),
    }
    doc = {
        "about": "Made by make-fixtures.py (read its docstring): what cosign v3.1.2 writes, not cosign's own output.",
        "repository": REPOSITORY,
        "images": {
            "tagLayout": {"tag": "signed-tag", "digest": tag_image},
            "bundleLayout": {"tag": "signed-bundle", "digest": bundle_image},
        },
        "signatures": signatures,
        "blobs": fx.blobs,
        "manifests": fx.manifests,
    }
    with open(os.path.join(HERE, "fixtures.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(os.path.join(HERE, "cosign.pub"), "wb") as f:
        f.write(public_pem(cosign_key))
    with open(os.path.join(HERE, "other.pub"), "wb") as f:
        f.write(public_pem(ec.generate_private_key(ec.SECP256R1())))


if __name__ == "__main__":
    main()
