//! A budget of bytes that work running at once on several threads shares: a thread takes its
//! share before the memory-hungry part of its work and gives it back when done, waiting while
//! the others hold too much.
//!
//! Why this file exists: `check` checks one agent per usable CPU, and an agent's parsed JSON
//! costs many times its bytes (the document tree, then the typed model beside it): 16 copies of
//! an agent whose tools.json is 3.7 MB (190,000 values) peaked at 105, 169, 327, 529 and 792 MiB
//! with 1, 2, 4, 8 and 16 threads (2026-11-28, 2-vCPU Xeon, a build told that many CPUs). With
//! the JSON a check parses taken from a budget ([`ops::check`](crate::ops::check)), that memory
//! no longer grows with the CPUs.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Shares of a budget, taken with [`Admission::enter`].
#[derive(Debug)]
pub struct Admission {
    budget: u64,
    held: Mutex<Held>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct Held {
    now: u64,
    /// The most ever held at once.
    #[cfg(test)]
    most: u64,
}

/// A share of an [`Admission`]'s budget, given back when dropped.
#[derive(Debug)]
#[must_use = "the share is given back as soon as it is dropped"]
pub struct Permit<'a> {
    admission: &'a Admission,
    weight: u64,
}

impl Admission {
    pub fn new(budget: u64) -> Self {
        Admission { budget: budget.max(1), held: Mutex::default(), freed: Condvar::new() }
    }

    /// Takes `weight` of the budget (all of it when `weight` is larger), waiting until the
    /// others hold little enough. A thread holding no other share of this budget never waits
    /// forever: every share is given back when its holder is done.
    pub fn enter(&self, weight: u64) -> Permit<'_> {
        let weight = weight.min(self.budget);
        let mut held = self.lock();
        while held.now + weight > self.budget {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        held.now += weight;
        #[cfg(test)]
        {
            held.most = held.most.max(held.now);
        }
        Permit { admission: self, weight }
    }

    /// The most of the budget ever held at once.
    #[cfg(test)]
    pub fn most_held(&self) -> u64 {
        self.lock().most
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // A holder that panicked gave its share back on the way out (`Drop`): the count holds.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.admission.lock().now -= self.weight;
        self.admission.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::Admission;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn a_share_waits_until_the_others_hold_little_enough() {
        let admission = Admission::new(10);
        let first = admission.enter(8);
        let (tx, rx) = channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _second = admission.enter(8);
                tx.send(()).unwrap();
            });
            // The second share cannot be taken while the first is held.
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            drop(first);
            rx.recv_timeout(Duration::from_secs(10)).expect("taken once the first was given back");
        });
        assert_eq!(admission.most_held(), 8);
    }

    #[test]
    fn small_shares_are_held_together_and_a_share_over_the_budget_takes_all_of_it() {
        let admission = Admission::new(10);
        let (a, b) = (admission.enter(4), admission.enter(5));
        assert_eq!(admission.most_held(), 9);
        drop((a, b));
        let all = admission.enter(1 << 40);
        assert_eq!(admission.most_held(), 10);
        drop(all);
        let _again = admission.enter(10);
    }
}
