//! Completion queues: where finished work requests are reported.
//!
//! A [`CompletionQueue`] collects the completions of the queue pairs that
//! report to it (one queue may serve the send and receive sides of many
//! queue pairs, as in verbs). Poll it without waiting, wait for the next
//! completion, or consume it as an async stream.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::stream::{self, Stream};
use tokio::sync::Notify;

pub use iwarp_proto::rdmap::{Completion, CompletionOpcode, CompletionStatus};

#[derive(Debug, Default)]
struct CqInner {
    queue: Mutex<VecDeque<Completion>>,
    ready: Notify,
}

/// A completion queue. Cloning gives another handle to the same queue.
#[derive(Debug, Clone, Default)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl CompletionQueue {
    /// An empty queue with room for `capacity` completions before it grows.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(CqInner {
                queue: Mutex::new(VecDeque::with_capacity(capacity)),
                ready: Notify::new(),
            }),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Completion>> {
        self.inner
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The oldest completion, if any, without waiting.
    pub fn poll(&self) -> Option<Completion> {
        self.queue().pop_front()
    }

    /// Moves up to `max` completions into `out`; returns how many.
    pub fn poll_many(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut q = self.queue();
        let n = q.len().min(max);
        out.extend(q.drain(..n));
        n
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.queue().len()
    }

    /// Whether no completion is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next completion.
    pub async fn next(&self) -> Completion {
        loop {
            // Register interest before looking, so that a push between
            // the look and the wait is not missed.
            let notified = self.inner.ready.notified();
            if let Some(c) = self.poll() {
                return c;
            }
            notified.await;
        }
    }

    /// The completions as an async stream that never ends.
    pub fn stream(&self) -> impl Stream<Item = Completion> + Send + 'static {
        stream::unfold(self.clone(), |cq| async move {
            let c = cq.next().await;
            Some((c, cq))
        })
    }

    /// Adds completions and wakes a waiter.
    pub(crate) fn push(&self, c: Completion) {
        self.queue().push_back(c);
        // Waiters create their `Notified` before looking at the queue, so
        // waking the ones that exist now cannot lose a completion.
        self.inner.ready.notify_waiters();
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
}
