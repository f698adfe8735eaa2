#!/usr/bin/env python3
"""The independent side of the A2A agent card tests: the real `a2a-sdk` (PyPI), its
signature verifier and signer (a2a.utils.signing), nothing of ours.

    card.py verify CARD PUB             exits 0 when the SDK's verifier accepts CARD with the
                                        key of PUB: a minisign public key file (EdDSA, kid = its
                                        id) or a P-256 public key in PEM (ES256, kid = its RFC
                                        7638 JWK thumbprint, computed here)
    card.py sign OUT_CARD OUT_PUB       writes a card the SDK signs with a new Ed25519 key, and
                                        that key as a minisign public key file (kid = its id)
    card.py sign-es256 OUT_CARD OUT_PUB the same with a new P-256 key (ES256), the public key
                                        written as PEM

The signed card has non-ASCII text and numbers in every position a card can hold them.
"""
import base64
import json
import os
import sys

from a2a.types import AgentCard
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier
import hashlib

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt.api_jwk import PyJWK


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(raw: bytes) -> PyJWK:
    return PyJWK({"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}, algorithm="EdDSA")


def p256_jwk(key: ec.EllipticCurvePublicKey) -> dict:
    numbers = key.public_numbers()
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": b64url(numbers.x.to_bytes(32, "big")),
        "y": b64url(numbers.y.to_bytes(32, "big")),
    }


def thumbprint(jwk: dict) -> str:
    # RFC 7638 §3: the required members in lexicographic order, no whitespace
    members = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
    return b64url(hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest())


def key_id_hex(key_id: bytes) -> str:
    # minisign shows a key id as the little-endian u64 in uppercase hex
    return int.from_bytes(key_id, "little").to_bytes(8, "big").hex().upper()


def verify(card_path: str, pub_path: str) -> int:
    with open(pub_path) as f:
        text = f.read()
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        jwk = p256_jwk(load_pem_public_key(text.encode()))
        want, key, alg = thumbprint(jwk), PyJWK(jwk, algorithm="ES256"), "ES256"
    else:
        raw = base64.b64decode(text.splitlines()[1])
        assert raw[:2] == b"Ed", "not a minisign Ed25519 public key"
        want, key, alg = key_id_hex(raw[2:10]), public_jwk(raw[10:42]), "EdDSA"
    with open(card_path, encoding="utf-8") as f:
        card = ParseDict(json.load(f), AgentCard())

    def key_provider(kid, jku):
        assert jku is None, "our cards name no jku"
        assert kid == want, f"kid {kid} is not the key's id {want}"
        return key

    # Only the algorithm of the key given: an EdDSA card is not accepted with a P-256 key.
    create_signature_verifier(key_provider, [alg])(card)
    print(f"a2a-sdk: {alg} signature valid")
    return 0


def sign(card_out: str, pub_out: str, es256: bool) -> int:
    if es256:
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = p256_jwk(key.public_key())
        kid, alg, public = thumbprint(jwk), "ES256", PyJWK(jwk, algorithm="ES256")
        pub_text = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()
    else:
        key = Ed25519PrivateKey.generate()
        pk = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        key_id = os.urandom(8)
        kid, alg, public = key_id_hex(key_id), "EdDSA", public_jwk(pk)
        pub_text = f"untrusted comment: a2a-sdk test key {kid}\n" + base64.b64encode(b"Ed" + key_id + pk).decode() + "\n"
    card = ParseDict(
        {
            "name": "Ägent ☃ 日本語",
            "description": "Zählt Äpfel — 数える 🍎, \"quoted\" \\ back\u2028slash",
            "supportedInterfaces": [
                {"url": "https://agents.example/ä", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "version": "1.0.0",
            "capabilities": {
                "streaming": False,
                "extensions": [
                    {
                        "uri": "https://example.com/ext/ünïcode",
                        "required": False,
                        "params": {
                            "int": 1,
                            "neg": -0.0,
                            "big": 1e21,
                            "beyond_2_53": 9007199254740993,
                            "small": 5e-324,
                            "tenth": 0.1,
                            "exp": 1e-7,
                            "nested": {"list": [1, 2.5, -3e30, {"ε": 42}], "\U0001F600": 1, "\uFB01": 2},
                            "empty": "",
                            "text": "ça ∑ 𝄞",
                        },
                    }
                ],
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "zählen", "name": "Zählen", "description": "数える", "tags": ["ü", "1e3"]},
            ],
        },
        AgentCard(),
    )
    signer = create_agent_card_signer(key, {"alg": alg, "kid": kid, "typ": "JOSE", "jku": None})
    signed = signer(card)
    # The SDK's own verifier must accept what its signer made before we are asked to.
    create_signature_verifier(lambda k, j: public, [alg])(signed)
    with open(card_out, "w", encoding="utf-8") as f:
        json.dump(MessageToDict(signed), f, ensure_ascii=False, indent=2)
    with open(pub_out, "w") as f:
        f.write(pub_text)
    print(f"a2a-sdk: {alg} signed by {kid}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2], sys.argv[3]))
    sys.exit(sign(sys.argv[2], sys.argv[3], es256=sys.argv[1] == "sign-es256"))
