//! The host's clock (feature `host`): the policy has none of its own and
//! asks the host (WIT `host.now`).

/// The system clock in Unix seconds, as `state.db` and WIT `host.now` count
/// time (REAL seconds; 0 for a clock set before 1970).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
