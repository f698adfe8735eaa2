// sigstore-js (@sigstore/verify from npm) as an independent verifier of key-signed Sigstore
// bundles: `node verify.js PUBLIC_KEY.pub SIGSTORE_JSON...` (NODE_PATH = the npm cache's
// node_modules). The minisign public key is given to the verifier as trust material under its
// key id, which must be the bundle's `publicKey.hint`. Our bundles carry no transparency-log
// entry and no timestamp, so the verifier is told to require none (tlogThreshold,
// ctlogThreshold and timestampThreshold 0); everything else is stock: the bundle is parsed
// and validated by @sigstore/bundle, and the DSSE signature (the first one) is checked over
// the pre-authentication encoding with node's crypto. Prints `ok FILE` per bundle; a refusal
// throws (exit 1).
const fs = require('fs');
const { bundleFromJSON } = require('@sigstore/bundle');
const { Verifier, toSignedEntity, toTrustMaterial } = require('@sigstore/verify');

const [pub, ...files] = process.argv.slice(2);
// "Ed" || key id (8 bytes, little-endian as minisign prints it) || Ed25519 public key
const raw = Buffer.from(fs.readFileSync(pub, 'utf8').split('\n')[1], 'base64');
const keyid = Buffer.from(raw.subarray(2, 10)).reverse().toString('hex').toUpperCase();
// The SubjectPublicKeyInfo DER of an Ed25519 key: a fixed 12-byte prefix, then the key.
const der = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw.subarray(10)]);
const root = { certificateAuthorities: [], timestampAuthorities: [], tlogs: [], ctlogs: [] };
const trust = toTrustMaterial(root, { [keyid]: { rawBytes: der } });
const verifier = new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 });
for (const file of files) {
  const bundle = bundleFromJSON(JSON.parse(fs.readFileSync(file, 'utf8')));
  verifier.verify(toSignedEntity(bundle));
  console.log('ok', file);
}
