//! Worker threads of the tools' run loops: spawned pinned to a CPU, joined together, or held
//! with their stop flag.
//!
//! - [`spawn_pinned`]: a named thread that pins itself to a CPU (or not) and runs a fallible
//!   closure; a failed pin is the thread's error, and the closure does not run.
//! - [`join_all`]: joins every thread of a set (all of them, even after a panic), in order.
//! - [`Stoppable`]: a thread with the flag that tells it to stop; [`Stoppable::join`] raises the
//!   flag and joins, and dropping it does the same, so the thread never outlives its owner.
//! - [`SetOnDrop`]: a thread's "I am done" flag, set on every exit path including panics.
//!
//! A panic in a worker is not propagated: it is reported as [`Panicked`] (callers word it
//! themselves: "the run loop panicked", "receiver panicked"...).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use fastpath::SysError;

/// A worker thread panicked (the panic's payload is dropped; its message went to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panicked;

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a worker thread panicked")
    }
}

impl std::error::Error for Panicked {}

/// Spawns a thread named `name` that first pins itself to `cpu` (when given; see
/// [`fastpath::workers::pin_current_thread`]) and then runs `f`; its result is `f`'s.
///
/// A failed pin ends the thread with `Err(E::from(sys_error))` without running `f`.
///
/// # Panics
///
/// When the thread cannot be created (as [`std::thread::spawn`] does).
pub fn spawn_pinned<T, E, F>(name: String, cpu: Option<usize>, f: F) -> JoinHandle<Result<T, E>>
where
    F: FnOnce() -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: From<SysError> + Send + 'static,
{
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            if let Some(cpu) = cpu {
                fastpath::workers::pin_current_thread(cpu)?;
            }
            f()
        })
        .expect("failed to spawn thread")
}

/// Joins every thread of `handles`, in order, and returns their results in that order.
///
/// # Errors
///
/// [`Panicked`] when any of them panicked (the others are joined all the same, so none is
/// left running).
pub fn join_all<T>(handles: impl IntoIterator<Item = JoinHandle<T>>) -> Result<Vec<T>, Panicked> {
    let mut out = Vec::new();
    let mut panicked = false;
    for h in handles {
        match h.join() {
            Ok(v) => out.push(v),
            Err(_) => panicked = true,
        }
    }
    if panicked {
        Err(Panicked)
    } else {
        Ok(out)
    }
}

/// A thread and the flag that tells it to stop. [`join`](Self::join) raises the flag and joins;
/// dropping it (an early return) does the same and discards the result.
#[derive(Debug)]
pub struct Stoppable<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<T>>,
}

impl<T> Stoppable<T> {
    /// Holds `handle`, a thread that watches `stop`.
    pub fn new(stop: Arc<AtomicBool>, handle: JoinHandle<T>) -> Self {
        Stoppable { stop, handle: Some(handle) }
    }

    /// Raises the stop flag (the thread is joined later, by [`join`](Self::join) or drop).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Raises the stop flag and waits for the thread's result.
    ///
    /// # Errors
    ///
    /// [`Panicked`] when the thread panicked.
    pub fn join(mut self) -> Result<T, Panicked> {
        self.stop();
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| Panicked),
            None => Err(Panicked),
        }
    }
}

impl<T> Drop for Stoppable<T> {
    fn drop(&mut self) {
        self.stop();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sets the flag when dropped: a thread's "I am done", on every exit path including panics.
#[derive(Debug)]
pub struct SetOnDrop(pub Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_all_keeps_order_and_reports_a_panic() {
        let hs: Vec<_> = (0..3).map(|i| spawn_pinned::<_, SysError, _>(format!("t{i}"), None, move || Ok(i))).collect();
        let r: Vec<_> = join_all(hs).unwrap().into_iter().map(Result::unwrap).collect();
        assert_eq!(r, vec![0, 1, 2]);
        let hs = vec![std::thread::spawn(|| 1), std::thread::spawn(|| panic!("worker test panic"))];
        assert_eq!(join_all(hs), Err(Panicked));
    }

    #[test]
    fn stoppable_raises_the_flag() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let w = Stoppable::new(
            stop,
            std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                7
            }),
        );
        assert_eq!(w.join(), Ok(7));
    }
}
