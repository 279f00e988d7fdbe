//! Runs the independent simulations of a layout experiment (one per staging
//! size or layout) on several threads.
//!
//! Each simulation owns its testbed and volume and draws its random streams
//! from the seed alone, so the results do not depend on how many run at once:
//! only the wall time does, and the peak memory, which is the sum of the peaks
//! of the simulations in flight. Results come back in the tasks' order.

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

use crate::progress::Progress;
use crate::LabError;

/// One simulation: given where to report its progress, its result.
pub type Task<'a, T> = Box<dyn FnOnce(&mut dyn Progress) -> Result<T, LabError> + Send + 'a>;

/// Runs `tasks`, at most `jobs` at once, and returns their results in order, or
/// the error of the first (in order) that failed.
pub fn run_all<T: Send>(jobs: usize, tasks: Vec<Task<'_, T>>, progress: &mut dyn Progress) -> Result<Vec<T>, LabError> {
    let workers = jobs.clamp(1, tasks.len().max(1));
    if workers == 1 {
        return tasks.into_iter().map(|task| task(progress)).collect();
    }
    let task_count = tasks.len();
    let queue = Mutex::new(tasks.into_iter().enumerate());
    let (sender, receiver) = channel();
    let mut results: Vec<Option<Result<T, LabError>>> = (0..task_count).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let mut relay = RelayProgress { worker, sender: sender.clone() };
                let queue = &queue;
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.lock().expect("no worker panics holding the queue").next();
                        let Some((index, task)) = next else { break };
                        done.push((index, task(&mut relay)));
                    }
                    done
                })
            })
            .collect();
        drop(sender);
        let mut combined = CombinedProgress::new(workers);
        for message in receiver {
            combined.apply(message, progress);
        }
        for handle in handles {
            let done = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (index, result) in done {
                results[index] = Some(result);
            }
        }
    });
    results.into_iter().map(|result| result.expect("every task ran")).collect()
}

/// What a worker reports.
enum Message {
    Start { worker: usize, phase: String, total_units: u64 },
    Advance { worker: usize, units: u64 },
}

/// A worker's [`Progress`]: forwards to the thread that draws.
struct RelayProgress {
    worker: usize,
    sender: Sender<Message>,
}

impl Progress for RelayProgress {
    fn start_phase(&mut self, phase: &str, total_units: u64) {
        // The drawing thread outlives every worker; a send cannot fail.
        let _ = self.sender.send(Message::Start { worker: self.worker, phase: phase.to_string(), total_units });
    }

    fn advance(&mut self, units: u64) {
        let _ = self.sender.send(Message::Advance { worker: self.worker, units });
    }
}

/// The workers' current phases shown as one: the units of every phase in
/// flight, named after the latest phase to start.
struct CombinedProgress {
    /// Per worker: total and done units of its current phase.
    phases: Vec<(u64, u64)>,
}

impl CombinedProgress {
    fn new(workers: usize) -> Self {
        CombinedProgress { phases: vec![(0, 0); workers] }
    }

    fn apply(&mut self, message: Message, progress: &mut dyn Progress) {
        match message {
            Message::Start { worker, phase, total_units } => {
                self.phases[worker] = (total_units, 0);
                let total = self.phases.iter().map(|&(total, _)| total).sum();
                let done = self.phases.iter().map(|&(_, done)| done).sum();
                let running = self.phases.iter().filter(|&&(total, done)| done < total).count();
                progress.start_phase(&format!("{running} at once; {phase}"), total);
                progress.advance(done);
            }
            Message::Advance { worker, units } => {
                self.phases[worker].1 += units;
                progress.advance(units);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    /// Records the combined progress.
    #[derive(Default)]
    struct Recorded {
        total: u64,
        done: u64,
    }

    impl Progress for Recorded {
        fn start_phase(&mut self, _phase: &str, total_units: u64) {
            (self.total, self.done) = (total_units, 0);
        }

        fn advance(&mut self, units: u64) {
            self.done += units;
        }
    }

    fn squares(count: u64) -> Vec<Task<'static, u64>> {
        (0..count)
            .map(|n| -> Task<'static, u64> {
                Box::new(move |progress: &mut dyn Progress| {
                    progress.start_phase("squaring", 10);
                    progress.advance(10);
                    Ok(n * n)
                })
            })
            .collect()
    }

    #[test]
    fn results_come_back_in_order_whatever_the_jobs() {
        for jobs in [1, 2, 3, 8] {
            let results = run_all(jobs, squares(7), &mut NoProgress).unwrap();
            assert_eq!(results, vec![0, 1, 4, 9, 16, 25, 36], "{jobs} jobs");
        }
    }

    #[test]
    fn the_first_failure_in_order_is_returned() {
        let mut tasks = squares(4);
        tasks[2] =
            Box::new(|_: &mut dyn Progress| Err(LabError::InvalidParameter { parameter: "x", message: "two".into() }));
        tasks[3] = Box::new(|_: &mut dyn Progress| {
            Err(LabError::InvalidParameter { parameter: "x", message: "three".into() })
        });
        let error = run_all(2, tasks, &mut NoProgress).unwrap_err();
        assert!(matches!(error, LabError::InvalidParameter { ref message, .. } if message == "two"), "{error}");
    }

    #[test]
    fn combined_progress_counts_every_unit_done() {
        let mut recorded = Recorded::default();
        run_all(2, squares(5), &mut recorded).unwrap();
        assert_eq!(recorded.done, recorded.total, "the last phase shown ends complete");
        assert!(recorded.total >= 10);
    }
}
