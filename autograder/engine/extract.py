"""Find problem functions in a submission by parsing its code, never by running it.

A submission is a notebook or a .py file. Cells (or files) are parsed one by one; a unit with a
syntax error is split into top-level blocks so that one broken cell or function costs only the
problems that live in it. For each problem we keep its function and the top-level definitions and
imports it uses (transitively), and nothing else: top-level calls such as plots, checks or
training loops in the notebook are never run by the grader, and an import that fails costs only
the problems that use it.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.source import parse
from autograder.text import shown_name

_MAGIC = re.compile(r"^(\s*)([%!]|\?\w|\w[\w.]*\?\s*$)")
_BINDING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


@dataclass
class Block:
    """One parsed top-level statement, where it came from, and the names it binds."""

    node: ast.stmt
    source: str
    origin: str  # e.g. "cell 4, line 2" or "file.py, line 10"
    binds: set[str] = field(default_factory=set)


@dataclass
class BrokenBlock:
    source: str
    origin: str
    error: str  # "SyntaxError: ... (cell 3, line 2)"
    defines: str | None  # the function name it seems to define, if any


@dataclass
class Submission:
    path: str
    blocks: list[Block] = field(default_factory=list)
    broken: list[BrokenBlock] = field(default_factory=list)
    unreadable: str | None = None  # the whole file could not be read

    def function(self, name: str) -> Block | None:
        """The definition of ``name`` that is graded: the last one, as in a notebook run top to
        bottom, except that an untouched stub never hides an attempt (an answer in a .py file
        beside the problem notebook, whose stub sorts after it; or written above the stub's cell)."""
        found = [b for b in self.blocks if isinstance(b.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.node.name == name]
        attempts = [b for b in found if not is_stub(b.node)]
        return (attempts or found)[-1] if found else None

    def broken_function(self, name: str) -> BrokenBlock | None:
        found = [b for b in self.broken if b.defines == name]
        return found[-1] if found else None

    def closure(self, name: str) -> list[Block]:
        """The function ``name`` and the imports and definitions it uses, transitively, in file order."""
        target = self.function(name)
        assert target is not None
        definers: dict[str, list[Block]] = {}
        for b in self.blocks:
            if b is not target and not _shadows(b, name):
                for n in b.binds:
                    definers.setdefault(n, []).append(b)
        for n, blocks in definers.items():  # a helper's untouched stub never hides its attempt either
            if any(_is_function(b) and not is_stub(b.node) for b in blocks):
                definers[n] = [b for b in blocks if not (_is_function(b) and is_stub(b.node))]
        wanted: set[str] = set()
        keep: set[int] = {id(target)}
        frontier = [target]
        while frontier:
            block = frontier.pop()
            for n in _loaded_names(block.node) - wanted:
                wanted.add(n)
                for d in definers.get(n, []):
                    if id(d) not in keep:
                        keep.add(id(d))
                        frontier.append(d)
        return [b for b in self.blocks if id(b) in keep or _always_kept(b)]

    def module_source(self, name: str) -> str:
        """Source of a module holding :meth:`closure`, each block headed by where it came from.

        ``from __future__`` imports must open a module, so they are hoisted (several files or
        cells may each have one).
        """
        blocks = self.closure(name)
        future = [b for b in blocks if isinstance(b.node, ast.ImportFrom) and b.node.module == "__future__"]
        rest = [b for b in blocks if b not in future]
        head = sorted({b.source for b in future})
        return "\n".join(head) + "\n\n" + "\n\n".join(f"# {b.origin}\n{b.source}" for b in rest) + "\n"


def _is_function(block: Block) -> bool:
    return isinstance(block.node, (ast.FunctionDef, ast.AsyncFunctionDef))


def _always_kept(block: Block) -> bool:
    """Imports whose names cannot be known (``*``) and ``__future__`` imports."""
    node = block.node
    return isinstance(node, ast.ImportFrom) and (node.module == "__future__" or any(a.name == "*" for a in node.names))


def _shadows(block: Block, name: str) -> bool:
    """Another definition of the problem function (an earlier version in another cell)."""
    return name in block.binds


def _loaded_names(node: ast.AST) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def _binds(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in node.names}
    names = set()
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    for t in targets:
        if t is None:
            continue
        for sub in ast.walk(t):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


_STRINGS = re.compile(r"'(?:\\.|[^'\\])*'" + r'|"(?:\\.|[^"\\])*"')  # one-line string literals


def _clean(source: str) -> str:
    """Comment out IPython magics and shell escapes so the cell parses as Python: a line that starts
    with one where a statement may start, never a line that goes on an open bracket or a backslash
    (``!= b`` or ``% args`` on a line of their own, as formatters wrap long expressions)."""
    out, depth, continued = [], 0, False
    for line in source.splitlines():
        if depth == 0 and not continued and _MAGIC.match(line):
            out.append(_MAGIC.sub(r"\1# \2", line))
            continue
        out.append(line)
        code = _STRINGS.sub("", line).split("#", 1)[0]
        depth = max(0, depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"))
        continued = code.rstrip().endswith("\\")
    return "\n".join(out)


def _split_top_level(source: str) -> list[tuple[int, str]]:
    """Split source at lines that start in column 0 (decorators stay with what they decorate)."""
    lines = source.splitlines()
    chunks: list[tuple[int, list[str]]] = []
    pending_decorator = False
    for i, line in enumerate(lines):
        starts = bool(line) and not line[0].isspace() and not line.startswith((")", "]", "}", "#"))
        if starts and not pending_decorator:
            chunks.append((i, [line]))
        elif chunks:
            chunks[-1][1].append(line)
        else:
            chunks.append((i, [line]))
        if starts:
            pending_decorator = line.startswith("@")
    return [(start, "\n".join(body)) for start, body in chunks]


_DEF = re.compile(r"^(?:async\s+)?def\s+(\w+)", re.M)


def _add_unit(sub: Submission, source: str, where: str) -> None:
    pieces = []
    # Python as it is (a .py file, a cell without magics); else with its magics commented out where
    # a statement can start; else every line that starts like one (a bracket inside a multi-line
    # string can mislead the first count).
    blanket = "\n".join(_MAGIC.sub(r"\1# \2", line) for line in source.splitlines())
    for text in (source, _clean(source), blanket):
        try:
            pieces = [(0, text, parse(text))]
            break
        except SyntaxError:
            source = text
    if not pieces:
        for start, chunk in _split_top_level(source):
            try:
                pieces.append((start, chunk, parse(chunk)))
            except SyntaxError as e:
                line = start + (e.lineno or 1)
                m = _DEF.search(chunk)
                sub.broken.append(
                    BrokenBlock(chunk, f"{where}, line {line}", f"SyntaxError: {e.msg} ({where}, line {line})", m.group(1) if m else None)
                )
    for start, chunk, tree in pieces:
        chunk_lines = chunk.splitlines()
        for node in tree.body:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "\n".join(chunk_lines[first - 1 : node.end_lineno])
            binds = _binds(node) if isinstance(node, (*_BINDING, ast.Import, ast.ImportFrom)) else set()
            if binds:
                sub.blocks.append(Block(node, text, f"{where}, line {start + first}", binds))


MAX_FILE_BYTES = 64 * 2**20  # a notebook with its outputs; more is not a submission
SUFFIXES = (".ipynb", ".py")


def read_regular(path: str | Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; never follows a
    link (``O_NOFOLLOW``) nor blocks on a FIFO or device (``O_NONBLOCK``, then ``S_ISREG``).
    Raises :class:`OSError` with a message a learner can act on."""
    name = shown_name(Path(path).name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(f"{name} is a symbolic link, which is never followed: submit the file itself") from None
        raise OSError(f"could not open {name} ({os.strerror(exc.errno or 0)})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{name} is not a regular file: submit a notebook or a .py file")
        if info.st_size > limit:
            raise OSError(f"{name} is {info.st_size / 2**20:.0f} MiB, over the {limit // 2**20} MiB limit: clear "
                          "its outputs and save it again")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(f"{name} grew over the {limit // 2**20} MiB limit while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def submission_files(folder: str | Path) -> tuple[list[Path], list[str]]:
    """The notebooks and .py files below ``folder``, in sorted order, and what was passed over
    (links and special files, which are never followed or opened). The walk never leaves
    ``folder``: links to folders are not entered."""
    found, skipped = [], []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints")
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not name.endswith(SUFFIXES) and name in filenames:
                continue
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                skipped.append(f"{shown_name(name)} is a symbolic link, which is never followed: submit the file itself")
            elif name in filenames and not stat.S_ISREG(mode):
                skipped.append(f"{shown_name(name)} is not a regular file")
            elif name in filenames:
                found.append(path)
    return sorted(found), skipped


def load_submission(path: str | Path) -> Submission:
    """Parse a notebook (.ipynb) or a Python file; never raises for bad content, never follows a
    link or opens a special file (:func:`read_regular`)."""
    path = Path(path)
    sub = Submission(str(path))
    try:
        text = read_regular(path).decode("utf-8")
    except OSError as e:
        sub.unreadable = str(e)
        return sub
    except UnicodeDecodeError:
        sub.unreadable = f"could not read {shown_name(path.name)}: it is not UTF-8 text"
        return sub
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(text)
            cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
        except (ValueError, AttributeError):
            sub.unreadable = f"{shown_name(path.name)} is not a valid notebook; open it in Jupyter and save it again"
            return sub
        for i, cell in enumerate(cells, 1):
            src = cell.get("source", "") if isinstance(cell, dict) else ""
            src = "".join(map(str, src)) if isinstance(src, list) else str(src)
            _add_unit(sub, src, f"{shown_name(path.name)} code cell {i}")
    else:
        _add_unit(sub, text, shown_name(path.name))
    return sub


def load_submissions(paths) -> Submission:
    """Merge several files (or folders of them) into one submission, in sorted order."""
    merged = Submission(", ".join(str(p) for p in paths))
    problems = []
    for p in paths:
        p = Path(p)
        if p.is_dir() and not p.is_symlink():
            files, skipped = submission_files(p)
            problems += skipped
        else:
            files = [p]
        for f in files:
            s = load_submission(f)
            merged.blocks += s.blocks
            merged.broken += s.broken
            if s.unreadable:
                problems.append(s.unreadable)
    merged.unreadable = "; ".join(problems) or None
    return merged


def is_stub(node: ast.FunctionDef) -> bool:
    """True for an untouched stub: only a docstring, pass, ``...`` or ``raise NotImplementedError``."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is Ellipsis:
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                continue
        return False
    return True


def positional_params(node: ast.FunctionDef) -> tuple[list[str], bool]:
    """Names of positional parameters, and whether it accepts ``*args``."""
    a = node.args
    return [p.arg for p in a.posonlyargs + a.args], a.vararg is not None
