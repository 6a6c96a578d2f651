//! The parts of xtask the tests use too: the reference pages
//! ([`reference`]), so `make test` can tell when one is stale.

pub mod reference;
