"""Independent verifiers of the verification summaries `bundle verify --emit-vsa` writes.

Usage: verify_vsa.py VERIFIER_KEY.pub BUNDLE_SHA256 SIGSTORE_JSON...

For each Sigstore bundle: sigstore-models parses it; securesystemslib verifies its DSSE envelope
with the verifier's public key — a minisign public key file, or a P-256 public key in PEM
(scheme ecdsa-sha2-nistp256, key id the SHA-256 of its PEM) — and refuses it once a byte of the
payload changed;
in-toto-attestation validates the Statement v1 and parses the predicate with its SLSA VSA v1
protobuf (predicates/vsa/v1) with no unknown field allowed.

That protobuf (in-toto-attestation 0.9.3, and upstream's vsa.proto today) departs from the SLSA
VSA v1.0 specification in two fields: it has no `verifier.version` (the specification's map of
component to version) and it declares `verifiedLevels` a single string where the specification
requires an array (in-toto/attestation issue 425, fix proposed in pull request 429). Those two
fields are checked here as the specification says (a map of strings, a list of strings) and
taken out before the strict parse; every other field must parse as the protobuf's. The subject
must be BUNDLE_SHA256.
Prints `ok FILE RESULT LEVELS` per file; exits non-zero on the first failure.
"""

import base64
import copy
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization

from google.protobuf import json_format
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey
from sigstore_models.bundle.v1 import Bundle


def minisign_key(path):
    raw = base64.b64decode(open(path).read().splitlines()[1])
    keyid = raw[2:10][::-1].hex().upper()
    return SSlibKey(keyid, "ed25519", "ed25519", {"public": raw[10:].hex()})


def pem_key(path):
    public = serialization.load_pem_public_key(open(path, "rb").read())
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return SSlibKey.from_crypto(public, keyid=hashlib.sha256(pem).hexdigest(), scheme="ecdsa-sha2-nistp256")


def main():
    pem = open(sys.argv[1], "rb").read().startswith(b"-----BEGIN PUBLIC KEY-----")
    key = pem_key(sys.argv[1]) if pem else minisign_key(sys.argv[1])
    sha256 = sys.argv[2]
    for path in sys.argv[3:]:
        text = open(path).read()
        Bundle.model_validate_json(text)
        doc = json.loads(text)
        Envelope.from_dict(copy.deepcopy(doc["dsseEnvelope"])).verify([key], 1)
        tampered = Envelope.from_dict(copy.deepcopy(doc["dsseEnvelope"]))
        tampered.payload = tampered.payload.replace(b"PASSED", b"FAILED").replace(b"sha256", b"sha512")
        try:
            tampered.verify([key], 1)
            raise SystemExit(f"{path}: a tampered envelope verified")
        except VerificationError:
            pass
        payload = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
        Statement.copy_from_pb(json_format.ParseDict(payload, statement_pb2.Statement())).validate()
        assert payload["predicateType"] == "https://slsa.dev/verification_summary/v1", payload["predicateType"]
        assert payload["subject"][0]["digest"]["sha256"] == sha256, "subject is the bundle"
        predicate = copy.deepcopy(payload["predicate"])
        version = predicate["verifier"].pop("version")
        assert isinstance(version, dict) and all(isinstance(v, str) for v in version.values()), version
        levels = predicate.pop("verifiedLevels")
        assert isinstance(levels, list) and all(isinstance(v, str) for v in levels), levels
        vsa = json_format.ParseDict(predicate, vsa_pb2.VerificationSummary(), ignore_unknown_fields=False)
        assert vsa.verification_result in ("PASSED", "FAILED"), vsa.verification_result
        assert vsa.HasField("time_verified") and vsa.verifier.id and vsa.policy.digest["sha256"], predicate
        print("ok", path, vsa.verification_result, ",".join(levels))


if __name__ == "__main__":
    main()
