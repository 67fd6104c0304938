//! The connection's lock: threads take it the blocking way (a user's post,
//! a synchronous call), the connection's own tasks without blocking their
//! thread, by waiting for its release as a task, for up to 5 ms.
//!
//! The reader and writer tasks share one lock with the application, whose
//! posts write to the socket under it. Taken with a blocking `lock`, a
//! contended lock parked the whole runtime thread in the kernel (a futex
//! wait) until the holder's system call returned, and waking it again was
//! a cross-core wake-up: about 10,000 context switches for 30,000 RDMA
//! Writes of 64 KiB at a depth of 128 on the 2-core VM.
//!
//! The tasks then tried the lock and yielded to the runtime while it was
//! held, but that spins: every yield is a trip through the scheduler and a
//! poll of the I/O driver (an `epoll_wait`), and while an application
//! posts back to back the reader found the lock held 25 times per turn.
//! The same run made 307,785 `epoll_wait` calls (plain TCP: 7,396), most
//! of them by the client's reader spinning on the lock while the
//! application wrote, on the core the server end needed.
//!
//! So a task that finds the lock held now waits to be told of its release
//! ([`TaskLock::lock_async`]): every release checks, with one atomic load,
//! whether a task waits, and wakes it. A task woken from the holder's
//! thread runs there once the holder's task yields, which is when the lock
//! is free, with no cross-core wake-up. Nothing holding the lock awaits, so
//! a holder always releases soon.
//!
//! Waiting is unfair, though: a thread that posts in a tight loop takes the
//! lock again nanoseconds after releasing it, while a woken task comes back
//! microseconds later, so a task could miss it for as long as the loop
//! runs. After waiting for [`BLOCK_AFTER`] the task therefore takes the
//! lock the blocking way and queues for it in the kernel.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long a task waits before it blocks: far longer than the lock is
/// held, even for a whole read turn, so only a holder that keeps taking it
/// back makes a task wait in the kernel.
const BLOCK_AFTER: Duration = Duration::from_millis(5);

/// A mutex that threads take blocking and tasks take by waiting for its
/// release. A poisoned lock is taken as it is: the connection's state
/// stays consistent between calls, which never leave it half changed on
/// a panic they could recover from.
#[derive(Debug)]
pub(crate) struct TaskLock<T> {
    mutex: Mutex<T>,
    /// Tasks waiting for a release.
    waiting: AtomicUsize,
    released: Notify,
}

/// The lock held; releasing it wakes the tasks waiting for it.
#[derive(Debug)]
pub(crate) struct TaskGuard<'a, T> {
    guard: Option<MutexGuard<'a, T>>,
    lock: &'a TaskLock<T>,
}

impl<T> TaskLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            mutex: Mutex::new(value),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
        }
    }

    fn guard<'a>(&'a self, guard: MutexGuard<'a, T>) -> TaskGuard<'a, T> {
        TaskGuard {
            guard: Some(guard),
            lock: self,
        }
    }

    /// Takes the lock, blocking the thread while another holds it.
    pub(crate) fn lock(&self) -> TaskGuard<'_, T> {
        self.guard(self.mutex.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn try_lock(&self) -> Option<TaskGuard<'_, T>> {
        match self.mutex.try_lock() {
            Ok(guard) => Some(self.guard(guard)),
            Err(TryLockError::Poisoned(p)) => Some(self.guard(PoisonError::into_inner(p))),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Takes the lock as a task: while another holds it the task waits for
    /// the release without blocking its thread, and blocks once it has
    /// waited for [`BLOCK_AFTER`].
    pub(crate) async fn lock_async(&self) -> TaskGuard<'_, T> {
        self.lock_async_for(BLOCK_AFTER).await
    }

    async fn lock_async_for(&self, limit: Duration) -> TaskGuard<'_, T> {
        if let Some(guard) = self.try_lock() {
            return guard;
        }
        let since = Instant::now();
        while since.elapsed() < limit {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before the count goes up: a release that sees the
            // count wakes this waiter.
            released.as_mut().enable();
            let _waiting = Waiting::new(&self.waiting);
            // A release between the failed try and the count going up did
            // not see the count: try again, now that any later one will.
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            released.await;
            if let Some(guard) = self.try_lock() {
                return guard;
            }
        }
        self.lock()
    }
}

impl<T> Deref for TaskGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.guard.as_deref().expect("held until dropped")
    }
}

impl<T> DerefMut for TaskGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_deref_mut().expect("held until dropped")
    }
}

impl<T> Drop for TaskGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.guard.take());
        // The release before the look at the count, and (in `Waiting::new`)
        // the count before a waiter's last try: one of the two sees the
        // other, so no waiter sleeps through the release.
        fence(Ordering::SeqCst);
        if self.lock.waiting.load(Ordering::Relaxed) > 0 {
            self.lock.released.notify_waiters();
        }
    }
}

/// One task counted as waiting, for as long as this lives (also when the
/// waiting future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    /// A thread holding `lock` until told to let go.
    fn hold(
        lock: &Arc<TaskLock<u32>>,
    ) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn({
            let lock = lock.clone();
            move || {
                let _guard = lock.lock();
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
            }
        });
        held_rx.recv().unwrap();
        (holder, release_tx)
    }

    /// Counts how often the future it wraps is polled.
    struct CountPolls<F> {
        inner: Pin<Box<F>>,
        polls: Arc<AtomicUsize>,
    }

    impl<F: Future> Future for CountPolls<F> {
        type Output = F::Output;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.inner.as_mut().poll(cx)
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn waits_for_the_release_while_other_tasks_run_without_spinning() {
        let lock = Arc::new(TaskLock::new(0u32));
        let (holder, release) = hold(&lock);
        let polls = Arc::new(AtomicUsize::new(0));
        // A task that needs the lock, and another that does not.
        let waiter = tokio::spawn(CountPolls {
            inner: Box::pin({
                let lock = lock.clone();
                async move {
                    // Waits without end: this test's holder lets go only
                    // when this thread tells it to, so blocking here would
                    // never end.
                    let mut guard = lock.lock_async_for(Duration::MAX).await;
                    *guard += 1;
                    *guard
                }
            }),
            polls: polls.clone(),
        });
        let other = tokio::spawn(async { 7 });
        // On this single thread, the other task finishes although the
        // waiter cannot go on: the waiter does not block the thread.
        assert_eq!(other.await.unwrap(), 7);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        // It sleeps until the release instead of trying again and again.
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        release.send(()).unwrap();
        assert_eq!(waiter.await.unwrap(), 1);
        assert!(polls.load(Ordering::Relaxed) <= 3);
        holder.join().unwrap();
        assert_eq!(lock.waiting.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_tasks_and_threads_lose_no_release() {
        let lock = Arc::new(TaskLock::new(0u32));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let lock = lock.clone();
                tokio::spawn(async move {
                    for _ in 0..2000 {
                        *lock.lock_async_for(Duration::MAX).await += 1;
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in tasks {
            // A lost wake-up would leave a task asleep with the lock free.
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("a waiter slept through a release")
                .unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 10 * 2000);
        assert_eq!(lock.waiting.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn blocks_once_the_time_to_wait_is_spent() {
        let lock = Arc::new(TaskLock::new(0u32));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn({
            let lock = lock.clone();
            move || {
                let _guard = lock.lock();
                held_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        held_rx.recv().unwrap();
        // With no time to wait, the task waits in the kernel for the holder
        // to let go, then has the lock.
        {
            let mut guard = lock.lock_async_for(Duration::ZERO).await;
            *guard += 1;
        }
        holder.join().unwrap();
        assert_eq!(*lock.lock(), 1);
        // The lock free: taken on the first try.
        assert_eq!(*lock.lock_async_for(Duration::from_millis(1)).await, 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_waiter_is_no_longer_counted() {
        let lock = Arc::new(TaskLock::new(0u32));
        let (holder, release) = hold(&lock);
        let gave_up = tokio::time::timeout(
            Duration::from_millis(10),
            lock.lock_async_for(Duration::MAX),
        )
        .await;
        assert!(gave_up.is_err());
        assert_eq!(lock.waiting.load(Ordering::Relaxed), 0);
        release.send(()).unwrap();
        holder.join().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn takes_a_poisoned_lock() {
        let lock = Arc::new(TaskLock::new(5u32));
        let l = lock.clone();
        let _ = std::thread::spawn(move || {
            let _guard = l.lock();
            panic!("poisons the lock");
        })
        .join();
        assert!(lock.mutex.is_poisoned());
        assert_eq!(*lock.lock_async().await, 5);
        assert_eq!(*lock.lock(), 5);
    }
}
