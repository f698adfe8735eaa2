//! The agent-contract predicate (`https://agent-bundle.dev/attestation/agent-contract/v1`,
//! JSON Schema: schemas/agent-contract.v1.schema.json, `bundle schema contract-predicate`):
//! what an agent can do, so that a policy engine can decide without unpacking the bundle.
//!
//! Built from the same tool contracts `bundle inspect`, `diff` and `baseline` use
//! ([`crate::contract::release::AgentContracts`]), so it is exactly what the bundle's signed
//! tools.json and policy.caps say; the gate recomputes it from the verified bundle and refuses
//! an attestation that says anything else.

use serde::Serialize;
use serde_json::Value;

use crate::contract::ContractTransport;
use crate::contract::release::AgentContracts;

#[derive(Debug, Serialize)]
struct Predicate<'a> {
    agent: AgentId<'a>,
    /// The BLAKE3 of the signed manifest.toml (what `--state` records).
    manifest: ManifestDigest,
    tools: Vec<ToolFacts<'a>>,
    /// policy.caps grants, in file order.
    grants: &'a [String],
    /// The skills (`skills/<name>/`): name, digest, allowed tools. Absent when there are none,
    /// so that the predicate of an agent without skills is what it always was.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    skills: Vec<SkillFacts<'a>>,
    /// The vendor-signed models (`[[models]]`): folder, root digest as OpenSSF model signing
    /// computes it, and the SHA-256 of the vendor's public key. Absent when there are none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    models: &'a [crate::attest::model_verify::ModelFacts],
}

#[derive(Debug, Serialize)]
struct SkillFacts<'a> {
    name: &'a str,
    digest: &'a str,
    allowed_tools: &'a [String],
}

#[derive(Debug, Serialize)]
struct AgentId<'a> {
    name: &'a str,
    version: &'a str,
}

#[derive(Debug, Serialize)]
struct ManifestDigest {
    blake3: String,
}

#[derive(Debug, Serialize)]
struct ToolFacts<'a> {
    id: &'a str,
    risk: Vec<&'static str>,
    fingerprint: &'a str,
    transport: &'static str,
    /// http: the origin (`https://api.example.com`).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// exec: the program.
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    capabilities: &'a [String],
    secrets: &'a [String],
    requires_confirmation: bool,
}

/// The predicate of an agent whose manifest has this BLAKE3.
pub fn predicate(agent: &AgentContracts, manifest_blake3: &blake3::Hash) -> Value {
    let tools = agent
        .contracts
        .iter()
        .map(|c| {
            let doc = &c.doc;
            let (transport, command) = match &doc.transport {
                ContractTransport::Exec { command, .. } => ("exec", Some(command.as_str())),
                ContractTransport::Http { .. } => ("http", None),
            };
            let host = doc.transport.http_origin();
            ToolFacts {
                id: &doc.id,
                risk: c.risk.names(),
                fingerprint: &c.fingerprint,
                transport,
                host,
                command,
                capabilities: &doc.capabilities,
                secrets: &doc.secrets,
                requires_confirmation: doc.requires_confirmation,
            }
        })
        .collect();
    let predicate = Predicate {
        agent: AgentId {
            name: agent.name.as_deref().unwrap_or_default(),
            version: agent.version.as_deref().unwrap_or_default(),
        },
        manifest: ManifestDigest { blake3: manifest_blake3.to_hex().to_string() },
        tools,
        grants: &agent.grants,
        skills: agent
            .skills
            .iter()
            .map(|s| SkillFacts { name: &s.name, digest: &s.digest, allowed_tools: &s.allowed_tools })
            .collect(),
        models: &agent.models,
    };
    serde_json::to_value(predicate).expect("the contract predicate always serialises")
}
