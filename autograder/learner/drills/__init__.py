"""Quick-fire drills: short numeric questions with fresh numbers every time, from the accounting
the course teaches, with immediate feedback and the worked answer.

Terminal: ``python -m autograder drill [--count N] [--unit N...] [--kind KIND...]`` (``make drill
UNIT=N``). Notebook::

    from autograder.learner.drills import drill
    q = drill()          # a kind of the units you studied; drill(unit=4), or drill("reshard_ram") for one kind
    q.answer("28 GB")    # right or not, and the worked answer

Questions come from the units you have studied (:func:`autograder.learner.progress.studied_units`: on a
fresh start, Unit 1) unless ``--unit`` or ``--kind`` says otherwise, and a set varies its kinds: no
kind comes twice while another has not come. A wrong answer that is a known mistake (a part left
out, a step too many) is told which. Answers may carry units ("1.5 GiB", "12,288", "4x"); byte
units are converted.

This package is the engine: :class:`Question`, grading an answer with its units, :func:`drill`,
:func:`run` and recording progress. The kinds of drill are the units', one file per unit as the
course's other parts are: ``autograder/learner/drills/unitN.py`` holds unit N's question generators
(``DRILLS``), and :data:`KINDS` gathers them in unit order.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
import time
from dataclasses import dataclass, field

import numpy as np

DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}
_ASK = {"bytes": "in bytes", "GB": "in GB", "params": "a number of parameters", "chunks": "a number of chunks",
        "runs": "a number of runs", "x": "how many times, e.g. 4x", "byte offset": "a byte offset",
        "s": "in seconds", "step": "a step number", "steps": "a number of steps",
        "position": "a position in the order (0 is the first)", "hours": "in hours", "minutes": "in minutes"}
# Words a reply may carry for a unit of time (``3.1 h``, ``2.5 min``).
_TIME_WORDS = {"hours": ("h", "hr", "hrs", "hour"), "minutes": ("min", "mins", "minute")}
_BYTE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass
class Question:
    kind: str
    text: str
    solution: float  # the right answer, in `unit`
    unit: str  # "bytes", "GB", "params", "chunks", "runs", "x" (times the bytes needed), "byte offset"
    worked: str
    rel_tol: float = 0.0  # 0: exact (answers are whole numbers); else a relative tolerance
    unit_of_study: int = 0
    facts: dict = field(default_factory=dict)  # the generated numbers, for tests and worked answers
    asked: float = field(default_factory=time.monotonic)
    # Known mistakes: (the answer it gives, what it left out or got wrong). A wrong reply equal to one
    # of them (and to no other, nor to the solution) is told which.
    mistakes: tuple = ()

    @property
    def ask(self) -> str:
        return f"answer: {_ASK.get(self.unit, self.unit)}"

    def __repr__(self) -> str:
        return f"{self.text}\n({self.ask})"

    def _repr_markdown_(self) -> str:
        return f"**Drill ({self.kind})**: {self.text}\n\n*{self.ask.capitalize()}: call `.answer(...)` on this question.*"

    def shown(self, value: float) -> str:
        if self.unit == "step":
            return f"step {fmt_number(value)}"
        return f"{fmt_number(value)}x" if self.unit == "x" else f"{fmt_number(value)} {self.unit}"

    def grade(self, reply) -> tuple[bool | None, str]:
        """(right?, feedback with the worked answer); None when the reply is not a number."""
        try:
            value = parse_answer(reply, self.unit)
        except ValueError as e:
            return None, f"{e}. Answer with a number (units like 'GiB' or 'x' are fine)."
        right = self._same(value, self.solution)
        head = "Right." if right else f"Not quite: you said {self.shown(value)}, the answer is {self.shown(self.solution)}."
        if not right:
            which = self.diagnose(value)
            if which:
                head += f" {which}"
        return right, f"{head}\nWorked answer: {self.worked}"

    def _same(self, a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol or 1e-9, abs_tol=1e-9)

    def diagnose(self, value: float) -> str | None:
        """What a wrong ``value`` left out or got wrong, where it is one known mistake (None where it
        is none of them, or where two mistakes, or a mistake and the answer, give the same number)."""
        said = {why for wrong, why in self.mistakes if self._same(value, float(wrong))
                and not self._same(float(wrong), self.solution)}
        return said.pop() if len(said) == 1 else None

    def answer(self, reply, learner: str | None = None) -> bool | None:
        """Check a reply, print the feedback, and record it in your progress. ``...`` (the
        notebook's placeholder) or None is no answer yet: nothing is checked or recorded."""
        if reply is None or reply is Ellipsis:
            print(f"Replace ... with your answer ({self.ask}) and run the cell again: it is checked, the worked "
                  "answer is shown, and it counts in your progress.")
            return None
        right, feedback = self.grade(reply)
        print(feedback)
        if right is not None:
            from autograder.invoke import default_learner
            from autograder.learner import progress

            progress.record_drill(learner or default_learner(), self.kind, right, time.monotonic() - self.asked)
        return right


def fmt_number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.4g}"


def parse_answer(reply, unit: str) -> float:
    """A number from a reply: ``12,288``, ``1_000``, ``1.5e9``, ``3 GiB``, ``4x``."""
    if isinstance(reply, (int, float, np.integer, np.floating)) and not isinstance(reply, bool):
        return float(reply)
    text = str(reply).strip().lower().replace(",", "").replace("_", "")
    m = re.fullmatch(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*([a-z]*)\.?", text)
    if not m:
        raise ValueError(f"{reply!r} is not a number")
    value, suffix = float(m.group(1)), m.group(2)
    if suffix in _BYTE_UNITS and unit in ("bytes", "GB", "byte offset"):
        value *= _BYTE_UNITS[suffix]
        return value / 10**9 if unit == "GB" else value
    if suffix and suffix not in ("x", "times", "params", "parameters", "chunks", "chunk", "runs", "run", "sec", "seconds",
                                  unit.lower(), *_TIME_WORDS.get(unit, ())):
        raise ValueError(f"{suffix!r} is not a unit for {unit}")
    return value


# --- the kinds of drill: one file per unit --------------------------------------------------------

def drawn_dtype(rng) -> tuple[str, int]:
    name = str(rng.choice(list(DTYPES)[:3]))
    return name, DTYPES[name]


def _gather() -> tuple[dict, dict]:
    """Every kind of drill, unit by unit: ``DRILLS`` of ``autograder/learner/drills/unitN.py``, the units in
    order (the order :func:`drill` and :func:`run` draw from with a seed); and each kind's unit."""
    kinds, units = {}, {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: int(m.name.removeprefix("unit"))):
        module = importlib.import_module(f"{__name__}.{info.name}")
        kinds.update((make.__name__, make) for make in module.DRILLS)
        units.update((make.__name__, int(info.name.removeprefix("unit"))) for make in module.DRILLS)
    return kinds, units


# Gathered here, below what the unit files import from this module (Question, drawn_dtype, fmt_number).
KINDS, UNIT_OF = _gather()


def kinds_of(units) -> list[str]:
    """The kinds of drill of these units, in :data:`KINDS`' order; ValueError naming a unit with none."""
    units = [int(u) for u in units]
    unknown = [u for u in units if u not in UNIT_OF.values()]
    if unknown:
        raise ValueError(f"no unit {', '.join(map(str, unknown))} has drills; units are "
                         f"{', '.join(map(str, sorted(set(UNIT_OF.values()))))}")
    return [k for k in KINDS if UNIT_OF[k] in units]


def studied(learner: str | None = None) -> list[int]:
    """The units ``learner`` has studied, from their progress (a fresh store: Unit 1)."""
    from autograder.invoke import default_learner
    from autograder.learner import progress

    return progress.studied_units(progress.load(learner or default_learner()))


def plan(count: int, kinds: list[str], rng: np.random.Generator) -> list[str]:
    """``count`` kinds from ``kinds``, varied: each round takes every kind once, in a fresh random
    order, so no kind comes twice while another has not come, and none twice in a row (where there
    are two or more)."""
    kinds, out = list(dict.fromkeys(kinds)), []
    while len(out) < count:
        round_ = [kinds[i] for i in rng.permutation(len(kinds))]
        if out and len(round_) > 1 and round_[0] == out[-1]:
            round_.append(round_.pop(0))
        out += round_
    return out[:count]


def _units_said(units: list[int]) -> str:
    return ("Unit " if len(units) == 1 else "Units ") + ", ".join(map(str, units))


def drill(kind: str | None = None, seed: int | None = None, unit: int | None = None) -> Question:
    """A fresh question: of ``kind`` if given (one of :data:`KINDS`), else of ``unit``'s kinds, else
    of the units you have studied (:func:`studied`)."""
    rng = np.random.default_rng(seed)
    if kind is None:
        kind = str(rng.choice(kinds_of([unit] if unit is not None else studied())))
    if kind not in KINDS:
        raise ValueError(f"no drill {kind!r}; choose one of: {', '.join(KINDS)}")
    return KINDS[kind](rng)


def run(count: int, kinds: list[str] | None, learner: str, seed: int | None = None, ask=input, say=print,
        units: list[int] | None = None) -> int:
    """The terminal loop: ``count`` questions of ``kinds``, else of ``units``' kinds, else of the
    units ``learner`` has studied, their kinds varied (:func:`plan`); returns how many were right.
    ValueError for a unit with no drills."""
    rng = np.random.default_rng(seed)
    if kinds:
        where = ""
    elif units:
        units = sorted(set(units))
        kinds, where = kinds_of(units), f" from {_units_said(units)}"
    else:
        from autograder.learner import progress

        rows = progress.summarize(progress.load(learner))
        units = progress.studied_units_of(rows)
        kinds = kinds_of(units)
        where = (f" from {_units_said(units)}, "
                 + ("the units you have studied" if any(r.worked for r in rows) else "where the course starts")
                 + "; make drill UNIT=N (or --unit N) for another")
    right = answered = 0
    say(f"{count} drill question(s){where}. Answer with a number (units like GiB or x are fine); "
        "Enter or ? shows the worked answer, q stops.")
    for i, kind in enumerate(plan(count, kinds, rng), 1):
        q = KINDS[kind](rng)
        say(f"\n[{i}/{count}] {q.text}\n({q.ask})")
        while True:
            try:
                reply = ask("> ").strip()
            except EOFError:
                reply = "q"
            if reply.lower() in ("q", "quit", "exit"):
                say(f"\nStopped: {right}/{answered} right.")
                return right
            if reply in ("", "?"):
                say(f"Worked answer: {q.worked}")
                ok = False
                break
            ok, feedback = q.grade(reply)
            say(feedback)
            if ok is not None:
                break
        answered += 1
        right += bool(ok)
        from autograder.learner import progress

        progress.record_drill(learner, kind, bool(ok), time.monotonic() - q.asked)
    say(f"\nDone: {right}/{answered} right.")
    return right
