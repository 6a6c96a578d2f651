//! The messages the bot has already handled, by their XEP-0359 ids, for as
//! long as the process runs: a message the room delivers again after a
//! reconnect (a stream resumption's redelivery, a replay past the history
//! guard) gets no second decision.

use std::collections::{HashSet, VecDeque};

/// How many ids are remembered: far more than a room delivers again after
/// a reconnect, bounded so that a long-running bot does not grow.
pub const REMEMBERED: usize = 4096;

/// A bounded set of ids, the oldest forgotten first.
#[derive(Debug, Default)]
pub struct HandledIds {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl HandledIds {
    /// Record `id`; `false` when it was already there (a repeat).
    pub fn first_time(&mut self, id: &str) -> bool {
        if self.ids.contains(id) {
            return false;
        }
        self.ids.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_caught_and_the_oldest_id_is_forgotten() {
        let mut seen = HandledIds::default();
        assert!(seen.first_time("a"));
        assert!(!seen.first_time("a"));
        for i in 0..REMEMBERED {
            assert!(seen.first_time(&i.to_string()));
        }
        assert!(seen.first_time("a"), "the oldest id is forgotten");
        assert_eq!(seen.ids.len(), REMEMBERED);
    }
}
