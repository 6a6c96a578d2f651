//! Hermes `state.db`: reads and the store half of the atomic send.
