//! A runtime loader on the supported API (`agent_bundle::api`): judge a bundle with the
//! deployment gate, keep its files as they were verified, and expose only the tools whose live
//! definitions match the contracts the bundle signed. CI runs it on a test bundle.
//!
//! usage: runtime_loader BUNDLE TRUSTED_KEYS [BASELINE]
//!
//! Exit status: 0 loaded, 1 refused (the reason code is printed), 2 could not judge.

use std::process::ExitCode;

use agent_bundle::api::{Bundle, Error, TrustedKeys, VerifyOptions};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bundle, keys, rest @ ..] = args.as_slice() else {
        eprintln!("usage: runtime_loader BUNDLE TRUSTED_KEYS [BASELINE]");
        return ExitCode::from(2);
    };
    match load(bundle, keys, rest.first()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Refused(verdict)) => {
            for reason in verdict.reasons() {
                eprintln!("refused [{}]: {}", reason.code, reason.message);
            }
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::from(2)
        }
    }
}

fn load(bundle: &str, keys: &str, baseline: Option<&String>) -> Result<(), Error> {
    let mut options = VerifyOptions::new(TrustedKeys::read(keys)?);
    if let Some(b) = baseline {
        options = options.baseline(b);
    }
    // One read of the file; every byte used below is one the gate verified.
    let agent = Bundle::open(bundle)?.load(&options)?;
    let verdict = agent.verdict();
    let id = verdict.agent().expect("a verified bundle names its agent");
    println!("loaded {} {} (signed by {})", id.name, id.version, verdict.signer().unwrap_or("?"));
    for warning in verdict.warnings() {
        println!("warning [{}]: {}", warning.code, warning.message);
    }

    // The runtime's live tool definitions: here, the bundle's own tools.json, as a registry
    // that builds its tools from the shipped definitions would.
    let tools_json = agent.file("tools.json").expect("every bundle has tools.json");
    let tools: serde_json::Value = serde_json::from_slice(tools_json).expect("verified tools.json is JSON");
    let live: Vec<String> = tools["tools"].as_array().into_iter().flatten().map(|t| t.to_string()).collect();
    let live: Vec<&str> = live.iter().map(String::as_str).collect();
    let report = agent.contract_gate().check(&live)?;
    for t in verdict.tools() {
        let blocked = report.drift.iter().any(|d| d.tool == t.id());
        let state = if blocked { "BLOCKED" } else { "exposed" };
        println!("  {state} {} [{}] {}", t.id(), t.risk(), &t.fingerprint()[..16]);
    }
    let files = agent.entries().count();
    let bytes: usize = agent.entries().map(|(_, _, b)| b.len()).sum();
    println!("{files} entries, {bytes} bytes held from the verified stream");
    Ok(())
}
