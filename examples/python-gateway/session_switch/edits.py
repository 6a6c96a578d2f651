"""The host's half of "history crosses the boundary as summaries"
(DESIGN §7, §8): build the summaries the policy sees, check the edits it
answers with, and apply them to the full rows the host kept. The twin of
the Rust host's host/src/runtime/apply.rs; both must give the same text.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

#: The tag the bridge puts before an agent's own words (the seed's `[YOU] `).
YOU_TAG = "[YOU] "

#: Unicode's `White_Space` property (PropList.txt), which Rust's
#: `char::is_whitespace` and so `str::trim_start` use. Python's
#: `str.isspace()` (and a bare `str.lstrip()`) also counts U+001C..U+001F
#: (the information separators, bidi class B/S), which are *not*
#: `White_Space`: with a bare `lstrip()` the Python host would strip them
#: where the Rust host and the policy keep them, and the model would see
#: different text. So the set is spelled out.
WHITE_SPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

_MARKER = "[you]"


def untag(content: str) -> str:
    """Remove every leading `[YOU]` marker (WIT `edit-action.untag`):
    repeatedly drop leading whitespace (Unicode `White_Space`, see
    `WHITE_SPACE`) and an ASCII-case-insensitive `[YOU]`, then drop leading
    whitespace. `untag("  [you][YOU] hi") == "hi"`."""
    rest = content.lstrip(WHITE_SPACE)
    # `[YOU]` is ASCII, so comparing the lower-cased first five characters
    # is the ASCII-case-insensitive match (no other character lowers to
    # one of these five).
    while rest[:5].lower() == _MARKER and rest[:5].isascii():
        rest = rest[5:].lstrip(WHITE_SPACE)
    return rest


def tag(content: str) -> str:
    """The tagged form of a row (WIT `edit-action.tag`): untag, then prepend
    `[YOU] `, so a row carries exactly one tag however often it is tagged."""
    return YOU_TAG + untag(content)


def role_of(role: Optional[str]) -> str:
    """Hermes's free-text `messages.role` as the WIT `role` enum: anything but
    the four roles Hermes's loader sends to the model is `other`."""
    return role if role in ("user", "assistant", "tool", "system") else "other"


def prefix(content: str, chars: int) -> str:
    """The first `chars` characters (Unicode scalar values) of `content`."""
    return content[:chars]


def check_edits(edits: Iterable[tuple], length: int) -> Optional[str]:
    """Check `(index, action)` edits against `length` rows: every index in
    range and no index twice. `None` when fine, else one sentence (the same
    as the Rust host's) for the failure message."""
    seen = [False] * length
    for index, _action in edits:
        if not 0 <= index < length:
            return f"edit index {index} is out of range: the history has {length} rows"
        if seen[index]:
            return f"row {index} is edited twice"
        seen[index] = True
    return None


def apply_edits(contents: List[str], edits: Sequence[tuple]) -> Optional[str]:
    """Apply `(index, action)` edits (`action` `"tag"` or `"untag"`) to
    `contents` in place, after `check_edits`; nothing changes when the check
    fails, and its sentence is returned. Rows without an edit stay as stored."""
    why = check_edits(edits, len(contents))
    if why is not None:
        return why
    for index, action in edits:
        contents[index] = tag(contents[index]) if action == "tag" else untag(contents[index])
    return None
