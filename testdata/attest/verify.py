"""Independent verifiers of the attestations `bundle pack --attest` writes.

Usage: verify.py PUBLIC_KEY.pub BUNDLE SIGSTORE_JSON...

For each Sigstore bundle: sigstore-models parses it (Bundle.model_validate_json), securesystemslib
verifies its DSSE envelope with the minisign public key (Envelope.verify, threshold 1) and
rejects the envelope once its payload is tampered with, in-toto-attestation validates the
statement and parses a SLSA Provenance v1 predicate strictly (no unknown fields), and the
subject digest is the SHA-256 of BUNDLE computed here. Prints one line per file; exits non-zero
on the first failure.
"""

import base64
import copy
import hashlib
import json
import sys

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey
from sigstore_models.bundle.v1 import Bundle


def minisign_key(path):
    raw = base64.b64decode(open(path).read().splitlines()[1])
    # "Ed" || key id (8 bytes, little-endian as minisign prints it) || Ed25519 public key
    keyid = raw[2:10][::-1].hex().upper()
    return SSlibKey(keyid, "ed25519", "ed25519", {"public": raw[10:].hex()})


def main():
    key = minisign_key(sys.argv[1])
    sha256 = hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
    for path in sys.argv[3:]:
        text = open(path).read()
        Bundle.model_validate_json(text)
        doc = json.loads(text)
        assert doc["verificationMaterial"]["publicKey"]["hint"] == key.keyid, "hint is the key id"
        envelope = Envelope.from_dict(copy.deepcopy(doc["dsseEnvelope"]))
        envelope.verify([key], 1)
        tampered = Envelope.from_dict(copy.deepcopy(doc["dsseEnvelope"]))
        tampered.payload = tampered.payload.replace(b"sha256", b"sha512")
        try:
            tampered.verify([key], 1)
            raise SystemExit(f"{path}: a tampered envelope verified")
        except VerificationError:
            pass
        payload = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
        statement = json_format.ParseDict(payload, statement_pb2.Statement())
        Statement.copy_from_pb(statement).validate()
        assert payload["subject"][0]["digest"]["sha256"] == sha256, "subject is the bundle"
        if payload["predicateType"] == "https://slsa.dev/provenance/v1":
            json_format.ParseDict(payload["predicate"], provenance_pb2.Provenance(), ignore_unknown_fields=False)
        print("ok", path, payload["predicateType"])


if __name__ == "__main__":
    main()
