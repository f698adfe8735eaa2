//! `[[models]]`: model folders of the agent that ship signed by their vendor (an OpenSSF model
//! signature, `model_signing sign key`), each with the public key its signature must verify
//! with. `check`, `pack` and `verify` check every one (`crate::attest::model_verify`).

use toml_edit::{Item, TableLike};

use super::super::ModelSpec;
use super::Parser;
use crate::diagnostic::Code;
use crate::limits::MAX_MODELS;
use crate::paths;

const MODEL_KEYS: &[&str] = &["path", "signature", "key"];

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
            let public_key = self.required(table, &key, "key").and_then(|i| self.model_path(i, &format!("{key}.key")));
            if let (Some(path), Some(signature), Some(key)) = (path, signature, public_key) {
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
                models.push(ModelSpec { path, signature, key });
            }
        }
        models
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
