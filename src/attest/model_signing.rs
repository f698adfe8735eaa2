//! OpenSSF model signing v1.0 (sigstore/model-transparency, the `model_signing` package): a
//! folder's files and their digests as an in-toto statement of predicate type
//! `https://model_signing/signature/v1.0`, in a DSSE envelope signed with an elliptic-curve key,
//! in a Sigstore bundle v0.3 whose `publicKey.hint` is the SHA-256 (hex) of the public key's PEM.
//!
//! The predicate is what `model_signing` 1.1.1 writes and checks: `serialization` (method
//! `files`, `hash_type`, `allow_symlinks`, `ignore_paths`) and `resources` (each file's `name`,
//! `algorithm` and `digest`), sorted by path as its manifest sorts them; the subject is the
//! folder's name with the SHA-256 over the resources' raw digests in that order (the "root
//! digest" its verifier recomputes). The hash is SHA-256: the stock `model_signing verify`
//! command always hashes a folder with SHA-256 whatever `hash_type` the signature names (1.1.1
//! refuses a BLAKE3 signature of an unchanged folder as "Hash mismatch"), so a BLAKE3 signature
//! would verify only through its Python API.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::dsse::{PAYLOAD_TYPE_IN_TOTO, pae};
use super::sigstore_bundle::MEDIA_TYPE_V03;
use super::statement::{Statement, Subject};
use crate::keys::{P256Signer, SignerError, p256_key};

/// The predicate type of a model signature v1.0.
pub const PREDICATE_TYPE: &str = "https://model_signing/signature/v1.0";
/// What `model_signing` leaves out of a folder by default (its git paths); written into
/// `ignore_paths` so that its verifier leaves them out too.
pub const GIT_PATHS: [&str; 4] = [".git", ".gitattributes", ".github", ".gitignore"];

/// One file of the folder: its `/`-separated path inside it and its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub name: String,
    pub sha256: [u8; 32],
}

/// The order `model_signing` sorts a manifest in: by path components (Python's `PurePath`
/// ordering), so `a/b` comes before `a.txt`.
pub fn sort(resources: &mut [Resource]) {
    resources.sort_by(|a, b| a.name.split('/').cmp(b.name.split('/')));
}

/// The statement over `resources` (sorted with [`sort`]) of the folder named `model_name`;
/// `ignore_paths` are the folder's paths its verifier must leave out.
pub fn statement(model_name: &str, resources: &[Resource], ignore_paths: &[String]) -> Statement {
    let mut root = Sha256::new();
    for r in resources {
        root.update(r.sha256);
    }
    let listed: Vec<Value> = resources
        .iter()
        .map(|r| json!({"name": r.name, "algorithm": "sha256", "digest": hex::encode(r.sha256)}))
        .collect();
    let predicate = json!({
        "serialization": {
            "method": "files",
            "hash_type": "sha256",
            "allow_symlinks": false,
            "ignore_paths": ignore_paths,
        },
        "resources": listed,
    });
    let subject = Subject {
        name: model_name.to_owned(),
        digest: BTreeMap::from([("sha256".to_owned(), hex::encode(root.finalize()))]),
    };
    Statement::new(vec![subject], PREDICATE_TYPE, predicate)
}

/// The signature file: `statement` in a DSSE envelope signed by `key` (ECDSA P-256, SHA-256,
/// DER, over the PAE), in a Sigstore bundle whose hint names the public key as `model_signing`
/// does. Compact JSON and a newline; the same statement and key file give the same bytes (a
/// token or an agent may sign with a random nonce).
pub fn sign(statement: &Statement, key: &mut P256Signer) -> Result<Vec<u8>, SignerError> {
    let payload = statement.to_payload();
    let signature = key.sign(&pae(PAYLOAD_TYPE_IN_TOTO, &payload))?;
    let hint = hex::encode(Sha256::digest(p256_key::public_pem(&key.verifying_key()).as_bytes()));
    let bundle = json!({
        "mediaType": MEDIA_TYPE_V03,
        "verificationMaterial": {"publicKey": {"hint": hint}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": STANDARD.encode(&payload),
            "payloadType": PAYLOAD_TYPE_IN_TOTO,
            "signatures": [{"sig": STANDARD.encode(signature), "keyid": ""}],
        },
    });
    let mut bytes = serde_json::to_vec(&bundle).expect("a bundle serialises");
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_sort_by_path_components_and_the_root_digest_covers_them_in_order() {
        let mut r = vec![
            Resource { name: "a.txt".into(), sha256: [1; 32] },
            Resource { name: "a/b".into(), sha256: [2; 32] },
            Resource { name: "B".into(), sha256: [3; 32] },
        ];
        sort(&mut r);
        let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["B", "a/b", "a.txt"]);
        let s = statement("m", &r, &[]);
        let mut root = Sha256::new();
        for d in [[3u8; 32], [2; 32], [1; 32]] {
            root.update(d);
        }
        let want = hex::encode(root.finalize());
        assert_eq!(s.subject[0].digest["sha256"], want);
        assert_eq!(s.predicate["resources"][1]["name"], "a/b");
    }
}
