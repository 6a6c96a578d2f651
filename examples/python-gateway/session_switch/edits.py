"""The host's half of "history crosses the boundary as summaries"
(DESIGN §7, §8): build the summaries the policy sees, check the edits it
answers with, and apply them to the full rows the host kept. The twin of
the Rust host's host/runtime/src/apply.rs; both must give the same text.
"""

from __future__ import annotations

import re
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

#: Unicode's `Default_Ignorable_Code_Point` (Unicode 16,
#: DerivedCoreProperties.txt): invisible characters (U+200B ZERO WIDTH
#: SPACE, U+2060, U+FEFF, soft hyphen, bidi controls, variation selectors,
#: Hangul fillers, tags, ...) that a room line could put before a `[YOU]`
#: so that the model still reads it as the tag (SECURITY.md, gap G4).
#: The same ranges as the policy's `tagging::is_blank` and the Rust host's
#: `apply::is_blank`.
DEFAULT_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f-\u1160\u17b4-\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff"
    "\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)

#: Leading blanks: `White_Space` or default-ignorable (a regex class, so the
#: common path is one C-level match and one slice).
_BLANKS = re.compile("[" + re.escape(WHITE_SPACE) + DEFAULT_IGNORABLE + "]*")

#: The accepted forms of each character of the marker: ASCII in either case
#: and the full-width forms (U+FF3B, U+FF39/U+FF59, U+FF2F/U+FF4F,
#: U+FF35/U+FF55, U+FF3D).
_MARKER_FORMS = ("[\uff3b", "Yy\uff39\uff59", "Oo\uff2f\uff4f", "Uu\uff35\uff55", "]\uff3d")


def _skip_blanks(text: str) -> str:
    return text[_BLANKS.match(text).end():]


def _is_marker(head: str) -> bool:
    return len(head) == 5 and all(c in forms for c, forms in zip(head, _MARKER_FORMS))


def untag(content: str) -> str:
    """Remove every leading `[YOU]` marker (WIT `edit-action.untag`):
    repeatedly drop leading blanks (Unicode `White_Space`, see `WHITE_SPACE`,
    and `DEFAULT_IGNORABLE` format characters) and a marker (`[YOU]` in any
    ASCII case, each character also in its full-width form), then drop
    leading blanks. `untag("  [you]［YOU］ hi") == "hi"`."""
    rest = _skip_blanks(content)
    while _is_marker(rest[:5]):
        rest = _skip_blanks(rest[5:])
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
