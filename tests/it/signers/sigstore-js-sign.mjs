// An independent signer for the image-signature tests: signs an image the way `cosign sign
// --key` v3 does (a Sigstore bundle v0.3 holding a DSSE envelope over an in-toto statement
// whose subject is the image's digest, predicate type https://sigstore.dev/cosign/sign/v1),
// with Sigstore's own JavaScript client: the bundle is built by @sigstore/sign and attached to
// the image by @sigstore/oci (a referrer manifest; the referrers tag schema's index where the
// registry has no referrers API). Nothing of the plugin is used.
//
// node sigstore-js-sign.mjs REGISTRY/REPOSITORY sha256:DIGEST PUBLIC_KEY_OUT
// Makes a new ECDSA P-256 key for each run and writes its public key (PEM) to PUBLIC_KEY_OUT.
// Needs @sigstore/sign, @sigstore/bundle and @sigstore/oci where node finds them
// (NODE_PATH, or node_modules beside a parent directory).
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { DSSEBundleBuilder } = require('@sigstore/sign');
const { bundleToJSON } = require('@sigstore/bundle');
const { attachArtifactToImage } = require('@sigstore/oci');

const [imageName, imageDigest, publicKeyOut] = process.argv.slice(2);
const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const publicPem = publicKey.export({ type: 'spki', format: 'pem' });
fs.writeFileSync(publicKeyOut, publicPem);

const signer = {
  sign: async (data) => ({
    signature: crypto.sign('sha256', data, privateKey),
    key: { $case: 'publicKey', publicKey: publicPem, hint: '' },
  }),
};
const statement = {
  _type: 'https://in-toto.io/Statement/v1',
  subject: [{ name: imageName, digest: { sha256: imageDigest.replace(/^sha256:/, '') } }],
  predicateType: 'https://sigstore.dev/cosign/sign/v1',
  predicate: {},
};
const bundle = await new DSSEBundleBuilder({ signer, witnesses: [] }).create({
  data: Buffer.from(JSON.stringify(statement)),
  type: 'application/vnd.in-toto+json',
});
const bundleType = 'application/vnd.dev.sigstore.bundle.v0.3+json';
await attachArtifactToImage({
  imageName,
  imageDigest,
  artifact: Buffer.from(JSON.stringify(bundleToJSON(bundle))),
  mediaType: bundleType,
  annotations: {
    'dev.sigstore.bundle.content': 'dsse-envelope',
    'dev.sigstore.bundle.predicateType': 'https://sigstore.dev/cosign/sign/v1',
  },
  // A public registry: no sign-in.
  credentials: undefined,
});
