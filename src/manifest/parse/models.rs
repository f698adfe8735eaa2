//! `[[models]]`: model folders of the agent that ship signed by their vendor (an OpenSSF model
//! signature, `model_signing sign key` or `sign sigstore`), each with the public key its
//! signature must verify with or the Sigstore identity that must have signed it, and the shard
//! size when it was signed by file shards. `check`, `pack` and `verify` check every one
//! (`crate::attest::model_verify`).

use toml_edit::{Item, TableLike};

use super::super::{ModelSigner, ModelSpec};
use super::Parser;
use crate::diagnostic::Code;
use crate::keyless::{Field, Given, IdentityPolicy, IdentityPolicyError};
use crate::limits::{MAX_MODELS, MIN_MODEL_SHARD_BYTES};
use crate::paths;

const MODEL_KEYS: &[&str] =
    &["path", "signature", "key", "identity", "identity_regexp", "issuer", "issuer_regexp", "shard_size"];
const IDENTITY_KEYS: [&str; 4] = ["identity", "identity_regexp", "issuer", "issuer_regexp"];

impl Parser<'_> {
    pub(super) fn models(&mut self, root: &dyn TableLike) -> Vec<ModelSpec> {
        let mut models = Vec::new();
        let Some(item) = root.get("models") else { return models };
        let Some(tables) = item.as_array_of_tables() else {
            self.error(
                Code::WrongType,
                "models",
                item.span(),
                "`models` must be an array of tables (`[[models]]`)".to_owned(),
                "write each model as `[[models]]` with path and key",
            );
            return models;
        };
        if tables.len() > MAX_MODELS {
            self.error(
                Code::LimitExceeded,
                "models",
                item.span(),
                format!("{} `[[models]]` entries; at most {MAX_MODELS} are accepted", tables.len()),
                "sign the models' parent folder as one model",
            );
            return models;
        }
        for (i, table) in tables.iter().enumerate() {
            let key = format!("models[{i}]");
            self.known_keys(table, &key, MODEL_KEYS, "a [[models]] entry");
            let path = self.required(table, &key, "path").and_then(|i| self.model_path(i, &format!("{key}.path")));
            let signature = match table.get("signature") {
                Some(i) => self.model_path(i, &format!("{key}.signature")),
                None => path.as_ref().map(|p| format!("{p}/{}", crate::attest::model_verify::DEFAULT_SIGNATURE)),
            };
            let signer = self.model_signer(table, &key);
            let shard_size = self.shard_size(table, &key);
            if let (Some(path), Some(signature), Some(signer), Some(shard_size)) = (path, signature, signer, shard_size)
            {
                if models.iter().any(|m: &ModelSpec| m.path == path) {
                    self.error(
                        Code::DuplicateId,
                        &format!("{key}.path"),
                        table.get("path").and_then(Item::span),
                        format!("the model folder `{path}` is listed twice"),
                        "keep one [[models]] entry per folder",
                    );
                    continue;
                }
                models.push(ModelSpec { path, signature, signer, shard_size });
            }
        }
        models
    }

    /// `key`, or `identity[_regexp]` and `issuer[_regexp]` (through the one identity-policy
    /// constructor the keyless signers use): one of the two, never both.
    fn model_signer(&mut self, table: &dyn TableLike, key: &str) -> Option<ModelSigner> {
        let named: Vec<&str> = IDENTITY_KEYS.into_iter().filter(|k| table.contains_key(k)).collect();
        let span = table.get("path").and_then(Item::span);
        match (table.get("key"), named.is_empty()) {
            (Some(item), true) => self.model_path(item, &format!("{key}.key")).map(ModelSigner::Key),
            (Some(_), false) => {
                self.error(
                    Code::InvalidModelSigner,
                    &format!("{key}.key"),
                    table.get("key").and_then(Item::span),
                    format!("a [[models]] entry names a key and an identity (`{}`)", named.join("`, `")),
                    "keep `key` for a signature made with a key, or `identity` and `issuer` for one made with Sigstore",
                );
                None
            }
            (None, true) => {
                self.error(
                    Code::MissingField,
                    &format!("{key}.key"),
                    span,
                    format!("`{key}` names neither a `key` nor an `identity` and `issuer`"),
                    "name the vendor's public key (`key = \"keys/vendor.pub\"`), or the Sigstore identity that signed (`identity`, `issuer`)",
                );
                None
            }
            (None, false) => self.model_identity(table, key).map(ModelSigner::Identity),
        }
    }

    fn model_identity(&mut self, table: &dyn TableLike, key: &str) -> Option<IdentityPolicy> {
        let mut text = |name: &str| {
            let item = table.get(name)?;
            self.string(item, &format!("{key}.{name}")).map(str::to_owned)
        };
        let [identity, identity_regexp, issuer, issuer_regexp] = IDENTITY_KEYS.map(&mut text);
        let policy =
            IdentityPolicy::new(Given::of(&identity, &identity_regexp), Given::of(&issuer, &issuer_regexp), Vec::new());
        match policy {
            Ok(policy) => Some(policy),
            Err(errors) => {
                for e in errors {
                    let field = match e.field() {
                        Field::Identity => "identity",
                        Field::Issuer => "issuer",
                    };
                    let (code, message, help) = match &e {
                        IdentityPolicyError::Neither(_) => (
                            Code::MissingField,
                            format!("`{key}` names no `{field}` (exactly, or `{field}_regexp`)"),
                            "a Sigstore identity needs both the certificate identity and its OIDC issuer",
                        ),
                        IdentityPolicyError::Both(_) => (
                            Code::InvalidModelSigner,
                            format!("`{key}` gives `{field}` and `{field}_regexp`"),
                            "give one of them",
                        ),
                        IdentityPolicyError::Pattern(_, why) => (
                            Code::InvalidModelSigner,
                            format!("`{key}.{field}_regexp`: {why}"),
                            "write a regular expression that matches the whole value",
                        ),
                    };
                    let at = table.get(field).or_else(|| table.get(&format!("{field}_regexp"))).and_then(Item::span);
                    self.error(code, &format!("{key}.{field}"), at, message, help);
                }
                None
            }
        }
    }

    /// `shard_size`: absent (`Some(None)`), or a whole number of bytes at least
    /// [`MIN_MODEL_SHARD_BYTES`]; `None` when it is not.
    fn shard_size(&mut self, table: &dyn TableLike, key: &str) -> Option<Option<u64>> {
        let Some(item) = table.get("shard_size") else { return Some(None) };
        let name = format!("{key}.shard_size");
        let n = self.integer(item, &name)?;
        match u64::try_from(n) {
            Ok(n) if n >= MIN_MODEL_SHARD_BYTES => Some(Some(n)),
            _ => {
                self.error(
                    Code::LimitExceeded,
                    &name,
                    item.span(),
                    format!("`{name}` = {n}; a shard is at least {MIN_MODEL_SHARD_BYTES} bytes"),
                    "use the shard size the vendor signed with (model_signing's default is 1000000000)",
                );
                None
            }
        }
    }

    fn model_path(&mut self, item: &Item, key: &str) -> Option<String> {
        let text = self.string(item, key)?;
        let trimmed = text.trim_end_matches('/');
        match paths::check(trimmed) {
            Ok(()) => Some(trimmed.to_owned()),
            Err(why) => {
                self.error(
                    Code::UnsafePath,
                    key,
                    item.span(),
                    format!("`{key}` = \"{text}\" is not a safe relative path inside the agent: {why}"),
                    "name a folder or file inside the agent folder, e.g. `models/classifier`",
                );
                None
            }
        }
    }
}
