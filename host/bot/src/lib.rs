//! The agent's room bot (`xmpp-session-bridge bot --agent NAME`): one
//! process per agent, seated in the MUC room under the agent's nick, that
//! makes the decisions session-switch's [`session_switch::Bridge`] offers
//! for every live room message and runs the agent's turn in its Hermes API
//! server.
//!
//! Data flows one way: XMPP ([`runner`], [`room`]) → the decision thread
//! ([`decide`]: `is-own`, `admit`, `resolve`) → Hermes ([`hermes`]) → the
//! reply back to the room ([`reply`]). [`settings`] gathers what one bot needs from
//! the config, the password source and Hermes's `.env`.

pub mod catch_up;
pub mod check;
pub mod connect;
pub mod cursor;
pub mod decide;
pub mod handled_ids;
pub mod hermes;
pub mod lock;
pub mod login;
pub mod other_seat;
pub mod rejoin;
pub mod reply;
pub mod resource;
pub mod room;
pub mod room_line;
pub mod runner;
pub mod seat;
pub mod settings;
pub mod tls;

pub use check::{Health, check};
pub use runner::run;
pub use settings::BotSettings;
