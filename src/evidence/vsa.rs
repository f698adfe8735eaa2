//! SLSA Verification Summary Attestation v1 (`https://slsa.dev/verification_summary/v1`,
//! slsa.dev/spec/v1.0/verification_summary): the gate's verdict on one bundle as a signed
//! statement a later admission step can check without running `bundle`.
//!
//! The predicate's fields are the specification's, in its order, so that the same verdict
//! always gives the same bytes. Beside the SLSA build level, `verifiedLevels` carries properties
//! of our own (the specification allows custom values that do not start with `SLSA_`), each
//! documented in [`Property`] and in the attestations guide.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The predicate type of a VSA v1.
pub const VSA_V1: &str = "https://slsa.dev/verification_summary/v1";
/// The SLSA version the levels refer to.
pub const SLSA_VERSION: &str = "1.0";
/// The prefix of the custom `verifiedLevels` value a FAILED summary names its reason code with:
/// `AGENT_BUNDLE_REFUSED_` and the code in capitals (`attestation_missing` →
/// `AGENT_BUNDLE_REFUSED_ATTESTATION_MISSING`).
pub const REFUSED_PREFIX: &str = "AGENT_BUNDLE_REFUSED_";

/// `predicate`, field names and order as the specification gives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Predicate {
    pub verifier: Verifier,
    /// RFC 3339, UTC.
    pub time_verified: String,
    /// The bundle file as named on the command line, or its `oci://` reference.
    pub resource_uri: String,
    pub policy: ResourceDescriptor,
    pub input_attestations: Vec<ResourceDescriptor>,
    /// `PASSED` or `FAILED`.
    pub verification_result: String,
    pub verified_levels: Vec<String>,
    pub slsa_version: String,
}

/// `verifier`: who judged, and with which version of which component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verifier {
    pub id: String,
    pub version: BTreeMap<String, String>,
}

/// A resource named by URI with its digests (algorithm → lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDescriptor {
    pub uri: String,
    pub digest: BTreeMap<String, String>,
}

impl ResourceDescriptor {
    pub fn sha256(uri: impl Into<String>, hex: impl Into<String>) -> Self {
        ResourceDescriptor { uri: uri.into(), digest: BTreeMap::from([("sha256".to_owned(), hex.into())]) }
    }
}

/// The properties of our own a PASSED summary may list in `verifiedLevels`, each only when the
/// gate checked it for this bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Property {
    /// The bundle's signature verified with a trusted key (always, on PASSED).
    Signed,
    /// A trust policy's signer rules were met (`--trust-policy`).
    ThresholdMet,
    /// Every risky tool's contract is the approved one (`--baseline`).
    ContractsApproved,
    /// A contract attestation, signed by a trusted key, says exactly the bundle's contracts.
    ContractAttested,
    /// A keyless (Sigstore) signature over the bundle file verified (`--sigstore`, or an
    /// identity signer of the trust policy).
    KeylessVerified,
    /// The bundle is not older than one accepted before (`--state`).
    NotRolledBack,
}

impl Property {
    pub fn as_str(self) -> &'static str {
        match self {
            Property::Signed => "AGENT_BUNDLE_SIGNED",
            Property::ThresholdMet => "AGENT_BUNDLE_THRESHOLD_MET",
            Property::ContractsApproved => "AGENT_BUNDLE_CONTRACTS_APPROVED",
            Property::ContractAttested => "AGENT_BUNDLE_CONTRACT_ATTESTED",
            Property::KeylessVerified => "AGENT_BUNDLE_KEYLESS_VERIFIED",
            Property::NotRolledBack => "AGENT_BUNDLE_NOT_ROLLED_BACK",
        }
    }
}

/// The SLSA build level a trusted provenance supports: Build L1 ("provenance exists", and here
/// it is signed by a trusted key and names this bundle). Nothing higher is claimed: L2 needs the
/// provenance to come from a hosted build platform that signs it, which a key the gate trusts
/// does not show.
pub const SLSA_BUILD_LEVEL_1: &str = "SLSA_BUILD_LEVEL_1";

/// The `verifiedLevels` of a FAILED summary: the specification's `FAILED`, then the refusal's
/// code as a custom value.
pub fn refused_levels(code: &str) -> Vec<String> {
    vec!["FAILED".to_owned(), format!("{REFUSED_PREFIX}{}", code.to_ascii_uppercase())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_and_order_follow_the_specification() {
        let p = Predicate {
            verifier: Verifier {
                id: "https://v".into(),
                version: BTreeMap::from([("agent-bundle".into(), "1".into())]),
            },
            time_verified: "2025-10-09T08:53:20Z".into(),
            resource_uri: "a.agent.bundle".into(),
            policy: ResourceDescriptor::sha256("keys.txt", "ab"),
            input_attestations: vec![ResourceDescriptor::sha256("a.json", "cd")],
            verification_result: "PASSED".into(),
            verified_levels: vec![SLSA_BUILD_LEVEL_1.into(), Property::Signed.as_str().into()],
            slsa_version: SLSA_VERSION.into(),
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"verifier":{"id":"https://v","version":{"agent-bundle":"1"}},"timeVerified":"2025-10-09T08:53:20Z","resourceUri":"a.agent.bundle","policy":{"uri":"keys.txt","digest":{"sha256":"ab"}},"inputAttestations":[{"uri":"a.json","digest":{"sha256":"cd"}}],"verificationResult":"PASSED","verifiedLevels":["SLSA_BUILD_LEVEL_1","AGENT_BUNDLE_SIGNED"],"slsaVersion":"1.0"}"#
        );
        assert_eq!(refused_levels("attestation_missing"), ["FAILED", "AGENT_BUNDLE_REFUSED_ATTESTATION_MISSING"]);
    }
}
