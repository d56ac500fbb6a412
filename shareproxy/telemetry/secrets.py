"""Passwords hidden from whatever is shown: an error line, a log record, a start-up line. A URL
reaches the terminal in many shapes (parsed or not, quoted in a driver's message, in a query
string), so its password is found in the text itself rather than by parsing the URL."""

from __future__ import annotations

import re

HIDDEN = "***"

# user:password@ after a scheme, or at the start of a word when there is none (a bootstrap
# server, a URL missing its scheme); and a password given as a query parameter
_USERINFO = re.compile(
    r"(?P<user>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:'\"]*|(?<![\w+.:/-])[^\s/@:'\",]+)"
    r":(?!//)[^\s@'\"]+@"
)
_QUERY = re.compile(r"(?P<key>[?&;](?:password|passwd|pwd|secret|token)=)[^&;\s'\"]+", re.I)


def hide_passwords(text: str) -> str:
    """``text`` with every URL's password, in its userinfo or its query, shown as ``***``."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m['user']}:{HIDDEN}@", text)
    if "=" in text:
        text = _QUERY.sub(lambda m: m["key"] + HIDDEN, text)
    return text
