//! The hostile-bundle corpus in testdata/hostile/ (made by xtask/src/hostile.rs, `cargo run -p
//! xtask -- make-hostile`): `bundle verify` gives every case its expected reason code within a
//! fixed memory limit, `bundle unpack` extracts exactly the accepted ones and leaves nothing at
//! all behind for the rest, and the committed corpus is exactly what the generator makes.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use agent_bundle::bundle::verify::Reason;

use crate::support::{Env, testdata};

#[allow(dead_code)] // `write_corpus` is the xtask's; the tests use `generate` and `tsv`.
#[path = "../../xtask/src/hostile.rs"]
mod generator;

struct Case {
    name: String,
    code: String,
}

fn corpus() -> Vec<Case> {
    let text = std::fs::read_to_string(testdata("hostile/cases.tsv")).expect("testdata/hostile/cases.tsv");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(generator::TSV_HEADER), "cases.tsv header");
    lines
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert!(cols.len() == 3 && cols.iter().all(|c| !c.is_empty()), "cases.tsv line {line:?} needs 3 columns");
            Case { name: cols[0].to_owned(), code: cols[1].to_owned() }
        })
        .collect()
}

fn bundle_arg(case: &str) -> String {
    format!("testdata/hostile/{}", generator::file_name(case))
}

/// Every path under `dir`, relative, directories with a trailing `/`.
fn listing(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let rel = entry.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"));
                walk(root, &entry.path(), out);
            } else {
                out.insert(rel);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// Every entry of an accepted bundle (manifest.toml, its signature, the agent's files), read
/// with the `tar` crate: path, executable, bytes. Unpack extracts all of them.
fn all_entries(bundle: &[u8]) -> Vec<(String, bool, Vec<u8>)> {
    let tar = zstd::stream::decode_all(bundle).unwrap();
    let mut archive = tar::Archive::new(&tar[..]);
    let mut files = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let exec = entry.header().mode().unwrap() & 0o111 != 0;
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        files.push((path, exec, data));
    }
    assert_eq!(files[0].0, "manifest.toml");
    assert_eq!(files[1].0, "manifest.toml.minisig");
    files
}

#[test]
fn corpus_covers_every_reason() {
    let cases = corpus();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let codes: BTreeSet<&str> = cases.iter().map(|c| c.code.as_str()).collect();
    // contract_drift needs a baseline (tests/cli/baseline.rs); rollback depends on what the
    // verifier accepted before (tests/cli/freshness.rs); the registry codes need a registry
    // (tests/cli/oci.rs); the trust-policy codes need a policy and co-signatures
    // (tests/cli/signers.rs); the keyless codes a Sigstore bundle (tests/cli/keyless.rs); the
    // attestation codes judge files beside the bundle, each with its own hostile case in
    // tests/cli/attest.rs; the model codes need a vendor's signature made by model_signing
    // (tests/cli/vendor_models.rs forges a bundle for each).
    for reason in Reason::ALL.iter().filter(|r| {
        !r.as_str().starts_with("keyless_")
            && !r.as_str().starts_with("model_")
            && !matches!(
                r,
                Reason::ContractDrift
                    | Reason::Rollback
                    | Reason::UnsupportedArtifact
                    | Reason::BlobMismatch
                    | Reason::ThresholdNotMet
                    | Reason::RevokedKey
                    | Reason::KeyOutsideWindow
                    | Reason::NoPolicyRule
                    | Reason::PolicyUntrusted
                    | Reason::PolicyRollback
                    | Reason::PolicyExpired
                    | Reason::PolicyChainBroken
                    | Reason::AttestationMissing
                    | Reason::AttestationMalformed
                    | Reason::AttestationPayloadType
                    | Reason::AttestationPredicateType
                    | Reason::AttestationUnsigned
                    | Reason::AttestationUntrusted
                    | Reason::AttestationSubjectMismatch
                    | Reason::AttestationContractMismatch
                    | Reason::ProvenanceMismatch
            )
    }) {
        assert!(codes.contains(reason.as_str()), "no case for {}", reason.as_str());
    }
    let known: BTreeSet<&str> = Reason::ALL.iter().map(|r| r.as_str()).chain(["ok"]).collect();
    for c in &cases {
        assert!(known.contains(c.code.as_str()), "{}: unknown code {}", c.name, c.code);
    }
    let names: BTreeSet<String> = cases.iter().map(|c| generator::file_name(&c.name)).collect();
    assert_eq!(names.len(), cases.len(), "duplicate case names");
    let on_disk: BTreeSet<String> =
        listing(&testdata("hostile")).into_iter().filter(|n| n.ends_with(".agent.bundle")).collect();
    assert_eq!(on_disk, names, "bundles in testdata/hostile/ and lines of cases.tsv differ");
}

/// Address space allowed to `bundle verify` on a hostile bundle: the reader needs the 16 MiB
/// zstd window, the 1 MiB manifest cap and up to 16 MiB of JSON held for re-validation, plus
/// the program itself. The corpus holds 64 MiB bombs and entries declaring 1 GiB to 1 TiB.
const MEMORY_LIMIT_KIB: u32 = 96 * 1024;

/// The limit of the repeated pinned/unpinned run: pinned to one CPU, verify of the one-frame
/// case `ok-json-files-over-16mib` (a bundle as earlier releases wrote it, so decoded by the
/// sequential path, with its 16 MiB of held JSON) fails one 8 MiB allocation under 96 MiB of
/// address space, and passes from 104 MiB up, with the binary these tests run: the unoptimized
/// build, whose code and data map 41 MiB (`size`) where the release build's map 20 MiB. The
/// release build verifies that case pinned under 80 MiB (2026-11-28). The bound on the default
/// path (all CPUs, the parallel decoder included) stays [`MEMORY_LIMIT_KIB`], in the test above.
const REPEATED_LIMIT_KIB: u32 = 128 * 1024;

/// `bundle verify` under `ulimit -v` (address space), so that a case that made the reader
/// buffer what it should stream fails with an allocation error instead of passing.
fn verify_bounded(bundle: &str) -> crate::support::Run {
    verify_bounded_on(bundle, false, MEMORY_LIMIT_KIB)
}

/// [`verify_bounded`] under `limit_kib`, on the first CPU only (`taskset -c 0`) when `pinned`.
fn verify_bounded_on(bundle: &str, pinned: bool, limit_kib: u32) -> crate::support::Run {
    let pin = if pinned { "taskset -c 0 " } else { "" };
    let script = format!("ulimit -v {limit_kib} && exec {pin}\"$0\" \"$@\"");
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(crate::support::repo()).args(["-c", &script, env!("CARGO_BIN_EXE_bundle")]);
    cmd.args(["verify", bundle, "--key", "testdata/keys/test.pub", "--format", "json"]);
    // One malloc arena: glibc reserves 64 MiB of address space (128 MiB while aligning it)
    // for each thread's own arena, untouched but counted by `ulimit -v`, so with the decoding
    // threads the limit measured which thread allocated first rather than what verify holds
    // (a fresh-machine run once failed a 4 MiB allocation under the repeated run's limit).
    cmd.env("MALLOC_ARENA_MAX", "1");
    cmd.env_remove("NO_COLOR").output().expect("run bundle under ulimit").into()
}

#[test]
fn verify_gives_each_case_its_code_in_bounded_memory() {
    let mut failures = Vec::new();
    for c in corpus() {
        let out = verify_bounded(&bundle_arg(&c.name));
        let json = out.json();
        let code = json["code"].as_str().unwrap_or("ok");
        let want_exit = if c.code == "ok" { 0 } else { 1 };
        let consistent = json["ok"].as_bool() == Some(c.code == "ok");
        if out.code != want_exit || code != c.code || !consistent {
            failures.push(format!(
                "{}: exit {} code {code} (want exit {want_exit} code {}): {}",
                c.name, out.code, c.code, json["message"]
            ));
        }
    }
    assert!(failures.is_empty(), "{} cases differ:\n{}", failures.len(), failures.join("\n"));
}

/// Seekable bundles are decoded on every usable CPU: the corpus gives every case the same code
/// on one CPU (`taskset -c 0`: one decoding thread) and on all of them, run after run (the
/// corpus's seekable cases have several frames each, so with two CPUs they are decoded in
/// parallel), under `ulimit -v` [`REPEATED_LIMIT_KIB`].
#[test]
fn verify_gives_each_case_the_same_code_on_one_cpu_and_on_all_repeatedly() {
    if !crate::support::require_tool("taskset") {
        return;
    }
    let mut failures = Vec::new();
    for run in 0..3 {
        for pinned in [true, false] {
            for c in corpus() {
                let out = verify_bounded_on(&bundle_arg(&c.name), pinned, REPEATED_LIMIT_KIB);
                let Ok(json) = serde_json::from_str::<serde_json::Value>(&out.stdout) else {
                    failures.push(format!("run {run}, pinned {pinned}: {}: no JSON; stderr: {}", c.name, out.stderr));
                    continue;
                };
                let code = json["code"].as_str().unwrap_or("ok").to_owned();
                if code != c.code {
                    failures.push(format!("run {run}, pinned {pinned}: {}: {code} (want {})", c.name, c.code));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} runs differ:\n{}", failures.len(), failures.join("\n"));
}

// "An earlier entry's digest is reported before a later entry's problem" (the case
// `digest_mismatch-large-then-unlisted`, judged above with the corpus) is pinned
// deterministically by a unit test, src/bundle/verify/tests.rs, which holds the hashing thread
// until verify waits for it: run here, it depended on which thread won (sampled ten times, a
// verifier that did not wait failed about 60% of the runs).

#[test]
fn unpack_extracts_only_accepted_bundles_and_leaves_nothing_otherwise() {
    let key = testdata("keys/test.pub");
    let mut failures = Vec::new();
    for c in corpus() {
        let env = Env::new();
        let bundle = testdata(&format!("hostile/{}", generator::file_name(&c.name)));
        let out_dir = env.path().join("out");
        let before = listing(env.path());
        let out = env.run(&[
            "unpack",
            bundle.to_str().unwrap(),
            out_dir.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
            "--format",
            "json",
        ]);
        let after = listing(env.path());
        if c.code != "ok" {
            if out.code != 1 || out.json()["code"].as_str() != Some(c.code.as_str()) {
                failures.push(format!("{}: unpack exit {} (want 1 {}):\n{}", c.name, out.code, c.code, out.stdout));
            }
            if out_dir.exists() || after != before {
                failures.push(format!("{}: rejected, but the folder changed: {before:?} -> {after:?}", c.name));
            }
            continue;
        }
        if out.code != 0 {
            failures.push(format!("{}: unpack exit {} (want 0):\n{}{}", c.name, out.code, out.stdout, out.stderr));
            continue;
        }
        let files = all_entries(&std::fs::read(&bundle).unwrap());
        let mut want: BTreeSet<String> = BTreeSet::from(["out/".to_owned()]);
        for (path, exec, data) in &files {
            let mut parent = Path::new(path).parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                want.insert(format!("out/{}/", p.to_str().unwrap()));
                parent = p.parent();
            }
            want.insert(format!("out/{path}"));
            let target = out_dir.join(path);
            match std::fs::read(&target) {
                Ok(got) if got == *data => {}
                Ok(_) => failures.push(format!("{}: {path} extracted with other bytes", c.name)),
                Err(e) => failures.push(format!("{}: {path} not extracted: {e}", c.name)),
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if let Ok(meta) = std::fs::metadata(&target)
                    && (meta.permissions().mode() & 0o100 != 0) != *exec
                {
                    failures.push(format!("{}: {path} executable bit is not {exec}", c.name));
                }
            }
        }
        if after != want {
            failures.push(format!("{}: extracted {after:?}, want {want:?}", c.name));
        }
    }
    assert!(failures.is_empty(), "{} problems:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn committed_corpus_is_what_the_generator_makes() {
    let cases = generator::generate();
    let tsv = std::fs::read_to_string(testdata("hostile/cases.tsv")).unwrap();
    let regenerate = "regenerate with `cargo run -p xtask -- make-hostile testdata/hostile`";
    assert!(tsv == generator::tsv(&cases), "cases.tsv is stale; {regenerate}");
    let mut stale = Vec::new();
    for c in &cases {
        let committed =
            std::fs::read(testdata(&format!("hostile/{}", generator::file_name(c.name)))).unwrap_or_default();
        if committed != c.bytes {
            stale.push(c.name);
        }
    }
    assert!(stale.is_empty(), "these bundles differ from the generator's output ({regenerate}): {stale:?}");
}
