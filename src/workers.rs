//! Threads that run jobs from one queue and sleep while it is empty: `pack`'s compressing
//! threads.
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

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed number of threads running the jobs given to [`Workers::run`], in the order given
/// (each on whichever thread is free first). Dropping it lets the queued jobs finish, then
/// joins the threads.
pub(crate) struct Workers {
    /// `None` once the threads were told to stop.
    jobs: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts `n` threads (at least one) named `name-0`, `name-1`, ….
    pub fn start(name: &str, n: usize) -> io::Result<Workers> {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut workers = Workers { jobs: Some(jobs), threads: Vec::with_capacity(n.max(1)) };
        for i in 0..n.max(1) {
            let queue = Arc::clone(&queue);
            let thread = std::thread::Builder::new().name(format!("{name}-{i}")).spawn(move || work(&queue))?;
            workers.threads.push(thread);
        }
        Ok(workers)
    }

    /// Queues `job`; `false` if every thread is gone (a job panicked on each).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.jobs.as_ref().is_some_and(|jobs| jobs.send(Box::new(job)).is_ok())
    }
}

fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let job = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        job();
    }
}

impl Drop for Workers {
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
            assert!(workers.run(move || tx.send(i).unwrap()));
        }
        drop(workers);
        drop(tx);
        let mut got: Vec<i32> = rx.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_job_that_panics_costs_its_thread_and_no_other_job() {
        let (tx, rx) = channel();
        let workers = Workers::start("t", 2).unwrap();
        assert!(workers.run(|| panic!("a job that panics")));
        let tx2 = tx.clone();
        assert!(workers.run(move || tx2.send(1).unwrap()));
        drop(workers);
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), vec![1]);
    }
}
