//! Completion queues: where finished work requests are reported.
//!
//! A [`CompletionQueue`] collects the completions of the queue pairs that
//! report to it (one queue may serve the send and receive sides of many
//! queue pairs, as in verbs). Poll it without waiting, wait for the next
//! completion, or consume it as an async stream.

use std::collections::VecDeque;
use std::future::poll_fn;
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
    /// The tasks whose wait found the queue empty, one entry per task.
    waiters: Vec<Waker>,
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

    /// Waits for the next completion.
    pub async fn next(&self) -> Completion {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The oldest completion, or `Pending` with the task registered to be
    /// woken by the next push. Looking and registering happen under the
    /// lock a push takes, so no completion can slip between them.
    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Completion> {
        let mut s = self.state.lock();
        if let Some(c) = s.queue.pop_front() {
            return Poll::Ready(c);
        }
        let waker = cx.waker();
        if !s.waiters.iter().any(|w| w.will_wake(waker)) {
            s.waiters.push(waker.clone());
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
                let waker = s.waiters.pop();
                drop(s);
                waker.into_iter().for_each(Waker::wake);
            }
            _ => {
                let woken = std::mem::take(&mut s.waiters);
                drop(s);
                woken.into_iter().for_each(Waker::wake);
            }
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
        assert_eq!(cq.state.lock().waiters.len(), tasks + 1);
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
}
