//! Threads that run jobs from one queue and sleep while it is empty: `pack`'s compressing
//! threads and `verify`'s decoding threads.
//!
//! Why not rayon's global pool: a rayon worker that runs out of work does not sleep at once; it
//! looks for work again, calling `sched_yield` between looks, for dozens of rounds first. `pack`
//! hands over one frame at a time (513 frames for the 1 GiB bench agent, every other one a
//! tail of a few hundred bytes), so its compressing threads ran dry after nearly every frame:
//! 11,500 `sched_yield` calls per pack on the 2-vCPU Xeon (`strace -f -c`), each taking the CPU
//! the thread that reads the agent's files needed. Here an idle thread waits in the queue's
//! channel (a futex) until the next job comes; nothing spins or yields.

use std::io;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Usable CPUs: the affinity mask's and the cgroup quota's, as `available_parallelism` reads
/// them (1 when it cannot tell). Each pool caps its own threads below this
/// (`archive::decode::MAX_DECODING_THREADS`, `archive::compress::MAX_COMPRESSING_THREADS`): the
/// memory its frames hold grows with them.
pub(crate) fn usable_cpus() -> usize {
    #[cfg(test)]
    if let Some(n) = PRETEND_CPUS.get() {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
thread_local! {
    /// The usable CPUs [`usable_cpus`] gives on this thread, for a test of a machine with more.
    pub(crate) static PRETEND_CPUS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// A job that is a closure, for [`Workers`] whose threads have no state of their own.
pub(crate) type Task = Box<dyn FnOnce() + Send + 'static>;

/// A fixed number of threads running the jobs given to [`Workers::run`], in the order given
/// (each on whichever thread is free first), each thread with state of its own made before it
/// started (the decoding threads' libzstd contexts, made on the calling thread so that a
/// decoding thread allocates nothing: `archive::decode::pool`). Dropping it lets the queued
/// jobs finish, then joins the threads.
pub(crate) struct Workers<J> {
    /// `None` once the threads were told to stop.
    jobs: Option<Sender<J>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers<Task> {
    /// Starts `n` threads (at least one) named `name-0`, `name-1`, … that run closures.
    pub fn start(name: &str, n: usize) -> io::Result<Self> {
        Self::with_states(name, (0..n.max(1)).map(|_| ()).collect(), None, |(), task: Task| task())
    }
}

impl<J: Send + 'static> Workers<J> {
    /// Starts one thread per state in `states`, named `name-0`, `name-1`, … (with a stack of
    /// `stack` bytes when given), each calling `run` with its state for every job it takes.
    pub fn with_states<S: Send + 'static>(
        name: &str,
        states: Vec<S>,
        stack: Option<usize>,
        run: fn(&mut S, J),
    ) -> io::Result<Self> {
        let (jobs, queue) = channel::<J>();
        let queue = Arc::new(Mutex::new(queue));
        let mut workers = Workers { jobs: Some(jobs), threads: Vec::with_capacity(states.len()) };
        for (i, mut state) in states.into_iter().enumerate() {
            let queue = Arc::clone(&queue);
            let mut builder = std::thread::Builder::new().name(format!("{name}-{i}"));
            if let Some(stack) = stack {
                builder = builder.stack_size(stack);
            }
            workers.threads.push(builder.spawn(move || work(&queue, &mut state, run))?);
        }
        Ok(workers)
    }

    /// How many threads were started.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Queues `job`; `false` if every thread is gone (a job panicked on each).
    pub fn run(&self, job: J) -> bool {
        self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok())
    }
}

fn work<S, J>(queue: &Mutex<Receiver<J>>, state: &mut S, run: fn(&mut S, J)) {
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        run(state, job);
    }
}

impl<J> Drop for Workers<J> {
    fn drop(&mut self) {
        // Closing the queue ends every thread once the jobs queued before are done.
        self.jobs = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Workers;
    use std::sync::mpsc::channel;

    #[test]
    fn every_job_runs_and_dropping_waits_for_the_queued_ones() {
        let (tx, rx) = channel();
        let workers = Workers::start("t", 2).unwrap();
        for i in 0..100 {
            let tx = tx.clone();
            assert!(workers.run(Box::new(move || tx.send(i).unwrap())));
        }
        drop(workers);
        drop(tx);
        let mut got: Vec<i32> = rx.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn each_thread_keeps_its_own_state() {
        type Seen = (usize, std::sync::mpsc::Sender<(String, usize)>);
        let (tx, rx) = channel();
        let run = |seen: &mut Seen, job: usize| {
            seen.0 += job;
            seen.1.send((std::thread::current().name().unwrap().to_owned(), seen.0)).unwrap();
        };
        let workers = Workers::with_states("s", vec![(0, tx.clone()), (0, tx)], Some(256 << 10), run).unwrap();
        for _ in 0..50 {
            assert!(workers.run(1));
        }
        drop(workers);
        let mut by_thread = std::collections::BTreeMap::<String, Vec<usize>>::new();
        for (name, count) in rx.iter() {
            by_thread.entry(name).or_default().push(count);
        }
        // Each thread counts only its own jobs, 1, 2, 3, …, and every job ran once.
        assert!(by_thread.keys().all(|name| name == "s-0" || name == "s-1"), "{by_thread:?}");
        for counts in by_thread.values() {
            assert_eq!(*counts, (1..=counts.len()).collect::<Vec<_>>());
        }
        assert_eq!(by_thread.values().map(Vec::len).sum::<usize>(), 50);
    }

    #[test]
    fn a_job_that_panics_costs_its_thread_and_no_other_job() {
        let (tx, rx) = channel();
        let workers = Workers::start("t", 2).unwrap();
        assert!(workers.run(Box::new(|| panic!("a job that panics"))));
        let tx2 = tx.clone();
        assert!(workers.run(Box::new(move || tx2.send(1).unwrap())));
        drop(workers);
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), vec![1]);
    }
}
