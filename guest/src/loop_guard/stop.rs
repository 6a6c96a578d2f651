//! A person's stop: a message that is one of the stop words, alone or with
//! the names of the agents it stops or a word for everyone (`stop`,
//! `@zhiwei stop`, `停！`, `STOP!!!`, `everyone stop`).

use session_switch_contract::marker::is_blank;

use super::text::{fold, without_names};

/// `text` as the stop rule compares it: case and width folded, blanks
/// trimmed, the final `.`, `!`, `。` and `！` removed (a person who types
/// `STOP!!!` means it more, not less), blanks trimmed again.
pub fn stop_form(text: &str) -> String {
    let folded = fold(text);
    // `！` is `!` once folded.
    let trimmed = folded
        .trim_matches(is_blank)
        .trim_end_matches(|c: char| matches!(c, '.' | '!' | '。') || is_blank(c));
    trimmed.to_owned()
}

/// Words that address everyone, or ask politely: around a stop word they
/// leave it a stop for every agent (`everyone stop`, `please stop`).
const EVERYONE: [&str; 8] = [
    "everyone",
    "everybody",
    "all",
    "please",
    "guys",
    "大家",
    "请",
    "你们",
];

/// Whether `body` is a stop: once the agents' `names` (nicks and
/// mentions) and the words for everyone are taken out, its [`stop_form`]
/// is one of `stop_words` (already in that form).
pub fn is_stop(body: &str, stop_words: &[String], names: &[&str]) -> bool {
    if stop_words.is_empty() {
        return false;
    }
    let mut words: Vec<&str> = names.to_vec();
    words.extend(EVERYONE);
    let form = stop_form(&without_names(body, &words));
    !form.is_empty() && stop_words.contains(&form)
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_switch_contract::meeting::DEFAULT_STOP_WORDS;

    fn words() -> Vec<String> {
        DEFAULT_STOP_WORDS.iter().map(|w| stop_form(w)).collect()
    }

    const NAMES: [&str; 4] = ["mohe", "@mohe", "zhiwei", "xiaoguo"];

    #[test]
    fn the_default_words_with_blanks_marks_case_and_width() {
        for body in [
            "stop",
            "STOP",
            " Stop. ",
            "stop!",
            "ｓｔｏｐ！",
            "/stop",
            "停",
            "停止。",
            "别说了！",
            "halt",
            "\u{3000}stop\u{200b}",
            "STOP!!!",
            "停！！",
            "stop..",
            "everyone stop",
            "stop all",
            "please stop",
            "大家停",
            "all, stop!",
        ] {
            assert!(is_stop(body, &words(), &NAMES), "{body:?}");
        }
        for body in [
            "stop it",
            "stop?",
            "please",
            "all",
            "bus stop ahead",
            "stopping",
            "don't stop",
            "",
            "!",
            "停下来吧",
        ] {
            assert!(!is_stop(body, &words(), &NAMES), "{body:?}");
        }
    }

    #[test]
    fn names_around_the_word_leave_it_a_stop() {
        for body in [
            "@zhiwei stop",
            "zhiwei: stop",
            "zhiwei, stop!",
            "@zhiwei @xiaoguo 停",
            "＠ｍｏｈｅ　ｓｔｏｐ",
            "stop @mohe",
            "zhiwei，停止",
        ] {
            assert!(is_stop(body, &words(), &NAMES), "{body:?}");
        }
        // A name of nobody configured is a word like any other.
        assert!(!is_stop("@anna stop", &words(), &NAMES));
        assert!(!is_stop("zhiwei2 stop", &words(), &NAMES));
    }

    #[test]
    fn no_stop_words_means_no_stop() {
        assert!(!is_stop("stop", &[], &NAMES));
    }
}
