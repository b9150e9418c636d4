"""Text a learner controls (file and folder names, which become learner ids), made safe for each
place it goes: file names, CSV cells, Markdown and HTML, terminals. Names are bytes a learner
chose: they may hold markup, control characters, formula prefixes, or bytes that are not UTF-8
(``os.listdir`` gives those back as surrogates)."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata

_FILE_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>&~])")
FILE_KEY_LIMIT = 80  # with a hash: far below any file system's 255 bytes


def raw_bytes(text: str) -> bytes:
    """The bytes a name was made of (surrogates from a non-UTF-8 name back to their bytes)."""
    return text.encode("utf-8", "surrogateescape")


def printable(text: str, limit: int = 200) -> str:
    """``text`` with every control or unprintable character (ESC, CR, OSC, bidi controls,
    surrogates) shown as ``?``, at most ``limit`` characters: safe on a terminal."""
    text = raw_bytes(text).decode("utf-8", "replace")
    out = "".join("?" if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") else c for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def shown_name(name: str, limit: int = 60) -> str:
    """A file name as messages may show it: printable ASCII only (others as ``?``), at most
    ``limit`` characters (messages go to every output: reports, notebooks, terminals)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._- ") else "?" for c in name)
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def file_key(name: str) -> str:
    """A file name for ``name`` (a learner id): letters, digits, ``.``, ``_`` and ``-`` only, not
    hidden, at most :data:`FILE_KEY_LIMIT` characters. Where the name had to change, a hash of the
    original keeps two learners apart."""
    key = _FILE_SAFE.sub("_", name).lstrip(".") or "_"
    if key == name and len(key) <= FILE_KEY_LIMIT:
        return key
    digest = hashlib.sha256(raw_bytes(name)).hexdigest()[:10]
    return f"{key[: FILE_KEY_LIMIT - 11]}-{digest}"


def csv_cell(text: str) -> str:
    """A cell a spreadsheet shows as text, never runs as a formula (OWASP's CSV injection rule)."""
    text = printable(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r", "|", "%") else text


def markdown(text: str) -> str:
    """Literal text inside Markdown (every markup character escaped, HTML included)."""
    return _MARKDOWN.sub(r"\\\1", printable(text))


def html_text(text: str) -> str:
    return html.escape(printable(text))


_CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A grader's message as a block: its lines kept, long lines wrapped (anywhere, for long names).
MESSAGE_STYLE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:0.4em 0"


def message_html(text: str, limit: int = 4000) -> str:
    """A grader's message or hint (Markdown code spans in it) as HTML: everything escaped first,
    then each `code span` shown as code; line breaks kept. Safe for text a learner controls."""
    return _CODE_SPAN.sub(r"<code>\1</code>", html.escape(printable_lines(text, limit), quote=False))


def printable_lines(text: str, limit: int = 4000) -> str:
    """:func:`printable`, keeping line breaks and tabs."""
    return "\n".join(printable(line.replace("\t", "    "), limit) for line in text.splitlines())[:limit]
