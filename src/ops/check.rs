//! `bundle check`: validate agent folders (tools.json, policy.caps, manifest.toml) and report
//! every problem at once.
//!
//! Many agents (a monorepo's pre-commit hook) are checked on every usable CPU, and each result
//! is handed to the caller as soon as it and every agent before it are done, in sorted order:
//! memory grows with the agents in flight ([`IN_FLIGHT_PER_THREAD`] per thread), not with the
//! agents in total (issue 29: 20,000 agents used to hold 100 MB of results until the end).
//! What the caller keeps of a result (a summary, the problems) is taken on the thread that
//! checked the agent, which also drops the rest: the parsed files were made there, and the
//! handing-over thread, freeing them, took 0.15 s of CPU of 20,000 agents' 1.6 s on 2 CPUs.
//! The JSON the threads parse at once is bounded too ([`JSON_AT_ONCE_BYTES`], see
//! [`admission`](crate::admission)), so that memory does not grow with the CPUs either.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::admission::Admission;
use crate::agent::{AgentCheck, CheckOptions, check_agent_admitted, check_agent_with, find_agents};
use crate::error::Result;

/// Agents started ahead of the oldest one not yet handed over, per checking thread: enough
/// that a slow agent (a large file to hash) does not idle the other threads for long.
pub const IN_FLIGHT_PER_THREAD: usize = 16;

/// The bytes of JSON (tools.json and the listed `.json` files) the checking threads parse at
/// once, agents of at most `agent::check::ADMITTED_FROM` aside: twice the largest tools.json,
/// so two agents at the caps are checked at a time, whatever the CPUs. Measured on the 2-vCPU
/// Xeon (2026-11-28, a build told how many CPUs it had), 16 copies of an agent with a 3.7 MB
/// tools.json of 190,000 values peaked at 105, 169, 327, 529 and 792 MiB with 1, 2, 4, 8 and 16
/// threads before, and at 105, 167–199, 196, 195 and 204 MiB with this budget; on 2 CPUs they
/// checked in 0.805 s before and after (7 alternating runs). One agent's worth (4 MiB) made
/// that 1.40 s against 0.78 s: it left a CPU idle.
pub const JSON_AT_ONCE_BYTES: u64 = 2 * crate::limits::MAX_JSON_BYTES;

/// Checks every agent the paths name and gives what `keep` takes of each result (on the
/// thread that checked it) to `each` on this thread, in the order the agents were found
/// (sorted); returns how many there were. Finding the agents fails as a whole (a path that is
/// not there); an agent's own problems are in its result.
pub fn check_each<T: Send>(
    paths: &[PathBuf],
    opts: CheckOptions<'_>,
    keep: impl Fn(AgentCheck) -> T + Sync,
    each: impl FnMut(T),
) -> Result<usize> {
    let mut dirs = Vec::new();
    for p in paths {
        dirs.extend(find_agents(p)?);
    }
    check_all(&dirs, opts, &Admission::new(JSON_AT_ONCE_BYTES), keep, each);
    Ok(dirs.len())
}

/// Checks agents on all cores (each agent is independent), handing results over in input order
/// with at most [`IN_FLIGHT_PER_THREAD`] per thread started and not yet handed over, and the
/// JSON parsed at once within `admission`'s budget.
fn check_all<T: Send>(
    dirs: &[PathBuf],
    opts: CheckOptions<'_>,
    admission: &Admission,
    keep: impl Fn(AgentCheck) -> T + Sync,
    mut each: impl FnMut(T),
) {
    let threads = crate::workers::usable_cpus().min(dirs.len()).max(1);
    if threads == 1 {
        dirs.iter().for_each(|d| each(keep(check_agent_with(d, opts))));
        return;
    }
    let window = threads * IN_FLIGHT_PER_THREAD;
    // A job is a batch of neighbouring agents, so that this thread is woken once per batch and
    // not once per agent (issue 29: a small agent takes ~100 µs, a wake-up a good part of it).
    let batch = (dirs.len() / window).clamp(1, MAX_BATCH);
    let batches: Vec<&[PathBuf]> = dirs.chunks(batch).collect();
    let window = window.div_ceil(batch);
    let (jobs, queue) = mpsc::channel::<usize>();
    let queue = Arc::new(Mutex::new(queue));
    // `None`: the check of that batch panicked (the panic is re-raised when the scope ends).
    let (done, results) = mpsc::channel::<(usize, Option<Vec<T>>)>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (queue, done, batches, keep) = (Arc::clone(&queue), done.clone(), &batches, &keep);
            scope.spawn(move || {
                loop {
                    // The lock is held only to take the next index, never while checking.
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(i) = next else { return };
                    let guard = Unfinished { index: i, done: &done };
                    let result = batches[i]
                        .iter()
                        .map(|d| {
                            let (check, permit) = check_agent_admitted(d, opts, Some(admission));
                            // The share is given back once `keep` has dropped what it does not
                            // keep (the parsed files).
                            let kept = keep(check);
                            drop(permit);
                            kept
                        })
                        .collect();
                    std::mem::forget(guard);
                    if done.send((i, Some(result))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done);
        let mut started = 0;
        let mut waiting = BTreeMap::new();
        let mut next = 0;
        while next < batches.len() {
            while started < batches.len() && started < next + window {
                // The workers outlive this loop, so the channel is open.
                let _ = jobs.send(started);
                started += 1;
            }
            let Ok((i, Some(result))) = results.recv() else { break };
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&next) {
                result.into_iter().for_each(&mut each);
                next += 1;
            }
        }
        drop(jobs);
    });
}

/// The most agents checked as one job (see [`check_all`]).
const MAX_BATCH: usize = 8;

/// Tells the handing-over loop that the check of batch `index` ended in a panic, so that it
/// stops waiting for that result.
struct Unfinished<'a, T> {
    index: usize,
    done: &'a mpsc::Sender<(usize, Option<Vec<T>>)>,
}

impl<T> Drop for Unfinished<'_, T> {
    fn drop(&mut self) {
        let _ = self.done.send((self.index, None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_input_order_and_each_agent_once() {
        let base = tempfile::tempdir().unwrap();
        // Folders that are not agents: each check fails fast with its own report.
        let dirs: Vec<PathBuf> = (0..300).map(|i| base.path().join(format!("a{i:03}"))).collect();
        let mut seen = Vec::new();
        let admission = Admission::new(JSON_AT_ONCE_BYTES);
        check_all(&dirs, CheckOptions::default(), &admission, |c| crate::agent::into_parts(c).0, |dir| seen.push(dir));
        assert_eq!(seen, dirs);
    }

    #[test]
    fn the_json_parsed_at_once_stays_within_the_budget_whatever_the_cpus() {
        let base = tempfile::tempdir().unwrap();
        // Agents whose tools.json (not a valid one: parsing is what costs) is 1.5 MB each.
        let big = format!("[{}0]", "0,".repeat(750_000));
        let dirs: Vec<PathBuf> = (0..8)
            .map(|i| {
                let dir = base.path().join(format!("a{i}"));
                std::fs::create_dir(&dir).unwrap();
                std::fs::write(dir.join("manifest.toml"), "[bundle]\nformat = 1\n").unwrap();
                std::fs::write(dir.join("tools.json"), &big).unwrap();
                dir
            })
            .collect();
        // Room for two of them at once, on a machine of 8 CPUs.
        let admission = Admission::new(2 * big.len() as u64 + 1);
        crate::workers::PRETEND_CPUS.set(Some(8));
        let mut reports = Vec::new();
        check_all(&dirs, CheckOptions::default(), &admission, |c| crate::agent::into_parts(c).2, |r| reports.push(r));
        crate::workers::PRETEND_CPUS.set(None);
        assert_eq!(reports.len(), 8);
        assert!(reports.iter().all(|r| r.has_errors()));
        // Each check took its share: never more than two at once, and at least one.
        assert!(
            (big.len() as u64..=2 * big.len() as u64).contains(&admission.most_held()),
            "{}",
            admission.most_held()
        );
    }

    /// Copies the folder `from` into `to`.
    fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    #[test]
    fn an_agent_whose_files_are_listed_takes_a_share_for_all_its_json_before_reading_it() {
        let base = tempfile::tempdir().unwrap();
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/agents/mailer");
        // The rich example with its tools repeated past `ADMITTED_FROM` (its digests go stale,
        // which a check reports after listing the files: the listing is what this is about).
        let mut tools: serde_json::Value =
            serde_json::from_slice(&std::fs::read(example.join("tools.json")).unwrap()).unwrap();
        let one = tools["tools"].as_array().unwrap().clone();
        let many: Vec<serde_json::Value> = (0..40)
            .flat_map(|i| {
                one.iter().cloned().map(move |mut t| {
                    t["id"] = format!("{}_{i}", t["id"].as_str().unwrap()).into();
                    t
                })
            })
            .collect();
        tools["tools"] = many.into();
        let dirs: Vec<PathBuf> = (0..2).map(|i| base.path().join(format!("a{i}"))).collect();
        for dir in &dirs {
            copy_tree(&example, dir);
            std::fs::write(dir.join("tools.json"), serde_json::to_vec(&tools).unwrap()).unwrap();
        }
        let json: u64 = ["tools.json", "schemas/mail.send.request.v1.json", "schemas/shared/mail.draft.v1.json"]
            .iter()
            .map(|f| std::fs::metadata(dirs[0].join(f)).unwrap().len())
            .sum();
        assert!(json > crate::agent::ADMITTED_FROM, "{json}");
        let admission = Admission::new(1 << 30);
        crate::workers::PRETEND_CPUS.set(Some(2));
        let mut reports = Vec::new();
        check_all(&dirs, CheckOptions::default(), &admission, |c| crate::agent::into_parts(c).2, |r| reports.push(r));
        crate::workers::PRETEND_CPUS.set(None);
        assert_eq!(reports.len(), 2);
        // Each took tools.json and the schema files it lists (not tools.json's text alone, as
        // an agent whose manifest does not parse does), one or both at a time.
        let most = admission.most_held();
        assert!(most == json || most == 2 * json, "{most} against {json} per agent");
    }
}
