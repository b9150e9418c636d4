"""Which learners' code for a problem is alike, beyond what the problem forces (``grade-batch
--similarity``): evidence for an instructor to look at, never a verdict.

Each learner's code for a problem (the function and the helpers and imports it uses, as the grader
reads it: :meth:`autograder.engine.extract.Submission.module_source`) is read, never run, and
normalised: comments and docstrings go (the syntax tree has none), the names the code binds itself
(arguments, variables, helpers) become their order of first appearance, constants their type, and
within a block, statements that do not depend on each other are put in one order. Library names
(``jnp.take``, ``ocp.StandardCheckpointer``) stay: they are how the code says what it does. Two
learners' codes are then compared by their fingerprints (hashed runs of :data:`K` tokens), two
ways: the share of all their fingerprints they have in common (Jaccard), and the share of the
smaller code's fingerprints found in the other (containment), which dead code, extra helpers or
a copy padded out do not dilute. A pair is listed when either reaches its threshold (containment's
halfway from the Jaccard threshold to 1: it is higher for code written independently), and both
are shown. How often each flags code written independently is measured on the course's curated
right answers, where present, and printed in the report. What the released stub holds is taken out first
(the signature every learner starts from); a learner whose code is close to the reference solution
is never paired for it (the reference is not a learner), but counted, since it may have leaked;
code too short to say anything (:data:`MIN_TOKENS`) is not compared, as short answers have few
ways to be written.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import html
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

K = 6  # tokens per fingerprint
MIN_TOKENS = 40  # normalised tokens below which a problem's code is not compared
THRESHOLD = 0.8  # share of fingerprints in common (Jaccard) from which a pair is listed
MAX_CHARS = 50_000  # of one learner's code for one problem, compared (the references' longest: a few thousand)
_KEPT = set(dir(builtins))


class _Normaliser(ast.NodeTransformer):
    """Names bound in the code -> v0, v1, ... (by first appearance); constants -> their type;
    docstrings dropped. Imported names and attributes stay."""

    def __init__(self, imported: set[str]):
        self.imported = imported
        self.names: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        if name in self.imported or name in _KEPT:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id=self._rename(node.id), ctx=node.ctx), node)

    def visit_arg(self, node):
        node.arg = self._rename(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node):
        node.name = self._rename(node.name)
        node.returns = None
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(value=type(node.value).__name__), node)

    def visit_Expr(self, node):  # a bare string (a comment written as one) says nothing
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        self.generic_visit(node)
        return node


def _uses(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """(names read, names written) by one statement."""
    read, written = set(), set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name):
            (written if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            written.add(node.name)
        elif isinstance(node, ast.alias):
            written.add((node.asname or node.name).split(".")[0])
    return read, written


def _independent(a: ast.stmt, b: ast.stmt) -> bool:
    if not all(isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom)) for s in (a, b)):
        return False  # (a call may do anything: its place is kept)
    ra, wa = _uses(a)
    rb, wb = _uses(b)
    return not (wa & (rb | wb) or wb & ra)


class _Shape(ast.NodeTransformer):
    """A statement's shape: its own names all alike, constants their type (to order statements the
    same way whatever a learner named things)."""

    def __init__(self, imported: set[str]):
        self.imported = imported

    def visit_Name(self, node):
        return ast.Name(id=node.id if node.id in self.imported or node.id in _KEPT else "_", ctx=node.ctx)

    def visit_arg(self, node):
        return ast.arg(arg="_")

    def visit_Constant(self, node):
        return ast.Constant(value=type(node.value).__name__)


_ORDERED = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom)  # (any other keeps its place)


def _order(body: list, imported: set[str]) -> list:
    """Independent statements in one order: of all the orders that keep each statement after those it
    depends on (a name it reads written before it, a name it writes read or written before it, and
    anything but an assignment or an import a fence: a call may do anything), the one that takes the
    smallest shape first, so that two codes differing only in the order of independent statements
    (and in names) come out alike. Linear in the statements (a heap aside): each statement's names are
    read once, each dependency on the last writer, the readers since it, and the last fence."""
    import copy
    import heapq

    body = list(body)
    shape = [ast.dump(_Shape(imported).visit(copy.deepcopy(s))) for s in body]
    after: list[list[int]] = [[] for _ in body]  # after[i]: the statements that wait for statement i
    waiting = [0] * len(body)
    writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    fence, since_fence = None, []

    def edge(i: int, j: int) -> None:
        after[i].append(j)
        waiting[j] += 1

    for j, stmt in enumerate(body):
        before = set() if fence is None else {fence}
        if not isinstance(stmt, _ORDERED):
            before.update(since_fence)
            since_fence, fence = [], j
        else:
            read, written = _uses(stmt)
            before.update(writer[n] for n in read | written if n in writer)
            before.update(i for n in written for i in readers.get(n, ()))
            for n in read:
                readers.setdefault(n, []).append(j)
            for n in written:
                writer[n], readers[n] = j, []
            since_fence.append(j)
        for i in before:
            edge(i, j)
    ready = [(shape[j], j) for j in range(len(body)) if not waiting[j]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(body[i])
        for j in after[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, (shape[j], j))
    return out


def normalise(source: str) -> list[str]:
    """The tokens of ``source`` normalised (see the module's docstring); [] if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in ast.walk(tree):  # (ordered first, by shape: then names are numbered in that order)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                setattr(node, name, _order(block, imported))
    tree = _Normaliser(imported).visit(tree)
    text = ast.dump(tree, annotate_fields=False)
    for ch in "(),[]=":
        text = text.replace(ch, f" {ch} ")
    return text.split()


_BOUND = re.compile(r"'v\d+'")


def _local(window: list[str]) -> str:
    """A window of tokens with the names the code binds numbered afresh within it: code that binds
    names of its own earlier (dead code put first) shifts the global numbers, not these."""
    seen: dict[str, str] = {}
    return " ".join(seen.setdefault(t, f"'n{len(seen)}'") if _BOUND.fullmatch(t) else t for t in window)


def fingerprints(tokens: list[str]) -> set[str]:
    return {hashlib.blake2b(_local(tokens[i:i + K]).encode(), digest_size=8).hexdigest()
            for i in range(max(0, len(tokens) - K + 1))}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def containment(a: set, b: set) -> float:
    """The share of the smaller set found in the other: a copy padded with code of its own keeps it."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def containment_threshold(threshold: float) -> float:
    """Containment's threshold for a Jaccard ``threshold``: halfway to 1 (0.8 -> 0.9)."""
    return threshold + (1 - threshold) / 2


def alike(a: set, b: set, threshold: float) -> tuple[bool, float, float]:
    """(listed, Jaccard, containment) of two fingerprint sets."""
    j, c = jaccard(a, b), containment(a, b)
    return j >= threshold or c >= containment_threshold(threshold), j, c


@dataclass
class Pair:
    problem: str
    a: str
    b: str
    similarity: float  # Jaccard
    containment: float = 0.0


@dataclass
class Found:
    pairs: list  # [Pair], most alike first
    near_reference: dict  # problem id -> [learner, ...]
    compared: dict  # problem id -> learners compared
    too_short: dict  # problem id -> learners whose code was too short to compare
    independent: dict | None = None  # on the curated right answers: {"pairs", "jaccard", "containment", "either"}
    capped: dict = field(default_factory=dict)  # problem id -> learners whose code was compared in its first MAX_CHARS


def compare(codes: dict[str, dict[str, str]], stubs: dict[str, str], references: dict[str, str],
            threshold: float = THRESHOLD) -> Found:
    """``codes[problem][learner]``: each learner's code for each problem they attempted;
    ``stubs``/``references``: the released stub's and the reference's code per problem."""
    found = Found([], {}, {}, {})
    for pid, by_learner in codes.items():
        given = fingerprints(normalise(stubs.get(pid, "")))
        reference = fingerprints(normalise(references.get(pid, ""))) - given
        prints, short, near = {}, [], []
        for learner, source in sorted(by_learner.items()):
            tokens = normalise(source)
            mine = fingerprints(tokens) - given
            if len(tokens) < MIN_TOKENS or not mine:
                short.append(learner)
            elif reference and alike(mine, reference, threshold)[0]:
                near.append(learner)
            else:
                prints[learner] = mine
        names = sorted(prints)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                listed, j, c = alike(prints[a], prints[b], threshold)
                if listed:
                    found.pairs.append(Pair(pid, a, b, round(j, 3), round(c, 3)))
        found.compared[pid] = len(names)
        if near:
            found.near_reference[pid] = near
        if short:
            found.too_short[pid] = short
    found.pairs.sort(key=lambda p: (-max(p.similarity, p.containment), p.problem, p.a, p.b))
    return found


def collect(learners, selected) -> dict[str, dict[str, str]]:
    """Each learner's code for each selected problem they wrote (read, never run); the learners are
    grade-batch's (``id``, ``key``, ``path``)."""
    from autograder.engine.extract import is_stub, load_submissions

    codes: dict[str, dict[str, str]] = {p.id: {} for p in selected}
    for learner in learners:
        try:
            sub = load_submissions([learner.path])
        except Exception:  # noqa: BLE001 - an unreadable submission is compared with nobody
            continue
        for p in selected:
            block = sub.function(p.function)
            if block is not None and not is_stub(block.node):
                codes[p.id][learner.key] = sub.module_source(p.function)
    return codes


def capped(codes: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """``codes`` with each one longer than :data:`MAX_CHARS` cut to its first lines within it (whole
    lines: a cut statement would not parse), and which were cut: one learner's giant file costs the
    class's report a bounded time (the report says whose were cut)."""
    out, cut = {}, {}
    for pid, by_learner in codes.items():
        out[pid] = {}
        for key, code in by_learner.items():
            if len(code) > MAX_CHARS:
                code = code[:MAX_CHARS].rpartition("\n")[0]
                cut.setdefault(pid, []).append(key)
            out[pid][key] = code
    return out, cut


def course_code(folder: Path, selected) -> dict[str, str]:
    """The code of each selected problem's function in ``folder`` (the released problems, or the
    references)."""
    from autograder.engine.extract import load_submissions

    sub = load_submissions([folder])
    return {p.id: sub.module_source(p.function) for p in selected if sub.function(p.function) is not None}


# Every pair of the course's curated right answers of a problem (``tests/right_answers``: written apart
# from one another and from the references), measured as a class's code is: [problem, Jaccard,
# containment]. Written by ``python -m tests.right_answers --calibrate``; a test holds it to the answers.
CALIBRATION = Path(__file__).with_name("similarity_calibration.json")


def calibration_pairs(right: dict, headers: dict, stubs: dict[str, str]) -> list[list]:
    """[problem, Jaccard, containment] of each pair of ``right``'s answers of a problem (each the
    problem's ``headers`` then its source), the released ``stubs``' code taken out as for a class."""
    import itertools
    import tempfile

    from autograder import registry
    from autograder.engine.extract import load_submissions

    out = []
    with tempfile.TemporaryDirectory(prefix="ckpt-similarity-") as folder:
        for pid, answers in sorted(right.items()):
            given = fingerprints(normalise(stubs.get(pid, "")))
            prints = []
            for n, (_, source, *_) in enumerate(answers):
                path = Path(folder) / f"{pid}-{n}.py"
                path.write_text(headers[pid] + source)
                tokens = normalise(load_submissions([path]).module_source(registry.get(pid).function))
                if len(tokens) >= MIN_TOKENS:
                    prints.append(fingerprints(tokens) - given)
            out += [[pid, round(jaccard(a, b), 6), round(containment(a, b), 6)]
                    for a, b in itertools.combinations(prints, 2)]
    return out


def independent_rates(threshold: float, pairs: list | None = None) -> dict | None:
    """How often each measure lists a pair of answers written independently, at ``threshold``: over
    ``pairs`` (the course's calibration by default). None where there is no calibration."""
    if pairs is None:
        try:
            pairs = json.loads(CALIBRATION.read_text())["pairs"]
        except (OSError, ValueError, KeyError):
            return None
    jaccards = [j >= threshold for _, j, _ in pairs]
    containments = [c >= containment_threshold(threshold) for _, _, c in pairs]
    return {"pairs": len(pairs), "jaccard": sum(jaccards), "containment": sum(containments),
            "either": sum(a or b for a, b in zip(jaccards, containments))}


def write(found: Found, codes: dict, results: Path, threshold: float) -> None:
    """``similarity.json`` and ``similarity.html`` (each pair's two codes side by side) in ``results``."""
    from autograder.outputs import atomic_write

    atomic_write(results / "similarity.json", json.dumps({
        "threshold": threshold, "containment_threshold": containment_threshold(threshold),
        "fingerprint_tokens": K, "min_tokens": MIN_TOKENS,
        "pairs": [asdict(p) for p in found.pairs], "near_reference": found.near_reference,
        "compared": found.compared, "too_short": found.too_short, "max_chars": MAX_CHARS, "capped": found.capped,
        "independent_answers_listed": found.independent}, indent=1))
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Similar code</title>",
             "<style>body{font-family:sans-serif;margin:2em}pre{background:#f6f8fa;padding:.6em;overflow:auto;"
             "font-size:12px;margin:0}td{vertical-align:top;width:50%}table{width:100%;border-collapse:collapse}"
             "h2{margin-top:2em}</style>",
             "<h1>Similar code: evidence to look at, not a verdict</h1>",
             f"<p>{len(found.pairs)} pair{'s' * (len(found.pairs) != 1)} of learners whose code for a problem shares at "
             f"least {threshold:.0%} of all its fingerprints (Jaccard), or of which one holds at least "
             f"{containment_threshold(threshold):.0%} of the other's (containment: code added to a copy does not hide it), "
             "once names, constants, comments and the order of independent statements are set aside (the released "
             "stub's code taken out, code close to the reference solution not paired). Alike code has innocent "
             "causes: a short problem, a hint followed closely, a lesson's cell reused, a study group. Read both "
             "before drawing anything from it.</p>"]
    rates = found.independent
    if rates and rates["pairs"]:
        share = lambda k: f"{rates[k]} ({rates[k] / rates['pairs']:.1%})"  # noqa: E731
        parts.append(f"<p>How often this lists code written independently: of {rates['pairs']} pairs of the course's "
                     f"curated right answers (each written apart), Jaccard listed {share('jaccard')}, containment "
                     f"{share('containment')}, either {share('either')}.</p>")
    for pid, learners in sorted(found.capped.items()):
        parts.append(f"<p>Problem {e(pid)}: the code of {e(', '.join(learners))} is longer than {MAX_CHARS:,} characters: "
                     "compared in its first lines within them only.</p>")
    for pid, learners in sorted(found.near_reference.items()):
        parts.append(f"<p>Problem {e(pid)}: {len(learners)} learner(s) wrote code close to the reference "
                     f"solution: {e(', '.join(learners))}.</p>")
    for p in found.pairs:
        parts.append(f"<h2>Problem {e(p.problem)}: {e(p.a)} and {e(p.b)} ({p.similarity:.0%} alike; containment "
                     f"{p.containment:.0%})</h2>")
        parts.append(f"<table><tr><th>{e(p.a)}</th><th>{e(p.b)}</th></tr><tr><td><pre>{e(codes[p.problem][p.a])}"
                     f"</pre></td><td><pre>{e(codes[p.problem][p.b])}</pre></td></tr></table>")
    atomic_write(results / "similarity.html", "\n".join(parts) + "\n")


def report(learners, selected, results: Path, root: Path, threshold: float = THRESHOLD) -> Found:
    """Compare the class's code problem by problem; write the report; return what was found."""
    codes, cut = capped(collect(learners, selected))
    found = compare(codes, course_code(root / "problems", selected), course_code(root / "solutions", selected), threshold)
    found.capped = cut
    found.independent = independent_rates(threshold)
    write(found, codes, results, threshold)
    return found
