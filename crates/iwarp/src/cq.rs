//! Completion queues: where finished work requests are reported.
//!
//! A [`CompletionQueue`] collects the completions of the queue pairs that
//! report to it (one queue may serve the send and receive sides of many
//! queue pairs, as in verbs). Poll it without waiting, wait for the next
//! completion, or consume it as an async stream.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_util::stream::{self, Stream};
use parking_lot::Mutex;

pub use iwarp_proto::rdmap::{Completion, CompletionOpcode, CompletionStatus};

/// The completions and the tasks waiting for one, under one lock: a push
/// takes the lock once, and wakes nobody when nobody waits (the usual case
/// for a send queue that is polled). `tokio::sync::Notify` cost a second
/// lock per push, taken even with no waiter, and a list node per wait.
#[derive(Debug, Default)]
struct CqState {
    queue: VecDeque<Completion>,
    /// The waits that found the queue empty, one entry each (a task with
    /// two waits at once has two), by the id their future keeps.
    waiters: Vec<(u64, Waker)>,
    /// The id of the next entry.
    next_waiter: u64,
}

impl CqState {
    /// Takes entry `id` off the list, if a push has not taken it already.
    fn forget(&mut self, id: u64) {
        if let Some(i) = self.waiters.iter().position(|(i, _)| *i == id) {
            self.waiters.swap_remove(i);
        }
    }
}

/// A completion queue. Cloning gives another handle to the same queue.
#[derive(Debug, Clone, Default)]
pub struct CompletionQueue {
    state: Arc<Mutex<CqState>>,
}

impl CompletionQueue {
    /// An empty queue with room for `capacity` completions before it grows.
    pub fn new(capacity: usize) -> Self {
        Self {
            state: Arc::new(Mutex::new(CqState {
                queue: VecDeque::with_capacity(capacity),
                waiters: Vec::new(),
                next_waiter: 0,
            })),
        }
    }

    /// The oldest completion, if any, without waiting.
    pub fn poll(&self) -> Option<Completion> {
        self.state.lock().queue.pop_front()
    }

    /// Moves up to `max` completions into `out`; returns how many.
    pub fn poll_many(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut s = self.state.lock();
        let n = s.queue.len().min(max);
        out.extend(s.queue.drain(..n));
        n
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next completion. A wait given up (its future dropped,
    /// by a timeout say) takes its entry off the queue's list at once.
    pub fn next(&self) -> impl Future<Output = Completion> + Send + '_ {
        Next {
            cq: self,
            registered: None,
        }
    }

    /// The oldest completion, or `Pending` with the wait registered to be
    /// woken by the next push. Looking and registering happen under the
    /// lock a push takes, so no completion can slip between them.
    /// `registered` is this wait's entry on the list, if it left one.
    fn poll_next(&self, cx: &mut Context<'_>, registered: &mut Option<u64>) -> Poll<Completion> {
        let mut s = self.state.lock();
        if let Some(c) = s.queue.pop_front() {
            // An entry is left only while the queue is empty, and the push
            // that ends that takes every entry: this wait's is gone.
            *registered = None;
            return Poll::Ready(c);
        }
        let waker = cx.waker();
        match registered.and_then(|id| s.waiters.iter_mut().find(|(i, _)| *i == id)) {
            Some((_, w)) => {
                if !w.will_wake(waker) {
                    // Polled by another task now.
                    w.clone_from(waker);
                }
            }
            // New, or taken by a push since.
            None => {
                let id = s.next_waiter;
                s.next_waiter += 1;
                s.waiters.push((id, waker.clone()));
                *registered = Some(id);
            }
        }
        Poll::Pending
    }

    /// The completions as an async stream that never ends.
    pub fn stream(&self) -> impl Stream<Item = Completion> + Send + 'static {
        stream::unfold(self.clone(), |cq| async move {
            let c = cq.next().await;
            Some((c, cq))
        })
    }

    /// Adds a completion and wakes every task waiting for one (one gets
    /// it; the others, finding the queue empty, wait again).
    pub(crate) fn push(&self, c: Completion) {
        let mut s = self.state.lock();
        s.queue.push_back(c);
        // Wake outside the lock (a wake may unpark another thread), and only
        // those waiting now: one that wakes, finds nothing and waits again
        // is woken by the next push, not by this one.
        match s.waiters.len() {
            0 => {}
            // The usual case: the list keeps its allocation.
            1 => {
                let waiter = s.waiters.pop();
                drop(s);
                waiter.into_iter().for_each(|(_, w)| w.wake());
            }
            _ => {
                let woken = std::mem::take(&mut s.waiters);
                drop(s);
                woken.into_iter().for_each(|(_, w)| w.wake());
            }
        }
    }
}

/// The wait of [`CompletionQueue::next`].
struct Next<'a> {
    cq: &'a CompletionQueue,
    /// The entry this wait left on the queue's list, if it did.
    registered: Option<u64>,
}

impl Future for Next<'_> {
    type Output = Completion;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion> {
        let this = &mut *self;
        this.cq.poll_next(cx, &mut this.registered)
    }
}

impl Drop for Next<'_> {
    /// A wait given up leaves nothing behind: before, its waker stayed on
    /// the list until the next push woke the task for nothing, and kept
    /// the task's allocation alive until then.
    fn drop(&mut self) {
        if let Some(id) = self.registered.take() {
            self.cq.state.lock().forget(id);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use futures_util::StreamExt;
    use iwarp_proto::rdmap::{CompletionOpcode, CompletionStatus};

    /// A successful Send completion of `wr_id`, for tests.
    pub(crate) fn completion(wr_id: u64) -> Completion {
        Completion {
            wr_id,
            status: CompletionStatus::Success,
            opcode: CompletionOpcode::Send,
            byte_len: 0,
            solicited: false,
            invalidated: None,
        }
    }

    #[tokio::test]
    async fn poll_wait_and_stream() {
        let cq = CompletionQueue::new(4);
        assert!(cq.poll().is_none());
        cq.push(completion(1));
        cq.push(completion(2));
        assert_eq!(cq.len(), 2);
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(1));
        assert_eq!(cq.next().await.wr_id, 2);
        let waiter = {
            let cq = cq.clone();
            tokio::spawn(async move { cq.next().await.wr_id })
        };
        tokio::task::yield_now().await;
        cq.push(completion(3));
        assert_eq!(waiter.await.unwrap(), 3);
        let mut s = Box::pin(cq.stream());
        cq.push(completion(4));
        cq.push(completion(5));
        assert_eq!(s.next().await.map(|c| c.wr_id), Some(4));
        assert_eq!(s.next().await.map(|c| c.wr_id), Some(5));
        let mut out = Vec::new();
        cq.push(completion(6));
        assert_eq!(cq.poll_many(&mut out, 10), 1);
        assert_eq!(out[0].wr_id, 6);
    }

    /// Every waiting task gets a completion when many wait, and a wait
    /// given up loses nothing.
    #[tokio::test]
    async fn many_waiters_each_get_one_and_a_cancelled_wait_loses_nothing() {
        let cq = CompletionQueue::new(4);
        let tasks = 20;
        let waiters: Vec<_> = (0..tasks)
            .map(|_| {
                let cq = cq.clone();
                tokio::spawn(async move { cq.next().await.wr_id })
            })
            .collect();
        // A wait that registers, then is dropped.
        {
            let mut abandoned = Box::pin(cq.next());
            let waker = futures_util::task::noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(std::future::Future::poll(abandoned.as_mut(), &mut cx).is_pending());
        }
        // One thread: every task has run to its wait when this one is back.
        tokio::task::yield_now().await;
        // The abandoned wait took its entry with it.
        assert_eq!(cq.state.lock().waiters.len(), tasks);
        for id in 0..tasks as u64 {
            cq.push(completion(id));
        }
        let mut got: Vec<u64> = Vec::new();
        for w in waiters {
            let id = tokio::time::timeout(std::time::Duration::from_secs(10), w).await;
            got.push(id.expect("a waiter was never woken").unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, (0..tasks as u64).collect::<Vec<_>>());
        assert!(cq.is_empty());
        // The abandoned wait's registration does not swallow a completion.
        cq.push(completion(99));
        assert_eq!(cq.poll().map(|c| c.wr_id), Some(99));
    }

    /// Counts the wakes of a task that is never run.
    #[derive(Default)]
    struct CountWakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    impl CountWakes {
        /// A waker of a new counting task, and how to read its count.
        fn task() -> (Waker, impl Fn() -> usize) {
            let count = Arc::new(Self::default());
            let waker = Waker::from(count.clone());
            (waker, move || {
                count.0.load(std::sync::atomic::Ordering::Relaxed)
            })
        }
    }

    /// A wait given up before any push is not woken by the next one, and
    /// leaves nothing on the list; a wait polled again keeps one entry.
    #[test]
    fn a_dropped_wait_is_not_woken_and_leaves_no_entry() {
        let cq = CompletionQueue::new(4);
        let (waker, wakes) = CountWakes::task();
        let mut cx = Context::from_waker(&waker);
        {
            let mut wait = Box::pin(cq.next());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            assert_eq!(cq.state.lock().waiters.len(), 1);
        }
        assert!(cq.state.lock().waiters.is_empty());
        cq.push(completion(1));
        assert_eq!(wakes(), 0);
        // A wait that gets its completion leaves no entry either, whether
        // the push took the entry or the completion was there already.
        let mut wait = Box::pin(cq.next());
        assert_eq!(wait.as_mut().poll(&mut cx).map(|c| c.wr_id), Poll::Ready(1));
        let mut wait = Box::pin(cq.next());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        cq.push(completion(2));
        assert_eq!(wakes(), 1);
        assert_eq!(wait.as_mut().poll(&mut cx).map(|c| c.wr_id), Poll::Ready(2));
        assert!(cq.state.lock().waiters.is_empty());
    }

    /// Two waits of one task on one queue: the first to finish does not
    /// take the other's registration with it.
    #[test]
    fn two_waits_of_one_task_each_keep_their_entry() {
        let cq = CompletionQueue::new(4);
        let (waker, wakes) = CountWakes::task();
        let mut cx = Context::from_waker(&waker);
        let mut first = Box::pin(cq.next());
        let mut second = Box::pin(cq.next());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert_eq!(cq.state.lock().waiters.len(), 2);
        cq.push(completion(1));
        assert_eq!(
            first.as_mut().poll(&mut cx).map(|c| c.wr_id),
            Poll::Ready(1)
        );
        assert!(second.as_mut().poll(&mut cx).is_pending());
        let woken = wakes();
        cq.push(completion(2));
        assert!(wakes() > woken, "the second wait was not woken");
        assert_eq!(
            second.as_mut().poll(&mut cx).map(|c| c.wr_id),
            Poll::Ready(2)
        );
    }

    /// A wait polled by a second task wakes that one, not the first.
    #[test]
    fn a_wait_moved_to_another_task_wakes_the_new_one() {
        let cq = CompletionQueue::new(4);
        let ((w1, before), (w2, after)) = (CountWakes::task(), CountWakes::task());
        let mut wait = Box::pin(cq.next());
        assert!(wait
            .as_mut()
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        assert!(wait
            .as_mut()
            .poll(&mut Context::from_waker(&w2))
            .is_pending());
        assert_eq!(cq.state.lock().waiters.len(), 1);
        cq.push(completion(1));
        assert_eq!((before(), after()), (0, 1));
    }
}
