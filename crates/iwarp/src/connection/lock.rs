//! How the connection's own tasks take its lock: yielding to the runtime
//! while it is held, rather than putting their thread to sleep, for up to
//! 5 ms.
//!
//! The reader and writer tasks share one lock with the application, whose
//! posts write to the socket under it. Taken with a blocking `lock`, a
//! contended lock parked the whole runtime thread in the kernel (a futex
//! wait) until the holder's system call returned, and waking it again was
//! a cross-core wake-up: about 10,000 context switches for 30,000 RDMA
//! Writes of 64 KiB at a depth of 128 on the 2-core VM. Trying the lock and
//! yielding to the runtime when it is held lets the thread run other tasks
//! (the other end's, on loopback) meanwhile: 1,500 to 3,100 context
//! switches for the same run, Sends of 64 KiB 1.4 to 2.2 times as fast
//! (1,195 to 1,355 MiB/s before, 1,891 to 2,693 after) and Writes 1.1 to
//! 1.3 times (1,505 to 1,804 against 1,811 to 2,195). Nothing holding the
//! lock awaits, so a holder always finishes soon.
//!
//! Trying is unfair, though: a thread that posts in a tight loop takes the
//! lock again nanoseconds after releasing it, while a yielded task comes
//! back microseconds later, so a task could miss it for as long as the loop
//! runs. After trying for [`BLOCK_AFTER`] the task therefore takes the lock
//! the blocking way and queues for it in the kernel. The bound is a time,
//! not a count of tries: the reader holds the lock for a whole read turn
//! (up to 16 reads of an FPDU each), and a bound of 256 tries, spent in
//! about that time, brought back 2 to 3 times the context switches.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// How long a task tries before it gives up yielding and blocks: far
/// longer than the lock is held, even for a whole read turn, so only a
/// holder that keeps taking it back makes a task wait in the kernel.
const BLOCK_AFTER: Duration = Duration::from_millis(5);

/// Takes `mutex`, yielding to the runtime while another holds it, and
/// blocking once it has tried for [`BLOCK_AFTER`]. A poisoned lock is
/// taken as it is, as [`super::Shared::lock`] does.
pub(crate) async fn lock_yielding<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    lock_yielding_for(mutex, BLOCK_AFTER).await
}

async fn lock_yielding_for<T>(mutex: &Mutex<T>, limit: Duration) -> MutexGuard<'_, T> {
    // A separate call, so that no guard (not `Send`) is alive across the
    // awaits below.
    if let Some(guard) = try_lock(mutex) {
        return guard;
    }
    let since = Instant::now();
    while since.elapsed() < limit {
        tokio::task::yield_now().await;
        if let Some(guard) = try_lock(mutex) {
            return guard;
        }
    }
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(p)) => Some(PoisonError::into_inner(p)),
        Err(TryLockError::WouldBlock) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "current_thread")]
    async fn waits_for_the_holder_while_other_tasks_run() {
        let mutex = Arc::new(Mutex::new(0u32));
        // Another thread holds the lock until told to let go.
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn({
            let mutex = mutex.clone();
            move || {
                let _guard = mutex.lock().unwrap();
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
            }
        });
        held_rx.recv().unwrap();
        // A task that needs the lock, and another that does not.
        let waiter = tokio::spawn({
            let mutex = mutex.clone();
            async move {
                // Yields without end: this test's holder lets go only when
                // this thread tells it to, so blocking here would never end.
                let mut guard = lock_yielding_for(&mutex, Duration::MAX).await;
                *guard += 1;
                *guard
            }
        });
        let other = tokio::spawn(async { 7 });
        // On this single thread, the other task finishes although the
        // waiter cannot go on: the waiter yields instead of blocking.
        assert_eq!(other.await.unwrap(), 7);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(!waiter.is_finished());
        release_tx.send(()).unwrap();
        assert_eq!(waiter.await.unwrap(), 1);
        holder.join().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn blocks_once_the_time_to_try_is_spent() {
        let mutex = Arc::new(Mutex::new(0u32));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn({
            let mutex = mutex.clone();
            move || {
                let _guard = mutex.lock().unwrap();
                held_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        held_rx.recv().unwrap();
        // With no time to try, the task waits in the kernel for the holder
        // to let go, then has the lock.
        {
            let mut guard = lock_yielding_for(&mutex, Duration::ZERO).await;
            *guard += 1;
        }
        holder.join().unwrap();
        assert_eq!(*mutex.lock().unwrap(), 1);
        // The lock free: taken on the first try.
        assert_eq!(
            *lock_yielding_for(&mutex, Duration::from_millis(1)).await,
            1
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn takes_a_poisoned_lock() {
        let mutex = Arc::new(Mutex::new(5u32));
        let m = mutex.clone();
        let _ = std::thread::spawn(move || {
            let _guard = m.lock().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert!(mutex.is_poisoned());
        assert_eq!(*lock_yielding(&mutex).await, 5);
    }
}
