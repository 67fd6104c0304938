//! The runtime's own work requests (those of the awaiting calls,
//! [`crate::QueuePair::send`] and the like): each one's completion goes to
//! the task waiting for it, not to a completion queue.
//!
//! A request's id names a slot, reused once its waiter has its answer, so
//! an awaiting call allocates nothing once a connection is warm (a channel
//! per call and a map entry cost about as much as the rest of a small
//! Send's path). A generation in the id keeps a late completion of a slot's
//! earlier request from reaching the slot's next waiter.

use std::task::{Context, Poll, Waker};

use iwarp_proto::rdmap::Completion;

/// Work request ids with this bit set belong to the runtime.
pub(crate) const INTERNAL_WR: u64 = 1 << 63;

#[derive(Debug)]
enum State {
    Free,
    /// Posted; the waiter's waker once it has polled.
    Waiting(Option<Waker>),
    /// Completed, not yet taken by its waiter.
    Done(Completion),
    /// The waiter went away (its future was dropped) before the completion
    /// came: the slot is free once it comes, or the connection ends.
    Abandoned,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    state: State,
}

impl Slot {
    /// Frees the slot for its next request, which gets a new generation.
    fn reset(&mut self) {
        self.state = State::Free;
        self.generation = self.generation.wrapping_add(1);
    }
}

/// The slots of a connection's runtime-owned requests.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// The bits of a generation an id carries (the top bit is [`INTERNAL_WR`]).
const GENERATION_MASK: u32 = 0x7fff_ffff;

fn id_of(index: u32, generation: u32) -> u64 {
    INTERNAL_WR | u64::from(generation & GENERATION_MASK) << 32 | u64::from(index)
}

/// The slot index and the generation an id names.
fn parts(id: u64) -> (u32, u32) {
    (id as u32, (id >> 32) as u32 & GENERATION_MASK)
}

impl Waiters {
    /// The slot `id` names, if it still belongs to that request.
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        let (index, generation) = parts(id);
        self.slots
            .get_mut(index as usize)
            .filter(|s| s.generation & GENERATION_MASK == generation)
    }

    fn release(&mut self, id: u64) {
        if let Some(slot) = self.slot(id) {
            slot.reset();
            self.free.push(parts(id).0);
        }
    }

    /// A fresh id for a request about to be posted.
    pub(crate) fn register(&mut self) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    state: State::Free,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.state = State::Waiting(None);
        id_of(index, slot.generation)
    }

    /// The request `id` was refused when posted: nothing will complete.
    pub(crate) fn cancel(&mut self, id: u64) {
        self.release(id);
    }

    /// A runtime-owned request completed: its waiter is woken (or, gone,
    /// its slot freed). A completion for no current request is dropped.
    pub(crate) fn complete(&mut self, c: Completion) {
        let Some(slot) = self.slot(c.wr_id) else {
            return;
        };
        match std::mem::replace(&mut slot.state, State::Done(c)) {
            State::Waiting(waker) => {
                if let Some(w) = waker {
                    w.wake();
                }
            }
            State::Abandoned => self.release(c.wr_id),
            // Completed twice, or never posted: keep the first.
            other => slot.state = other,
        }
    }

    /// The waiter of `id` looks: its completion if it came, `None` if the
    /// connection has `finished` without it, else it waits.
    pub(crate) fn poll(
        &mut self,
        id: u64,
        cx: &mut Context<'_>,
        finished: bool,
    ) -> Poll<Option<Completion>> {
        let Some(slot) = self.slot(id) else {
            return Poll::Ready(None);
        };
        match &mut slot.state {
            State::Done(c) => {
                let c = *c;
                self.release(id);
                Poll::Ready(Some(c))
            }
            _ if finished => {
                self.release(id);
                Poll::Ready(None)
            }
            State::Waiting(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Free | State::Abandoned => Poll::Ready(None),
        }
    }

    /// The waiter of `id` went away before taking its answer.
    pub(crate) fn abandon(&mut self, id: u64) {
        let Some(slot) = self.slot(id) else {
            return;
        };
        match slot.state {
            State::Waiting(_) => slot.state = State::Abandoned,
            _ => self.release(id),
        }
    }

    /// The connection has ended: nothing will complete any more. Every
    /// waiter is woken to learn it; abandoned slots are freed.
    pub(crate) fn finish(&mut self) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            match &mut slot.state {
                State::Waiting(waker) => {
                    if let Some(w) = waker.take() {
                        w.wake();
                    }
                }
                State::Abandoned => {
                    slot.reset();
                    self.free.push(i as u32);
                }
                _ => {}
            }
        }
    }

    /// Slots in use or free: what the connection has allocated for them.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::tests::completion as done;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes, and the count.
    fn counting_waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn a_completion_reaches_its_waiter_and_the_slot_is_reused() {
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut w = Waiters::default();
        for round in 0..100 {
            let id = w.register();
            assert!(id & INTERNAL_WR != 0);
            assert!(w.poll(id, &mut cx, false).is_pending());
            w.complete(done(id));
            assert_eq!(count.0.load(Ordering::SeqCst), round + 1);
            assert_eq!(w.poll(id, &mut cx, false), Poll::Ready(Some(done(id))));
        }
        assert_eq!(w.capacity(), 1, "one slot serves one call at a time");
    }

    #[test]
    fn a_late_completion_does_not_reach_the_slots_next_waiter() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut w = Waiters::default();
        let first = w.register();
        w.abandon(first);
        // The abandoned request completes: the slot is free again.
        w.complete(done(first));
        let second = w.register();
        assert_ne!(first, second);
        assert_eq!(w.capacity(), 1);
        // A stray copy of the first completion is not the second's.
        w.complete(done(first));
        assert!(w.poll(second, &mut cx, false).is_pending());
        w.complete(done(second));
        assert_eq!(
            w.poll(second, &mut cx, false),
            Poll::Ready(Some(done(second)))
        );
    }

    #[test]
    fn the_end_of_the_connection_answers_every_waiter() {
        let (count, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut w = Waiters::default();
        let a = w.register();
        let b = w.register();
        let gone = w.register();
        assert!(w.poll(a, &mut cx, false).is_pending());
        assert!(w.poll(b, &mut cx, false).is_pending());
        w.abandon(gone);
        w.finish();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(w.poll(a, &mut cx, true), Poll::Ready(None));
        assert_eq!(w.poll(b, &mut cx, true), Poll::Ready(None));
        // Every slot is free: three more requests need no new one.
        let again: Vec<u64> = (0..3).map(|_| w.register()).collect();
        assert_eq!(w.capacity(), 3);
        w.cancel(again[0]);
        assert_eq!(w.register() & 0xffff_ffff, again[0] & 0xffff_ffff);
    }
}
