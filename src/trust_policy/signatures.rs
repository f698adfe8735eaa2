//! Files of several minisign signatures over one file: `BUNDLE.cosig` (co-signatures over a
//! bundle's manifest.toml) and `POLICY.minisig` (the signatures of a trust policy).
//!
//! Each signature is an unmodified minisign signature box (untrusted comment, signature,
//! trusted comment, global signature: four lines); a file holds one or more, blank lines
//! between them allowed. Cut out any four lines and `minisign -V` checks them.

use crate::minisign::Signature;

/// A signatures file is read whole; this many bytes and signatures at most.
pub use crate::limits::{MAX_SIGNATURES_FILE_BYTES as MAX_SIGNATURES_BYTES, MAX_SIGNATURES_PER_FILE as MAX_SIGNATURES};

/// A co-signature in a registry: a referrer of the bundle's manifest with this `artifactType`
/// (docs/FORMAT.md, "Co-signatures"), one per co-signer.
pub const COSIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.agent-bundle.cosignature.v1";
/// Its layer holding the minisign signature box (what the gate counts).
pub const COSIGNATURE_MEDIA_TYPE: &str = "application/vnd.agent-bundle.cosignature.v1.minisig";

/// Where the co-signatures of a bundle file are kept: `<bundle>.cosig` beside it.
pub fn cosig_path(bundle: &std::path::Path) -> std::path::PathBuf {
    let mut name = bundle.as_os_str().to_owned();
    name.push(".cosig");
    name.into()
}

/// Where the signatures of a trust policy file are kept: `<policy>.minisigs` beside it.
pub fn policy_sigs_path(policy: &std::path::Path) -> std::path::PathBuf {
    let mut name = policy.as_os_str().to_owned();
    name.push(".minisigs");
    name.into()
}

/// The signatures in a file's text, in file order; the error names the signature.
pub fn parse(text: &str) -> Result<Vec<Signature>, String> {
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err("the file holds no signature".to_owned());
    }
    if !lines.len().is_multiple_of(4) {
        return Err(format!(
            "{} non-empty lines: a signatures file holds minisign signatures of 4 lines each",
            lines.len()
        ));
    }
    if lines.len() / 4 > MAX_SIGNATURES {
        return Err(format!("more than {MAX_SIGNATURES} signatures"));
    }
    lines
        .chunks(4)
        .enumerate()
        .map(|(i, box_lines)| {
            let mut text = box_lines.join("\n");
            text.push('\n');
            Signature::from_text(&text).map_err(|e| format!("signature {}: {e}", i + 1))
        })
        .collect()
}

/// The text of a signatures file: each box as minisign writes it, one blank line between.
pub fn to_text(signatures: &[Signature]) -> String {
    signatures.iter().map(Signature::to_text).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minisign::SecretKey;

    #[test]
    fn several_boxes_round_trip_and_a_cut_box_is_refused() {
        let (a, b) = (SecretKey::generate(), SecretKey::generate());
        let sigs = vec![a.sign(b"data", "t1", "u1").unwrap(), b.sign(b"data", "t2", "u2").unwrap()];
        let text = to_text(&sigs);
        assert_eq!(parse(&text).unwrap(), sigs);
        let cut: Vec<&str> = text.lines().filter(|l| !l.is_empty()).take(7).collect();
        assert!(parse(&cut.join("\n")).unwrap_err().contains("7 non-empty lines"));
        assert!(parse("\n\n").is_err());
    }
}
