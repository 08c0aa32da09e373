"""Names from an untrusted inbox: safe to create in our folders, and printable in reports.

Names may hold path separators of other systems, control characters, leading dots or `..`.
`safe_name` keeps only `[A-Za-z0-9._-]`, no leading dot, at most 120 characters, never a path.
"""

from __future__ import annotations

import re
import unicodedata

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_LIMIT = 120
#: a campaign name (`ingestion.rules.campaign_of`; also the flow's `campaign` setting)
CAMPAIGN_RULE = "[a-z0-9-]{1,64}"


def safe_name(name: str, *, limit: int = _NAME_LIMIT) -> str:
    """A file name that is safe to create in our folders: `[A-Za-z0-9._-]`, no leading dot.

    Path separators, control characters and anything else are replaced by `_`; the extension
    is kept when the name must be shortened. Never empty, never `.`/`..`, never hidden.
    """
    text = unicodedata.normalize("NFKC", name).replace("/", "_").replace("\\", "_")
    text = _UNSAFE.sub("_", text).lstrip(".")
    text = re.sub(r"\.{2,}", ".", text)
    if not text.strip("._-"):
        text = "file" + text
    if len(text) > limit:
        stem, dot, suffix = text.rpartition(".")
        if dot and 0 < len(suffix) <= 10:
            text = stem[: limit - len(suffix) - 1] + "." + suffix
        else:
            text = text[:limit]
    return text


def display_name(name: str) -> str:
    """A name for reports and logs: printable, quoted with repr when it contains odd characters."""
    return name if name.isprintable() and name.strip() == name else repr(name)
