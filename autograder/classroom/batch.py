"""Grade a whole class: ``python -m autograder grade-batch SUBMISSIONS_DIR --out RESULTS_DIR [-j N]``.

``SUBMISSIONS_DIR`` holds one entry per learner: a folder (of notebooks or .py files) or a single
notebook or .py file; the learner id is the folder's or file's name (without extension). Each
learner's result is written, atomically, to ``RESULTS_DIR/learners/<id>.json`` as soon as it is
graded, so a crash or Ctrl-C loses nothing and a re-run skips who is done (``--force`` regrades).
At the end, from every learner's result:

- ``gradebook.csv``: learner, points per problem, total;
- ``feedback/<id>.md`` and ``.html``: statuses, messages and a first hint per unsolved problem;
- ``summary.md`` and ``summary.png``: pass rate and most common failure per problem.

Messages are the grader's own, which never show hidden inputs; the failure categories in the
summary (the judge's own, see :func:`autograder.engine.judge.judge`) are for the instructor only.
"""

from __future__ import annotations

import csv
import html
import io
import json
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from autograder import registry, text
from autograder.outputs import COLOURS, atomic_write, label

SUBMISSION_SUFFIXES = (".ipynb", ".py")


@dataclass
class Learner:
    id: str  # the submission's name, as the learner chose it: it chooses their hidden cases
    path: Path

    @property
    def key(self) -> str:
        """The name of this learner's result and feedback files (:func:`autograder.text.file_key`)."""
        return text.file_key(self.id)


def find_learners(submissions: Path) -> list[Learner]:
    learners = []
    for entry in sorted(submissions.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir() and not entry.is_symlink():  # a link is graded as a file: refused, with why
            learners.append(Learner(entry.name, entry))
        elif entry.suffix in SUBMISSION_SUFFIXES:
            learners.append(Learner(entry.stem, entry))
    ids = [learner.key for learner in learners]
    dupes = sorted({text.printable(lr.id) for lr in learners if ids.count(lr.key) > 1})
    if dupes:
        raise ValueError(f"several submissions for the same learner: {', '.join(dupes)} (a folder and a file?)")
    return learners


def _grade_one(learner: Learner, results: Path, timeout: float | None, isolation, jobs: int = 1,
               slots: threading.Semaphore | None = None, selected: tuple = registry.PROBLEMS, shared=None) -> dict:
    from autograder.engine.grade import grade

    start = time.monotonic()
    try:
        graded = grade([learner.path], learner.id, problems=[p.id for p in selected], timeout=timeout, jobs=jobs,
                       isolation=isolation, slots=slots, shared=shared)
        report = graded.to_json()
        report["learner"] = text.printable(learner.id)
        for p, result in zip(report["problems"], graded.problems):
            p["category"] = result.category  # for the class summary only
            # For the instructor (and bench/bench_nbgrader.py): where grading time went.
            p["seconds"], p["code_seconds"] = round(result.seconds, 3), round(result.code_seconds, 3)
    except Exception as exc:  # noqa: BLE001 - the grader never stops a batch
        report = {"learner": text.printable(learner.id), "score": 0.0, "max_score": float(sum(p.points for p in selected)),
                  "isolation": isolation.level, "problems": [{"id": p.id, "function": p.function, "status": "error", "score": 0.0,
                                "max_score": float(p.points), "category": "grader",
                                "message": f"The grader failed on this submission ({type(exc).__name__}); "
                                           "please report it."} for p in selected]}
    report["seconds"] = round(time.monotonic() - start, 2)
    report["cases"] = "shared" if shared is not None else "own"
    atomic_write(results / "learners" / f"{learner.key}.json", json.dumps(report, indent=1))
    return report


class _Progress:
    def __init__(self, total: int, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def update(self, label: str) -> None:
        self.done += 1
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        line = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {text.printable(label, 80)}"
        self.stream.write(("\r" + line.ljust(100)) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _graded_for(path: Path, selected: tuple, cases: str = "own") -> bool:
    """Whether a saved result covers exactly these problems, on the same kind of hidden cases (the
    learner's own, or the class's shared ones); else the learner is graded again."""
    try:
        saved = json.loads(path.read_text())
        return [p["id"] for p in saved["problems"]] == [p.id for p in selected] and saved.get("cases", "own") == cases
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _jobs_allowed(jobs: int, level, progress: bool) -> int:
    """How many learners to grade at a time: ``jobs``, or fewer where the machine's (or container's)
    CPUs or memory, or workers sharing one user's process count, allow no more (said when ``progress``)."""
    from autograder.engine.grade import fitted_jobs
    from autograder.sandbox import concurrent_workers_fair

    fitted = fitted_jobs(jobs)
    if fitted < jobs:
        if progress:
            print(f"Grading {fitted} worker{'s' * (fitted != 1)} at a time, not {jobs}: this machine's (or container's) "
                  "CPUs or memory allow no more.", file=sys.stderr)
        jobs = fitted
    if level.level == "strict" and jobs > 1 and not concurrent_workers_fair():
        # Without namespaces, a normal user's workers share its task count: one learner's threads could
        # starve another's. One worker at a time keeps each score the learner's own.
        if progress:
            print(f"Grading one worker at a time, not {jobs}: without namespaces, workers running as one user "
                  "share its process count (python -m autograder isolation says why).", file=sys.stderr)
        jobs = 1
    return jobs


def _grade_learners(todo, results: Path, timeout, level, jobs: int, selected, shared_cases: bool, progress: bool) -> bool:
    """Grade ``todo``, ``jobs`` learners at a time, each result saved as it comes; whether the run was
    interrupted (Ctrl-C: what was graded is kept)."""
    from autograder.engine.shared import SharedCases

    bar = _Progress(len(todo)) if progress else None
    interrupted = False
    futures: dict = {}
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    shared = SharedCases() if shared_cases else None
    try:
        # `jobs` learners at a time, and `jobs` workers in all: each learner may run several, so the
        # last learners graded use every core while the others are done.
        slots = threading.BoundedSemaphore(max(1, jobs))
        futures = {pool.submit(_grade_one, lr, results, timeout, level, max(1, jobs), slots, selected, shared): lr
                   for lr in todo}
        for done, future in enumerate(as_completed(futures), 1):
            if done == max(1, len(todo) - max(1, jobs)):
                # The last learners are being graded, on fewer cores as each ends: the summary's
                # chart library is imported meanwhile, not after.
                threading.Thread(target=_import_quietly, daemon=True, name="ckpt-chart-import").start()
            report = future.result()
            if bar:
                bar.update(f"{report['learner']}: {report['score']:g}/{report['max_score']:g}")
    except KeyboardInterrupt:
        interrupted = True
        for f in futures:
            f.cancel()
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
        if shared is not None and not interrupted:
            shared.close()  # (interrupted, a learner's thread may still read them: removed at exit)
        if bar:
            bar.close()
    return interrupted


def grade_batch(submissions: Path, results: Path, *, jobs: int = 2, force: bool = False,
                timeout: float | None = None, progress: bool = True, isolation: str = "strict",
                problems: tuple | None = None, shared_cases: bool = False, similarity: float | None = None) -> dict:
    """Grade every learner not yet graded; then write the gradebook, feedback and summary.

    ``problems`` (from :func:`autograder.registry.selection`): what was assigned, every problem by default; scores,
    feedback and the summary cover those only. ``isolation`` ``strict`` (the default) raises
    :class:`~autograder.sandbox.IsolationUnavailable` before grading anyone where this
    machine cannot give it. ``shared_cases``: every learner graded on the same hidden cases
    (:mod:`autograder.engine.shared`: the references run once per problem, not once per learner).
    ``similarity``: a threshold from 0 to 1: also compare the learners' code problem by problem and
    write ``similarity.html``/``.json`` (:mod:`autograder.classroom.similarity`)."""
    from autograder.sandbox import resolve, start_zygote

    submissions, results = Path(submissions), Path(results)
    selected = tuple(problems) if problems else registry.PROBLEMS
    learners = find_learners(submissions)
    cases = "shared" if shared_cases else "own"
    todo = [lr for lr in learners if force or not _graded_for(results / "learners" / f"{lr.key}.json", selected, cases)]
    if todo and isolation != "basic":
        start_zygote()  # its imports and the check of the level overlap
    level = resolve(isolation)
    jobs = _jobs_allowed(jobs, level, progress)
    interrupted = _grade_learners(todo, results, timeout, level, jobs, selected, shared_cases, progress)
    reports = load_results(results, [lr.key for lr in learners])
    from autograder.classroom.item_analysis import progress_of

    read: dict = {}

    def progress() -> dict:  # (read once, after the gradebook and feedback are written)
        if "map" not in read:
            read["map"] = {lr.key: progress_of(lr.path) for lr in learners if lr.path.is_dir() and not lr.path.is_symlink()}
        return read["map"]

    # The gradebook, feedback and summary first: nothing of the similarity report (whose time grows with
    # what the learners wrote) stands between the class and its grades. Then the summary again, with it.
    write_outputs(reports, results, selected, progress)
    if similarity is not None:
        from autograder.classroom import similarity as similar_code

        similar = similar_code.report(learners, selected, results, Path(__file__).resolve().parents[2], similarity)
        write_outputs(reports, results, selected, progress, similar)
    return {"learners": len(learners), "graded": len(todo), "skipped": len(learners) - len(todo),
            "interrupted": interrupted, "results": len(reports), "isolation": level.level,
            "isolation_detail": level.describe}


def load_results(results: Path, keys: list[str]) -> list[dict]:
    """Each learner's saved result, with its file ``key``."""
    out = []
    for key in keys:
        path = results / "learners" / f"{key}.json"
        if path.exists():
            out.append({**json.loads(path.read_text()), "key": key})
    return out


# ---------------------------------------------------------------------------------------------
# Outputs

def gradebook_csv(reports: list[dict], selected: tuple = registry.PROBLEMS) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    ids = [p.id for p in selected]
    writer.writerow(["learner", *ids, "total", "max_total"])
    for r in reports:
        scores = {p["id"]: p["score"] for p in r["problems"]}
        writer.writerow([text.csv_cell(r["learner"]), *(f"{scores.get(i, 0):g}" for i in ids), f"{r['score']:g}", f"{r['max_score']:g}"])
    return buf.getvalue()




def feedback_markdown(report: dict) -> str:
    lines = [f"# Feedback for {text.markdown(report['learner'])}", "", f"**Total: {report['score']:g} / {report['max_score']:g}**", "",
             "| Problem | Function | Status | Points |", "| --- | --- | --- | --- |"]
    for p in report["problems"]:
        lines.append(f"| {p['id']} | `{p['function']}` | {label(p['status'])} | {p['score']:g}/{p['max_score']:g} |")
    for p in report["problems"]:
        if p["status"] == "correct":
            continue
        problem = registry.get(p["id"])
        lines += ["", f"## {p['id']} {problem.title}", "", _message_markdown(p["message"]), "",
                  f"*Hint:* {problem.hint_for(p['message'])}"]
    return "\n".join(lines) + "\n"


def _message_markdown(message: str) -> str:
    """A grader's message in Markdown: its code spans kept, no raw HTML, no control characters."""
    return html.escape(text.printable(message, 4000), quote=False)


def feedback_html(report: dict) -> str:
    rows = "".join(
        f"<tr><td>{p['id']}</td><td><code>{html.escape(p['function'])}</code></td>"
        f"<td style='color:{COLOURS[p['status']]}'>{label(p['status'])}</td>"
        f"<td>{p['score']:g}/{p['max_score']:g}</td></tr>" for p in report["problems"])
    details = "".join(
        f"<h2>{p['id']} {html.escape(registry.get(p['id']).title)}</h2>"
        f"<div class='message'>{text.message_html(p['message'])}</div>"
        f"<p><em>Hint:</em> {text.message_html(registry.get(p['id']).hint_for(p['message']))}</p>"
        for p in report["problems"] if p["status"] != "correct")
    name = text.html_text(report["learner"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Feedback for {name}</title>"
            f"<style>body{{font-family:sans-serif;max-width:50em;margin:1em auto;padding:0 1em}} "
            f".message{{{text.MESSAGE_STYLE}}} code{{background:#f3f3f3;padding:0 2px}}</style></head>"
            f"<body><h1>Feedback for {name}</h1>"
            f"<p><b>Total: {report['score']:g} / {report['max_score']:g}</b></p>"
            f"<table border='1' cellpadding='4' style='border-collapse:collapse'><tr><th>Problem</th><th>Function</th>"
            f"<th>Status</th><th>Points</th></tr>{rows}</table>{details}</body></html>\n")


def class_summary(reports: list[dict], selected: tuple = registry.PROBLEMS, progress: dict | None = None) -> list[dict]:
    """Per problem: pass rate, most common failure, and the item analysis (:mod:`autograder.classroom.item_analysis`)."""
    from autograder.classroom.item_analysis import summary_rows

    return summary_rows(reports, selected, progress)


def summary_markdown(rows: list[dict], reports: list[dict], similar=None) -> str:
    from autograder.sandbox import NO_CODE_RAN, STRICT

    totals = sorted(r["score"] for r in reports)
    median = totals[len(totals) // 2] if totals else 0
    levels = Counter(r.get("isolation") or "unknown" for r in reports)
    kinds = Counter(r.get("cases", "own") for r in reports)
    lines = ["# Class summary", "", f"{len(reports)} learners; median total {median:g}.", "",
             "Isolation: " + ", ".join(f"{level} ({n} learner{'s' * (n != 1)})" for level, n in sorted(levels.items()))
             + ".", "",
             "Hidden cases: " + ", ".join({"own": "each learner's own", "shared": "the same for every learner (--shared-cases)"}
                                          .get(k, k) + f" ({n} learner{'s' * (n != 1)})" for k, n in sorted(kinds.items()))
             + ".", ""]
    if set(levels) - {STRICT, NO_CODE_RAN}:
        lines += ["**Warning:** some learners' code ran below the strict isolation level: it could read the hidden "
                  "tests and references, and write, signal or reach what the grader can. Their scores are not "
                  "protected against a hostile submission (see SECURITY.md).", ""]
    from autograder.classroom.item_analysis import markdown

    lines += ["![pass rate and discrimination per problem](summary.png)", "", *markdown(rows)]
    if similar is not None:
        n = len(similar.pairs)
        lines += ["", f"Similar code: {n} pair{'s' * (n != 1)} of learners over the threshold, each pair's code side by "
                  "side in [similarity.html](similarity.html): evidence to read, not a verdict."]
    return "\n".join(lines) + "\n"


def _import_chart_library() -> None:
    """Matplotlib's figure and its PNG writer (imported only here), without pyplot's global state."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401


def _import_quietly() -> None:
    try:
        _import_chart_library()
    except Exception:  # noqa: BLE001 - the chart's own import says what is wrong, in the main thread
        pass


def summary_chart(rows: list[dict], path: Path) -> None:
    _import_chart_library()
    from matplotlib.figure import Figure

    from autograder.classroom.item_analysis import chart

    fig = Figure(figsize=(max(6, 0.5 * len(rows) + 2) + 4.5, 3.6))
    chart(rows, fig)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write(path, buf.getvalue())


def write_outputs(reports: list[dict], results: Path, selected: tuple = registry.PROBLEMS,
                  progress=None, similar=None) -> None:
    """The gradebook and each learner's feedback first, then the class summary. ``progress``: each
    learner's key to what the progress file their submission held says (:func:`autograder.
    item_analysis.progress_of`), or a function giving that map: called only once the gradebook and
    feedback are written, so that no optional file a learner hands in stands between the class and
    its grades."""
    atomic_write(results / "gradebook.csv", gradebook_csv(reports, selected))
    for r in reports:
        key = r.get("key") or text.file_key(r["learner"])
        atomic_write(results / "feedback" / f"{key}.md", feedback_markdown(r))
        atomic_write(results / "feedback" / f"{key}.html", feedback_html(r))
    progress = progress() if callable(progress) else progress
    rows = class_summary(reports, selected, progress)
    lines = summary_markdown(rows, reports, similar)
    refused = sorted((key, c.note) for key, c in (progress or {}).items() if getattr(c, "note", ""))
    if refused:
        lines += "\n" + "\n".join(["Progress files read in part or not at all (those learners' attempts and hints "
                                    "are left out where unread):", "",
                                    *(f"- `{key}`: {text.printable(note)[:300]}" for key, note in refused)]) + "\n"
    atomic_write(results / "summary.md", lines)
    atomic_write(results / "summary.json", json.dumps(rows, indent=1))
    summary_chart(rows, results / "summary.png")
