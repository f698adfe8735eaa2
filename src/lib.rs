//! agent-bundle: check, lock, sign, pack and verify AI agent release bundles.
