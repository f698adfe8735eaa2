"""A Sigstore instance of our own for the tests: a Fulcio-like CA, a CT log and a Rekor log
(their keys made afresh on every run), and a keyless signature over one file as
`cosign sign-blob --bundle` would make it: a short-lived certificate with the signer's identity,
OIDC issuer and GitHub workflow claims, an embedded SCT, and a hashedrekord log entry with its
signed entry timestamp, inclusion proof and signed checkpoint.

    python3 test_instance.py ARTIFACT OUT_DIR IDENTITY ISSUER [CLAIM_OID=VALUE ...]

writes OUT_DIR/trusted_root.json and OUT_DIR/artifact.sigstore.json (bundle v0.3). The claim
`bad-signature` instead signs other bytes (logged as they are, so only the signature fails).
Only `cryptography` (a dependency of sigstore-python) is used; nothing touches the network.
"""

import base64
import datetime
import hashlib
import json
import struct
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
FULCIO = "1.3.6.1.4.1.57264.1."


def b64(data):
    return base64.b64encode(data).decode()


def spki(key):
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def der_len(n):
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def utf8string(text):
    data = text.encode()
    return b"\x0c" + der_len(len(data)) + data


def sign(key, data):
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main(artifact, out, identity, issuer, claims):
    data = open(artifact, "rb").read()
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    ca_key, ct_key, rekor_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))

    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agent-bundle tests"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "test-fulcio")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=365))
          .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))

    san = (x509.RFC822Name(identity) if "@" in identity and "://" not in identity
           else x509.UniformResourceIdentifier(identity))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca_name)
            .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(minutes=10))
            .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .add_extension(x509.SubjectAlternativeName([san]), critical=True)
            .add_extension(x509.UnrecognizedExtension(ObjectIdentifier(FULCIO + "1"), issuer.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(ObjectIdentifier(FULCIO + "8"), utf8string(issuer)), critical=False))
    bad_signature = "bad-signature" in claims
    for claim in (c for c in claims if c != "bad-signature"):
        number, value = claim.split("=", 1)
        leaf = leaf.add_extension(
            x509.UnrecognizedExtension(ObjectIdentifier(FULCIO + number), utf8string(value)), critical=False)

    # The SCT signs the certificate's TBS without the SCT list (RFC 6962 section 3.2): the
    # same builder, signed once without it, gives those bytes.
    tbs = leaf.sign(ca_key, hashes.SHA256()).tbs_certificate_bytes
    ct_id = hashlib.sha256(spki(ct_key)).digest()
    sct_time = int(now.timestamp() * 1000)
    signed = (b"\x00\x00" + struct.pack(">Q", sct_time) + b"\x00\x01"
              + hashlib.sha256(spki(ca_key)).digest()
              + len(tbs).to_bytes(3, "big") + tbs + b"\x00\x00")
    sct_sig = sign(ct_key, signed)
    sct = (b"\x00" + ct_id + struct.pack(">Q", sct_time) + b"\x00\x00" + b"\x04\x03"
           + struct.pack(">H", len(sct_sig)) + sct_sig)
    sct_list = struct.pack(">H", len(sct) + 2) + struct.pack(">H", len(sct)) + sct
    cert = (leaf.add_extension(x509.UnrecognizedExtension(SCT_LIST, b"\x04" + der_len(len(sct_list)) + sct_list),
                               critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_der = cert.public_bytes(serialization.Encoding.DER)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)

    digest = hashlib.sha256(data).digest()
    signature = sign(leaf_key, data + b"tampered" if bad_signature else data)

    # A hashedrekord entry, alone in a log of size 1.
    body = canonical({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
        "signature": {"content": b64(signature), "publicKey": {"content": b64(cert_pem)}}}})
    rekor_id = hashlib.sha256(spki(rekor_key)).digest()
    integrated = int(now.timestamp())
    set_sig = sign(rekor_key, canonical({"body": b64(body), "integratedTime": integrated,
                                         "logID": rekor_id.hex(), "logIndex": 0}))
    root_hash = hashlib.sha256(b"\x00" + body).digest()
    origin = "rekor.test - 1"
    note = f"{origin}\n1\n{b64(root_hash)}\n"
    note_sig = rekor_id[:4] + sign(rekor_key, note.encode())
    checkpoint = f"{note}\n\u2014 rekor.test {b64(note_sig)}\n"

    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": b64(cert_der)},
            "tlogEntries": [{
                "logIndex": "0",
                "logId": {"keyId": b64(rekor_id)},
                "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                "integratedTime": str(integrated),
                "inclusionPromise": {"signedEntryTimestamp": b64(set_sig)},
                "inclusionProof": {"logIndex": "0", "rootHash": b64(root_hash), "treeSize": "1",
                                   "hashes": [], "checkpoint": {"envelope": checkpoint}},
                "canonicalizedBody": b64(body),
            }],
        },
        "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
                             "signature": b64(signature)},
    }
    start = (now - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def log(key, url):
        return {"baseUrl": url, "hashAlgorithm": "SHA2_256",
                "publicKey": {"rawBytes": b64(spki(key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                              "validFor": {"start": start}},
                "logId": {"keyId": b64(hashlib.sha256(spki(key)).digest())}}

    root = {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [log(rekor_key, "https://rekor.test")],
        "certificateAuthorities": [{
            "subject": {"organization": "agent-bundle tests", "commonName": "test-fulcio"},
            "uri": "https://fulcio.test",
            "certChain": {"certificates": [{"rawBytes": b64(ca.public_bytes(serialization.Encoding.DER))}]},
            "validFor": {"start": start}}],
        "ctlogs": [log(ct_key, "https://ctfe.test")],
        "timestampAuthorities": [],
    }
    with open(f"{out}/trusted_root.json", "w") as f:
        json.dump(root, f, indent=2)
    with open(f"{out}/artifact.sigstore.json", "w") as f:
        json.dump(bundle, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
