//! `[loop_guard]` (docs/src/design/loop-guard.md): when agents in the room
//! stop answering each other. Every key is optional; the defaults are the
//! design's (`LoopGuardConfig`'s `Default`, types.rs).

use session_switch_contract::failure::Failure;
use toml::Spanned;

use super::raw::RawLoopGuard;
use super::source::Source;
use super::types::LoopGuardConfig;

/// `[loop_guard]` with its defaults. `max_hops`, `window_messages` and
/// `window_seconds` must be at least 1 (the policy's `configure` refuses 0:
/// a guard that refuses everything would silence the agents even for a
/// person); `duplicate_seconds` 0 turns the duplicate rule off. A negative
/// or fractional value is refused by the parser, also with its line.
pub(super) fn loop_guard(
    raw: Option<RawLoopGuard>,
    src: &Source<'_>,
) -> Result<LoopGuardConfig, Failure> {
    let defaults = LoopGuardConfig::default();
    let Some(raw) = raw else {
        return Ok(defaults);
    };
    let at_least_one = |value: Option<Spanned<u32>>, what: &str, default: u32| match value {
        Some(v) if *v.get_ref() == 0 => {
            Err(src.at(v.span(), format!("[loop_guard] {what} must be at least 1")))
        }
        Some(v) => Ok(v.into_inner()),
        None => Ok(default),
    };
    Ok(LoopGuardConfig {
        max_hops: at_least_one(raw.max_hops, "max_hops", defaults.max_hops)?,
        window_messages: at_least_one(
            raw.window_messages,
            "window_messages",
            defaults.window_messages,
        )?,
        window_seconds: at_least_one(
            raw.window_seconds,
            "window_seconds",
            defaults.window_seconds,
        )?,
        duplicate_seconds: raw.duplicate_seconds.unwrap_or(defaults.duplicate_seconds),
    })
}

#[cfg(test)]
mod tests {
    use crate::LoopGuardConfig;
    use crate::tests::parse;

    #[test]
    fn no_section_means_the_designs_defaults() {
        let config = parse("").unwrap();
        assert_eq!(
            config.loop_guard,
            LoopGuardConfig {
                max_hops: 6,
                window_messages: 20,
                window_seconds: 300,
                duplicate_seconds: 600
            }
        );
    }

    #[test]
    fn every_key_is_read() {
        let config = parse(
            "[loop_guard]\nmax_hops = 3\nwindow_messages = 9\nwindow_seconds = 60\n\
             duplicate_seconds = 0\n",
        )
        .unwrap();
        assert_eq!(
            config.loop_guard,
            LoopGuardConfig {
                max_hops: 3,
                window_messages: 9,
                window_seconds: 60,
                duplicate_seconds: 0
            }
        );
    }

    #[test]
    fn zero_counts_are_refused_with_their_line() {
        for (key, line) in [
            ("max_hops", 10),
            ("window_messages", 11),
            ("window_seconds", 12),
        ] {
            // Line 8 is `[loop_guard]`, 9 `duplicate_seconds`, then the
            // three counts in this order.
            let mut extra = String::from("[loop_guard]\n");
            extra.push_str("duplicate_seconds = 5\n");
            for k in ["max_hops", "window_messages", "window_seconds"] {
                let v = if k == key { 0 } else { 4 };
                extra.push_str(&format!("{k} = {v}\n"));
            }
            assert_eq!(
                parse(&extra).unwrap_err(),
                format!("config t, line {line}: [loop_guard] {key} must be at least 1"),
            );
        }
    }

    #[test]
    fn negative_fractional_and_unknown_values_are_refused_with_their_line() {
        let negative = parse("[loop_guard]\nmax_hops = -1\n").unwrap_err();
        assert!(negative.starts_with("config t, line 9: "), "{negative}");
        let fraction = parse("[loop_guard]\nwindow_seconds = 2.5\n").unwrap_err();
        assert!(fraction.starts_with("config t, line 9: "), "{fraction}");
        let text = parse("[loop_guard]\nduplicate_seconds = \"600\"\n").unwrap_err();
        assert!(text.starts_with("config t, line 9: "), "{text}");
        let unknown = parse("[loop_guard]\nmax_hop = 6\n").unwrap_err();
        assert!(
            unknown.starts_with("config t, line 9: unknown field `max_hop`"),
            "{unknown}"
        );
    }
}
