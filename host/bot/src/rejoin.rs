//! A rejoin: the steps of a join after a restart or a reconnect, when the bot has a
//! cursor: ask the room whether it archives, then either join and query
//! the archive from the cursor, or join asking for the history since the
//! cursor. The lines so caught up go to the decision thread before the
//! live messages that arrived meanwhile, at most `catch_up_lines` of them
//! (the rest logged as skipped). Without a cursor (a first start) the
//! join asks for no history, as before.

use crate::catch_up::{archive_query, archived, archives, disco_info, finished, join_since};
use crate::cursor::{Cursor, SAME_TIME_SECONDS};
use crate::other_seat;
use crate::room::{self, Incoming};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;
use tokio_xmpp::Stanza;
use tokio_xmpp::jid::BareJid;
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::parsers::message::Message;

/// How long the room's `disco#info` answer is awaited before the bot
/// joins asking for the history instead.
const DISCO_LIMIT: Duration = Duration::from_secs(5);
/// How long the archive's answer is awaited before the live messages held
/// meanwhile go on without it.
const ARCHIVE_LIMIT: Duration = Duration::from_secs(15);

#[derive(Debug)]
enum State {
    /// Nothing to catch up, or done.
    Idle,
    /// `disco#info` sent; the join waits for its answer.
    Discovering {
        id: String,
        cursor: Cursor,
        until: Instant,
    },
    /// Joined with no history; the archive is asked once the join is
    /// echoed.
    AwaitingJoin { cursor: Cursor },
    /// The archive query under way: the lines it gave, the live messages
    /// held until it ends.
    Archive {
        id: String,
        lines: Vec<Incoming>,
        live: Vec<Incoming>,
        until: Instant,
    },
    /// Joined with a history request: delayed messages after the join's
    /// echo are the history asked for.
    History { forwarded: u32 },
}

/// The catch-up of one connection.
pub struct Rejoin {
    state: State,
    max: u32,
    room: BareJid,
    nick: String,
    queries: u64,
}

/// What the runner does next: stanzas to send, messages to decide.
#[derive(Debug, Default)]
pub struct Steps {
    pub send: Vec<Stanza>,
    pub decide: Vec<Incoming>,
}

impl Rejoin {
    /// A rejoin for the bot seated as `nick` in `room`, catching up at most
    /// `max` lines.
    pub fn new(room: BareJid, nick: String, max: u32) -> Self {
        Self {
            state: State::Idle,
            max,
            room,
            nick,
            queries: 0,
        }
    }

    fn next_id(&mut self, what: &str) -> String {
        self.queries += 1;
        format!("ssw-{what}-{}-{}", std::process::id(), self.queries)
    }

    /// A new connection: with a cursor (and catch-up on), ask the room
    /// whether it archives; else join asking for no history.
    pub fn online(&mut self, cursor: Option<Cursor>) -> Steps {
        match cursor {
            Some(cursor) if self.max > 0 => {
                let id = self.next_id("disco");
                tracing::info!(
                    "catching up from the cursor (the last message decided, {}): asking {} \
                     whether it archives",
                    cursor.stanza_id.as_deref().unwrap_or("no stanza-id"),
                    self.room
                );
                self.state = State::Discovering {
                    id: id.clone(),
                    cursor,
                    until: Instant::now() + DISCO_LIMIT,
                };
                Steps {
                    send: vec![disco_info(&self.room, &id).into()],
                    decide: Vec::new(),
                }
            }
            _ => {
                self.state = State::Idle;
                self.plain_join()
            }
        }
    }

    fn plain_join(&self) -> Steps {
        match room::join(&self.room, &self.nick) {
            Ok(p) => Steps {
                send: vec![p.with_priority(other_seat::JOIN_PRIORITY).into()],
                decide: Vec::new(),
            },
            Err(e) => {
                tracing::error!("cannot join: {e}");
                Steps::default()
            }
        }
    }

    fn history_join(&mut self, cursor: &Cursor) -> Steps {
        // The room stamps with its own clock, the cursor holds the bot's:
        // a margin, and the lines decided already are skipped.
        match join_since(
            &self.room,
            &self.nick,
            cursor.at - SAME_TIME_SECONDS,
            self.max,
        ) {
            Ok(p) => {
                let p = p.with_priority(other_seat::JOIN_PRIORITY);
                tracing::info!(
                    "{} keeps no archive: joining with the history since the cursor (at most {} \
                     lines)",
                    self.room,
                    self.max
                );
                self.state = State::History { forwarded: 0 };
                Steps {
                    send: vec![p.into()],
                    decide: Vec::new(),
                }
            }
            Err(e) => {
                tracing::warn!("cannot ask for the history: {e}; joining without it");
                self.state = State::Idle;
                self.plain_join()
            }
        }
    }

    /// An IQ: the answer to the `disco#info` or the end of the archive
    /// query.
    pub fn iq(&mut self, iq: &Iq) -> Steps {
        match &self.state {
            State::Discovering { id, cursor, .. } => match archives(iq, id) {
                Some(true) => {
                    tracing::info!("{} archives (XEP-0313)", self.room);
                    self.state = State::AwaitingJoin {
                        cursor: cursor.clone(),
                    };
                    self.plain_join()
                }
                Some(false) => {
                    let cursor = cursor.clone();
                    self.history_join(&cursor)
                }
                None => Steps::default(),
            },
            State::Archive { id, .. } => match finished(iq, id) {
                Some(Ok(count)) => self.flush(count),
                Some(Err(why)) => {
                    tracing::warn!(
                        "the archive of {} refused the query ({why}): nothing caught up",
                        self.room
                    );
                    self.flush_live_only()
                }
                None => Steps::default(),
            },
            _ => Steps::default(),
        }
    }

    /// The room echoed the join: ask the archive, if that is the way.
    pub fn joined(&mut self) -> Steps {
        let State::AwaitingJoin { cursor } = &self.state else {
            return Steps::default();
        };
        let start = cursor.at - SAME_TIME_SECONDS;
        let id = self.next_id("mam");
        match archive_query(&self.room, &id, start, self.max as usize) {
            Ok(iq) => {
                self.state = State::Archive {
                    id,
                    lines: Vec::new(),
                    live: Vec::new(),
                    until: Instant::now() + ARCHIVE_LIMIT,
                };
                Steps {
                    send: vec![iq.into()],
                    decide: Vec::new(),
                }
            }
            Err(e) => {
                tracing::warn!("cannot ask the archive: {e}; nothing caught up");
                self.state = State::Idle;
                Steps::default()
            }
        }
    }

    /// A message from the archive query under way: taken (`true`).
    pub fn archived(&mut self, m: &Message, jids: &HashMap<String, String>) -> bool {
        let State::Archive { id, lines, .. } = &mut self.state else {
            return false;
        };
        match archived(m, id, &self.room, jids) {
            Some(line) => {
                lines.push(line);
                true
            }
            None => m
                .payloads
                .iter()
                .any(|p| p.is("result", crate::catch_up::NS_MAM)),
        }
    }

    /// A message of the room after the join's echo: what to decide now.
    /// Live messages wait while the archive is asked; a delayed one is the
    /// history asked for, caught up.
    pub fn message(&mut self, mut m: Incoming) -> Steps {
        match &mut self.state {
            State::Archive { live, .. } if !m.delayed => {
                live.push(m);
                Steps::default()
            }
            State::History { forwarded } if m.delayed => {
                if *forwarded >= self.max {
                    tracing::info!(
                        "{}'s message from while the bot was away skipped: past catch_up_lines \
                         ({})",
                        m.nick,
                        self.max
                    );
                    return Steps::default();
                }
                *forwarded += 1;
                m.delayed = false;
                m.caught_up = true;
                Steps {
                    send: Vec::new(),
                    decide: vec![m],
                }
            }
            _ if m.delayed => {
                tracing::debug!("{}'s delayed message (history): not answered", m.nick);
                Steps::default()
            }
            _ => Steps {
                send: Vec::new(),
                decide: vec![m],
            },
        }
    }

    /// When the step under way gives up waiting.
    pub fn until(&self) -> Option<Instant> {
        match &self.state {
            State::Discovering { until, .. } | State::Archive { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// The wait of [`Rejoin::until`] is over.
    pub fn expire(&mut self) -> Steps {
        match &self.state {
            State::Discovering { cursor, .. } => {
                tracing::warn!(
                    "{} did not say within {} s whether it archives",
                    self.room,
                    DISCO_LIMIT.as_secs()
                );
                let cursor = cursor.clone();
                self.history_join(&cursor)
            }
            State::Archive { .. } => {
                tracing::warn!(
                    "the archive of {} did not answer within {} s: nothing caught up",
                    self.room,
                    ARCHIVE_LIMIT.as_secs()
                );
                self.flush_live_only()
            }
            _ => Steps::default(),
        }
    }

    /// The archive's lines (those not also live), then the live messages
    /// held.
    fn flush(&mut self, count: Option<usize>) -> Steps {
        let State::Archive { lines, live, .. } = std::mem::replace(&mut self.state, State::Idle)
        else {
            return Steps::default();
        };
        let live_ids: HashSet<&String> = live.iter().filter_map(|m| m.stanza_id.as_ref()).collect();
        let mut decide: Vec<Incoming> = lines
            .into_iter()
            .filter(|l| l.stanza_id.as_ref().is_none_or(|id| !live_ids.contains(id)))
            .collect();
        let got = decide.len();
        if let Some(count) = count
            && count > self.max as usize
        {
            tracing::warn!(
                "{} lines from while the bot was away skipped: past catch_up_lines ({}); the \
                 newest {} are heard",
                count - self.max as usize,
                self.max,
                self.max
            );
        }
        tracing::info!(
            "caught up {got} lines from the archive of {} (lines decided before are skipped)",
            self.room
        );
        decide.extend(live);
        Steps {
            send: Vec::new(),
            decide,
        }
    }

    fn flush_live_only(&mut self) -> Steps {
        let State::Archive { live, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            return Steps::default();
        };
        Steps {
            send: Vec::new(),
            decide: live,
        }
    }
}
