"""An argument kind is declared once: its words and its file handling with its class
(:mod:`autograder.wall.kinds`), never in a table or an ``isinstance`` branch of
:mod:`autograder.wall.words` or :mod:`autograder.wall.files`, which dispatch to the kinds generically.
Each rule is checked by a function that a planted breach makes fail (its control beside it). Also:
Orbax's save is written once for every checkpoint kind, and no function of the wall runs over 80
lines."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from autograder.wall import files, kinds, words
from autograder.wall.kinds import FILE_KINDS, KINDS, ArgumentKind, FileKind

WALL = Path(kinds.__file__).resolve().parents[1]
GENERIC = (WALL / "words.py", WALL / "files.py")  # the generic machinery: no kind named there
FILE_HANDLING = ("realize", "save", "placed", "make_together")  # what a file kind may declare of its files
MAX_FUNCTION_LINES = 80


# --- the checkers -----------------------------------------------------------------------------------

def missing_own(kinds_: tuple, file_kinds: tuple) -> list[str]:
    """Each kind that does not declare, in its own class body, its words (every kind) or its file
    handling (a file kind: ``realize`` for one of ``file_kinds``, at least one of
    :data:`FILE_HANDLING` for a subclass of one)."""
    out = []
    for kind in kinds_:
        own = vars(kind)
        if "words" not in own:
            out.append(f"{kind.__name__}: no words of its own")
        if kind in file_kinds and "realize" not in own:
            out.append(f"{kind.__name__}: no realize of its own")
        elif issubclass(kind, FileKind) and not any(name in own for name in FILE_HANDLING):
            out.append(f"{kind.__name__}: no file handling of its own")
    return out


def _named(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def kind_checks(source: str, names: set[str]) -> list[str]:
    """Each ``isinstance``/``issubclass`` call in ``source`` whose class (or one of a tuple's) is a
    kind of ``names``: a per-kind branch."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _named(node.func) in ("isinstance", "issubclass") and len(node.args) == 2:
            target = node.args[1]
            classes = target.elts if isinstance(target, ast.Tuple) else [target]
            out += [(node.lineno, f"{_named(node.func)}(..., {_named(c)})") for c in classes if _named(c) in names]
    return [f"line {line}: {said}" for line, said in sorted(out)]


def kinds_named(source: str, names: set[str]) -> list[str]:
    """Each name of a kind of ``names`` in ``source``'s code (an import, a table's key, a call), its
    text aside: a per-kind row."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            out += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in names]
        elif isinstance(node, (ast.Name, ast.Attribute)) and _named(node) in names:
            out.append((node.lineno, _named(node)))
    return [f"line {line}: {said}" for line, said in sorted(out)]


def long_functions(source: str, most: int = MAX_FUNCTION_LINES) -> list[str]:
    return [f"{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > most]


KIND_NAMES = {kind.__name__ for kind in KINDS}


# --- the rules --------------------------------------------------------------------------------------

def test_every_kind_declares_its_words_and_its_file_handling_in_its_class():
    assert missing_own(KINDS, FILE_KINDS) == []

    # control: a kind with neither, a file kind without its realize, a subclass that declares nothing of its files
    @dataclasses.dataclass(frozen=True)
    class Bare(FileKind):
        pass

    @dataclasses.dataclass(frozen=True)
    class Worded(FileKind):
        def words(self) -> str:
            return "<a file>"

    @dataclasses.dataclass(frozen=True)
    class Sub(kinds.CheckpointArg):
        def words(self) -> str:
            return "<a sub>"

    assert missing_own((Bare, Worded, Sub), (Bare, Worded)) == [
        "Bare: no words of its own", "Bare: no realize of its own", "Worded: no realize of its own",
        "Sub: no file handling of its own"]
    with pytest.raises(TypeError, match="Bare has no words"):
        words.in_words((Bare(),))


def test_every_kind_is_in_the_registry_by_its_public_name():
    def below(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    declared = {k for k in below(ArgumentKind) if k.__module__.startswith(kinds.__name__) and k is not FileKind}
    assert declared == set(KINDS) and len(KINDS) == len(set(KINDS)) == 13
    assert all(getattr(kinds, k.__name__) is k and k.__module__ == kinds.__name__ for k in KINDS)
    assert all(issubclass(k, FileKind) for k in FILE_KINDS) and set(FILE_KINDS) <= set(KINDS)
    # every file kind is one of FILE_KINDS or a subclass of one, so that has_files sees what realize makes
    assert [k for k in KINDS if issubclass(k, FileKind) and not issubclass(k, FILE_KINDS)] == []
    assert {k.__name__ for k in KINDS if not issubclass(k, FileKind)} == {"MeshArg", "SpecArg", "AbstractArg"}
    assert set(words._WORDS) == set(KINDS)  # each by its own words


def test_words_and_files_name_no_kind():
    for path in GENERIC:
        source = path.read_text()
        assert kind_checks(source, KIND_NAMES) == [], path.name
        assert kinds_named(source, KIND_NAMES) == [], path.name
    # control: a per-kind branch, a per-kind row and a kind imported are each found
    planted = ("from autograder.wall.kinds import RunFolder, FILE_KINDS\n"
               "def save(leaf):\n"
               "    if isinstance(leaf, RunFolder):\n"
               "        return 1\n"
               "    if isinstance(leaf, (int, kinds.SafetensorsArg)) or isinstance(leaf, FILE_KINDS):\n"
               "        return 2\n"
               "_WORDS = {kinds.MeshArg: str}\n")
    assert kind_checks(planted, KIND_NAMES) == ["line 3: isinstance(..., RunFolder)",
                                                "line 5: isinstance(..., SafetensorsArg)"]
    assert kinds_named(planted, KIND_NAMES) == ["line 1: imports RunFolder", "line 3: RunFolder",
                                                "line 5: SafetensorsArg", "line 7: MeshArg"]


def test_orbax_s_save_is_written_once_for_every_checkpoint():
    savers = [k.__name__ for k in KINDS if issubclass(k, kinds.CheckpointArg) and "save" in vars(k)]
    assert savers == ["CheckpointArg"]
    assert [k.__name__ for k in KINDS if issubclass(k, kinds.CheckpointArg) and "placed" not in vars(k)] == []


def test_no_function_of_the_wall_runs_over_80_lines():
    long = [f"{path.relative_to(WALL)}: {f}" for path in sorted(WALL.rglob("*.py")) for f in long_functions(path.read_text())]
    assert long == []
    assert long_functions("def f():\n" + "    x = 1\n" * 80) == ["f: 81 lines"]  # control
    assert long_functions("def f():\n" + "    x = 1\n" * 79) == []


# --- the dispatch: each kind's own, through the generic modules ----------------------------------------

def test_the_generic_modules_call_each_kind_s_own(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Note(FileKind):
        text: str

        def realize(self, workdir, made=None):
            (Path(workdir) / "ckpt-note").write_text(self.text)
            return str(Path(workdir) / "ckpt-note")

        def words(self) -> str:
            return f"<a note: {self.text}>"

    (tmp_path / "w").mkdir()
    made = files.realize({"a": (Note("hi"), 3)}, str(tmp_path / "w"))
    assert made == {"a": (str(tmp_path / "w" / "ckpt-note"), 3)} and Path(made["a"][0]).read_text() == "hi"
    assert words.in_words([Note("hi"), kinds.MeshArg((("x", 2),))]) == "[<a note: hi>, Mesh {'x': 2}]"
    # a realized run folder keeps its planted seed through a copy; the tiers' restore stays behind
    source, target = tmp_path / "src", tmp_path / "dst"
    source.mkdir()
    run, out = files.realize((kinds.RunFolder(plant=7), kinds.OutputFolder()), str(source))
    assert isinstance(run, kinds.RunPath) and run.plant == 7 and (source / "scratch").is_dir()
    tiered = kinds.TieredPath(str(source / "ckpt-t"), (4, 1))
    moved = files.mirror((run, out, tiered), str(source), str(target))
    assert [type(m) for m in moved] == [kinds.RunPath, str, str] and moved[0].plant == 7
    assert moved[0] == str(target) + run[len(str(source)):]
