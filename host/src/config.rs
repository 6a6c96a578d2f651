//! The TOML config of DESIGN §8 (agents, room, transport, redirect settings).
