//! What the decision thread hands the XMPP task: the reply to post, made
//! fit for the room ([`normalise`]), how far the thread has heard
//! ([`Progress`]: a reply waits until every message before it was heard)
//! and the turn under way ([`UnderWay`], for the stop's log line).

use session_switch::runtime::untag;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What the decision thread hands back to the XMPP task.
#[derive(Debug)]
pub struct Reply {
    /// The body to post (normalised, within `max_body_chars`).
    pub body: String,
    /// Whom it answers, for the log.
    pub to_nick: String,
    /// The session the turn ran in.
    pub session: String,
    /// How many stops the decision thread had heard when it handed the
    /// reply on: a stop heard after that keeps it from the room.
    pub stops: u64,
}

/// How far the decision thread is, for the XMPP task: how many messages
/// it has heard and how many of them were stops. A reply is posted only
/// once every message received before it was heard, and no stop among
/// them.
#[derive(Debug, Default)]
pub struct Progress {
    heard: AtomicU64,
    stops: AtomicU64,
}

impl Progress {
    /// Messages heard so far.
    pub fn heard(&self) -> u64 {
        self.heard.load(Ordering::Acquire)
    }

    /// Stops heard so far.
    pub fn stops(&self) -> u64 {
        self.stops.load(Ordering::Acquire)
    }

    /// One more message heard, `stops` stops in all so far.
    pub(crate) fn heard_one(&self, stops: u64) {
        self.stops.store(stops, Ordering::Release);
        self.heard.fetch_add(1, Ordering::AcqRel);
    }
}

/// The turn the decision thread is waiting on, if any (`the reply to anna
/// (session …)`): what a stop leaves unposted, for its log line.
#[derive(Clone, Default)]
pub struct UnderWay(Arc<Mutex<Option<String>>>);

impl UnderWay {
    pub(crate) fn set(&self, turn: Option<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = turn;
    }

    /// The turn under way now.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A reply as the room may carry it: CRLF and CR → LF, the characters
/// XML 1.0 forbids removed (a stanza holding one would end the stream),
/// a leading `[YOU]` marker removed (the room must not see the tag,
/// docs/src/design/rules.md), blanks trimmed, cut to `max_chars` characters.
pub fn normalise(reply: &str, max_chars: usize) -> String {
    let text = reply.replace("\r\n", "\n").replace('\r', "\n");
    let text: String = text
        .chars()
        .filter(|&c| {
            matches!(c, '\t' | '\n') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
        })
        .collect();
    let text = untag(text.trim()).trim();
    text.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn replies_are_made_fit_for_the_room() {
        assert_eq!(normalise("[YOU] hello\r\nthere\u{1}", 100), "hello\nthere");
        assert_eq!(normalise("  ok  ", 100), "ok");
        assert_eq!(normalise("abcdef", 3), "abc");
        assert_eq!(normalise("\u{7}", 3), "");
    }
}
