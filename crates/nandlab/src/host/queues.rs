//! Submission queues: each holds at most `depth` outstanding commands.
//!
//! Requests are simulated in arrival order, with their completion times
//! known when they are admitted, so a queue is a min-heap of the
//! completion times of its outstanding commands: a request arriving at a
//! full queue is admitted when the earliest of them completes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// N submission queues of one depth.
pub struct SubmissionQueues {
    depth: usize,
    outstanding: Vec<BinaryHeap<Reverse<u64>>>,
}

impl SubmissionQueues {
    pub fn new(queues: u32, depth: u32) -> Self {
        SubmissionQueues {
            depth: depth.max(1) as usize,
            outstanding: (0..queues.max(1)).map(|_| BinaryHeap::new()).collect(),
        }
    }

    pub fn queues(&self) -> u32 {
        self.outstanding.len() as u32
    }

    /// When a request arriving at `arrival_ns` on queue `q` is admitted.
    pub fn admit(&mut self, q: u32, arrival_ns: u64) -> u64 {
        let n = self.outstanding.len();
        let heap = &mut self.outstanding[q as usize % n];
        while heap.peek().is_some_and(|Reverse(c)| *c <= arrival_ns) {
            heap.pop();
        }
        if heap.len() < self.depth {
            arrival_ns
        } else {
            let Reverse(first) = heap.pop().expect("a full queue is not empty");
            first.max(arrival_ns)
        }
    }

    /// Record the completion time of a request admitted on queue `q`.
    pub fn complete_at(&mut self, q: u32, completion_ns: u64) {
        let n = self.outstanding.len();
        self.outstanding[q as usize % n].push(Reverse(completion_ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_admits_when_its_first_command_completes() {
        let mut q = SubmissionQueues::new(2, 2);
        assert_eq!(q.admit(0, 0), 0);
        q.complete_at(0, 100);
        assert_eq!(q.admit(0, 0), 0);
        q.complete_at(0, 50);
        assert_eq!(q.admit(0, 10), 50, "full: waits for the completion at 50");
        q.complete_at(0, 200);
        assert_eq!(q.admit(1, 10), 10, "the other queue is empty");
        assert_eq!(q.admit(0, 300), 300, "everything completed by then");
    }
}
