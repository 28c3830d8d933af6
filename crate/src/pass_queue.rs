//! Where the Node binding runs a cache's forward passes: as jobs on the compute pool itself, one
//! at a time per cache, in the order they were asked for.
//!
//! On the pool, not on libuv's threads: a libuv worker would only hand the pass to the pool and
//! sleep until it came back, two more thread wake-ups per pass (an empty pass's round trip went
//! from 60–90 to 13–33 µs on a 2 vCPU VM; a batch-1 decode step's ~0.2 ms outside the engine is
//! mostly other costs and moved within noise). But a pool thread that waits inside one pass can pick up another queued job and run
//! it on top of its stack, so two passes over one cache must never be in the pool together: the
//! second would block on the cache's lock beneath the first, on the same thread, for ever. Each
//! cache's passes therefore wait in its own queue until the one before has finished. Passes over
//! different caches share no lock and may nest.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the pool thread that ran a pass waits for the same cache's next one before going
/// back to the pool. A decode loop asks for its next step a few hundred microseconds after the
/// last one settles, and a pool thread that has gone to sleep took 35–155 µs to wake (2 vCPU
/// VM), on every step; waiting costs one core that long after the loop's last step.
const LINGER: Duration = Duration::from_micros(500);

/// A pass and the settling of its promise. The engine's part runs under the binding's `guarded`,
/// so it settles whatever happens; a panic past that is caught here all the same, since the pool
/// aborts the process on a job's panic.
pub type Pass = Box<dyn FnOnce() + Send>;

#[derive(Default)]
pub struct PassQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A pass of this queue is in the pool or running.
    busy: bool,
    waiting: VecDeque<Pass>,
}

impl PassQueue {
    /// Runs `pass` on the pool once every pass submitted before it has finished.
    pub fn submit(self: &Arc<Self>, pass: Pass) {
        let mut state = self.lock();
        if state.busy {
            state.waiting.push_back(pass);
            return;
        }
        state.busy = true;
        drop(state);
        self.spawn(pass);
    }

    /// Takes a pool thread for `first` and then for each pass that arrives within `LINGER` of
    /// the one before.
    fn spawn(self: &Arc<Self>, first: Pass) {
        let queue = self.clone();
        rayon::spawn(move || {
            let mut pass = first;
            loop {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(pass));
                match queue.next_within(LINGER) {
                    Some(next) => pass = next,
                    None => return,
                }
            }
        });
    }

    /// The next waiting pass, polled for until `linger` has passed; without one the queue is
    /// left idle, and the next `submit` spawns a job again. The poll yields its core rather than
    /// spinning: the JS thread that settles the pass is often woken on this very core, and with
    /// a spinning poll beside it a decode step spent 0.04–0.07 ms more outside the engine
    /// (SmolLM2 Q4_0 batch 1, 2 vCPU VM, three alternating rounds).
    fn next_within(&self, linger: Duration) -> Option<Pass> {
        let until = Instant::now() + linger;
        loop {
            let mut state = self.lock();
            if let Some(next) = state.waiting.pop_front() {
                return Some(next);
            }
            if Instant::now() >= until {
                state.busy = false;
                return None;
            }
            drop(state);
            std::thread::yield_now();
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn passes_of_one_queue_run_one_at_a_time_in_order() {
        let queue = Arc::new(PassQueue::default());
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (done, finished) = mpsc::channel();
        for i in 0..32 {
            let (running, done) = (running.clone(), done.clone());
            queue.submit(Box::new(move || {
                let overlapping = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(200));
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                done.send((i, overlapping)).expect("receiver alive");
            }));
        }
        let order: Vec<(usize, usize)> = (0..32).map(|_| finished.recv().expect("every pass finishes")).collect();
        assert_eq!(order.iter().map(|&(i, _)| i).collect::<Vec<_>>(), (0..32).collect::<Vec<_>>());
        assert!(order.iter().all(|&(_, overlapping)| overlapping == 0), "a pass started while another of its queue ran");
    }

    #[test]
    fn a_pass_runs_whether_it_arrives_while_the_queue_lingers_or_after() {
        let queue = Arc::new(PassQueue::default());
        let (done, finished) = mpsc::channel();
        for pause in [0, 50, 2 * LINGER.as_micros() as u64, 0, 3 * LINGER.as_micros() as u64] {
            let done = done.clone();
            queue.submit(Box::new(move || done.send(pause).expect("receiver alive")));
            assert_eq!(finished.recv_timeout(Duration::from_secs(5)), Ok(pause));
            std::thread::sleep(Duration::from_micros(pause));
        }
    }
}
