"""Red team: a class of hostile submissions graded with grade-batch, as an instructor would.

At the strict level, no attack in :mod:`tests.hostile` may earn a point, harm a classmate, change
the course or its environment, write outside its worker, reach the network, or leave a process;
the batch must finish in one run. The attacks that can safely run without the jail are graded
again at the basic level, where each must work: that shows the jail, not a broken attack, is
what stops them. Then the channel (forged frames) and the read count (4.4) one by one.
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from autograder import registry, sandbox
from solutions import unit4
from tests import platforms
from tests.hostile import ATTACKS, EFFECTS, SURFACES, reference

pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(sandbox.strict_missing()),
                                                   reason="this machine cannot give the strict level")]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = uuid.uuid4().hex[:10]
HONEST = ("aaa_alice", "zzz_zoe")  # graded first and last
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", ".git", ".ipynb_checkpoints"}


def _site_packages() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def tree_state(top: Path) -> dict:
    """(size, mtime, mode) of every file below ``top`` (the course and its .venv)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            state[path] = (st.st_size, st.st_mtime_ns, st.st_mode)  # modes too: chmod leaves mtimes alone
    return state


def digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def sandbox_processes() -> list[int]:
    """Processes started by a worker (they carry the worker's environment)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if b"CKPT_ISOLATION=" in Path(f"/proc/{entry}/environ").read_bytes():
                    out.append(int(entry))
            except OSError:
                continue
    return out


def processes_left(before: set[int], grace: float = 10.0) -> set[int]:
    """The processes a worker started that outlive the batch: watched for ``grace`` seconds, so that a
    worker the grader killed, which the kernel is still tearing down when the batch returns (a JAX
    process frees its memory for a while, longer on a loaded machine), is not counted as left."""
    deadline = time.monotonic() + grace
    while True:
        left = set(sandbox_processes()) - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


class Listeners:
    """A TCP, a UDP, a unix and an abstract unix socket on this machine; records what arrives."""

    def __init__(self, folder: Path):
        self.received: list[bytes] = []
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix_path = str(folder / "listen.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen()
        self.abstract_name = b"\0ckpt-hostile-" + TOKEN.encode() + b"-" + uuid.uuid4().hex[:6].encode()
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind(self.abstract_name)
        self.abstract.listen()
        self.stop = False
        for server in (self.tcp, self.unix, self.abstract):
            threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        threading.Thread(target=self._datagrams, daemon=True).start()

    def _accept(self, server):
        server.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(1024))
                except OSError:
                    self.received.append(b"<connected>")

    def _datagrams(self):
        self.udp.settimeout(0.2)
        while not self.stop:
            try:
                self.received.append(self.udp.recv(1024))
            except OSError:
                continue

    def constants(self) -> dict:
        return {"TCP_PORT": self.tcp.getsockname()[1], "UDP_PORT": self.udp.getsockname()[1],
                "UNIX_PATH": self.unix_path, "ABSTRACT": self.abstract_name}

    def close(self):
        self.stop = True
        for s in (self.tcp, self.udp, self.unix, self.abstract):
            s.close()


class Class:
    """A folder of submissions, graded with the grade-batch command at one isolation level."""

    def __init__(self, tmp: Path, level: str, attacks: list, landlock_abi: str = "", platform: str = "native",
                 user: bool = False, honest: str | None = None, classmates: tuple = HONEST):
        self.tmp, self.level, self.attacks, self.platform = tmp, level, attacks, platform
        self.subs, self.out, self.progress = tmp / "submissions", tmp / "results", tmp / "progress"
        self.grader_tmp = tmp / "grader-tmp"  # the grader's own temporary folder: empty when it is done
        for folder in (self.subs, self.out, self.progress, self.grader_tmp):
            folder.mkdir()
        home = tmp / "home"
        home.mkdir()
        (self.progress / "progress.jsonl").write_text("")
        self.listeners = Listeners(tmp)
        self.tmp_mark = f"/tmp/ckpt-hostile-{TOKEN}-{level}"
        self.home_name = f"ckpt-hostile-{TOKEN}-{level}"
        reference = honest or (ROOT / "solutions" / "unit4.py").read_text()
        for name in classmates:
            (self.subs / f"{name}.py").write_text(reference)
        for attack in attacks:
            constants = {"ROOT": str(ROOT), "SITE": _site_packages(), "TOKEN": TOKEN, "LEARNER": attack.name,
                         "TMP_MARK": self.tmp_mark, "HOME_NAME": self.home_name, "PROGRESS": str(self.progress),
                         "RESULTS": str(self.out), **self.listeners.constants()}
            (self.subs / f"{attack.name}.py").write_text(attack.source(constants))
        self.before_subs = digest(self.subs)
        self.before_tree = tree_state(ROOT)
        self.before_procs = set(sandbox_processes())
        env = {**os.environ, "CKPT_COURSE_SALT": f"secret-{TOKEN}", "CKPT_COURSE_HOME": str(self.progress),
               "TMPDIR": str(self.grader_tmp),
               **({"CKPT_TEST_LANDLOCK_ABI": landlock_abi} if landlock_abi else {})}
        python, wrap = sys.executable, []
        if user:  # the grader as a user with no privilege: its own Python, and folders of its own to write
            python = platforms.user_python(tmp.parent / "ckpt-user-python")
            for folder in (tmp, self.out, self.progress, home, self.grader_tmp):
                os.chown(folder, platforms.USER, platforms.USER)
            env["HOME"] = str(home)
        if platform != "native" or user:
            wrap = [sys.executable, str(ROOT / "tests" / "platforms.py"), platform,
                    *(["--user", str(platforms.USER)] if user else []), "--"]
        self.run = subprocess.run([*wrap, python, "-m", "autograder", "grade-batch", str(self.subs), "--out",
                                   str(self.out), "-j", "2", "--quiet", "--isolation", level], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=1200)
        self.listeners.close()
        self.left_in_tmp = sorted(os.listdir(self.grader_tmp))
        self.after_procs = processes_left(self.before_procs)
        rows = list(csv.DictReader((self.out / "gradebook.csv").open())) if (self.out / "gradebook.csv").exists() else []
        self.scores = {r["learner"]: r for r in rows}

    def score(self, learner: str, problem: str) -> float:
        return float(self.scores[learner][problem])

    def learner_json(self, learner: str) -> dict:
        return json.loads((self.out / "learners" / f"{learner}.json").read_text())

    def marks(self, attack) -> list[str]:
        """What an attack left outside its worker, by name."""
        found = []
        if Path(f"{self.tmp_mark}-{attack.name}").exists():
            found.append("a file in /tmp")
        if Path(os.path.expanduser("~"), f"{self.home_name}-{attack.name}").exists():
            found.append("a file in home")
        if any(attack.name.encode() in data for data in self.listeners.received):
            found.append("data over the network")
        return found

    def clean(self):
        import glob

        for path in glob.glob(f"{self.tmp_mark}-*") + glob.glob(os.path.expanduser(f"~/{self.home_name}-*")):
            os.unlink(path)
        for pid in sandbox_processes():
            try:
                os.kill(pid, 9)
            except OSError:
                pass


# The kernel's own Landlock, and older kernels' emulated on it: the jail uses only what ABI 1, 2 or
# 4 can express (Ubuntu 22.04 and WSL2 on 5.15: 1; Debian 12 on 6.1: 2; Linux 6.7: 4), and the
# kernel enforces exactly that. Then the platforms where new namespaces are refused (Docker's
# defaults; Ubuntu 24.04's rule for normal users), as root and as a user (tests/platforms.py):
# ABI 4 there has no Landlock scope for signals, which seccomp then refuses.
STRICT_PLATFORMS = {"abi-kernel": ("", "native", False), "abi-1": ("1", "native", False),
                    "abi-2": ("2", "native", False), "abi-4": ("4", "native", False),
                    "docker-root": ("", "docker-default", False), "docker-root-abi-4": ("4", "docker-default", False),
                    "user": ("", "native", True), "docker-user": ("", "docker-default", True),
                    "no-userns-user-abi-2": ("2", "no-userns", True)}


@pytest.fixture(scope="module", params=list(STRICT_PLATFORMS))
def strict_class(tmp_path_factory, request):
    abi, platform, user = STRICT_PLATFORMS[request.param]
    if user and platforms.user_can_run_here():
        pytest.skip(f"the suite as a user: {platforms.user_can_run_here()}")
    if platform == "docker-default" and os.geteuid() != 0 and not user:
        pytest.skip("Docker's defaults as root: needs root")
    tmp = Path(tempfile.mkdtemp(prefix="ckpt-hostile-")) if user else tmp_path_factory.mktemp("strict")
    if user:
        tmp.chmod(0o755)
    graded = Class(tmp, "strict", ATTACKS, abi, platform, user)
    yield graded
    graded.clean()
    if user:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def basic_class(tmp_path_factory):
    graded = Class(tmp_path_factory.mktemp("basic"), "basic", [a for a in ATTACKS if a.contrast])
    yield graded
    graded.clean()


# ---------------------------------------------------------------------------------------------
# Strict: nothing works

def test_the_batch_finishes_in_one_run(strict_class):
    run = strict_class.run
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Isolation: strict" in run.stdout
    # by the mechanisms this platform has: without namespaces where it (or this machine) refuses them
    refused = strict_class.platform != "native" or not sandbox.strict_namespaces()
    assert ("no namespaces (refused here)" in run.stdout) == refused, run.stdout
    assert set(strict_class.scores) == {a.name for a in ATTACKS} | set(HONEST)
    summary = (strict_class.out / "summary.md").read_text()
    assert "Isolation: strict" in summary and "Warning" not in summary


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_no_attack_earns_a_point(strict_class, attack):
    (result,) = [p for p in strict_class.learner_json(attack.name)["problems"] if p["id"] == attack.problem]
    assert result["status"] != "not_attempted", result  # the attack ran
    assert strict_class.score(attack.name, attack.problem) == 0, result
    assert float(strict_class.scores[attack.name]["total"]) == 0
    assert strict_class.learner_json(attack.name)["isolation"] == "strict"


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_no_attack_leaves_a_mark_outside_its_worker(strict_class, attack):
    assert strict_class.marks(attack) == []


def test_classmates_are_graded_in_full_and_their_files_untouched(strict_class):
    for name in HONEST:
        for problem in ("4.1", "4.2", "4.3", "4.4", "4.5"):  # 4.4 with its bytes counted from outside
            assert strict_class.score(name, problem) > 0, \
                [(p["status"], p.get("category"), p["message"]) for p in strict_class.learner_json(name)["problems"]
                 if p["id"] == problem]
    assert digest(strict_class.subs) == strict_class.before_subs


def test_results_are_the_graders_own(strict_class):
    for attack in ATTACKS:
        data = strict_class.learner_json(attack.name)
        assert data["learner"] == attack.name and data["score"] == 0 and len(data["problems"]) == len(registry.PROBLEMS)
    assert sorted(p.name for p in (strict_class.out / "learners").iterdir()) == \
        sorted(f"{n}.json" for n in strict_class.scores)


def test_the_course_and_its_environment_are_unchanged(strict_class):
    after = tree_state(ROOT)
    changed = sorted(p for p in set(after) | set(strict_class.before_tree)
                     if after.get(p) != strict_class.before_tree.get(p))
    assert changed == []


def test_nothing_reaches_the_network_or_the_progress_store(strict_class):
    assert strict_class.listeners.received == []
    assert (strict_class.progress / "progress.jsonl").read_text() == ""


def _described(pids) -> dict:
    """Each process left, with its command line (where it still has one) and its parent."""
    out = {}
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
            ppid = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("PPid:"))
            out[pid] = f"{cmd!r} (parent {ppid})"
        except (OSError, StopIteration):
            out[pid] = "(gone)"
    return out


def test_no_process_is_left(strict_class):
    assert strict_class.after_procs == set(), _described(strict_class.after_procs)


def test_nothing_is_left_in_the_graders_temporary_folder(strict_class):
    assert strict_class.left_in_tmp == []


def test_each_failure_is_reported_as_the_learners_own(strict_class):
    data = strict_class.learner_json("ctypes_mmap")
    (p44,) = [p for p in data["problems"] if p["id"] == "4.4"]
    assert p44["status"] in ("incorrect", "error")
    for name in ("grandchild_read", "reaped_child_read"):  # a read-counted problem starts no process
        (p44,) = [p for p in strict_class.learner_json(name)["problems"] if p["id"] == "4.4"]
        assert p44["status"] in ("incorrect", "error") and p44["score"] == 0, p44


# ---------------------------------------------------------------------------------------------
# Basic: the same attacks work, so the tests above can fail

CONTRAST = [a for a in ATTACKS if a.contrast]


@pytest.mark.parametrize("attack", CONTRAST, ids=lambda a: a.name)
def test_without_the_jail_the_attack_works(basic_class, attack):
    assert basic_class.run.returncode == 0, basic_class.run.stderr[-2000:]
    if attack.kind in EFFECTS:
        if attack.name == "leave_process":
            assert basic_class.after_procs, "no process was left"
        return
    worked = basic_class.score(attack.name, attack.problem) > 0 or basic_class.marks(attack) or (
        attack.name == "write_progress" and "forged" in (basic_class.progress / "progress.jsonl").read_text())
    assert worked, basic_class.learner_json(attack.name)


def test_basic_is_said_out_loud(basic_class):
    assert "WARNING" in basic_class.run.stdout
    summary = (basic_class.out / "summary.md").read_text()
    assert "Isolation: basic" in summary and "**Warning:**" in summary
    assert basic_class.learner_json(HONEST[0])["isolation"] == "basic"


# ---------------------------------------------------------------------------------------------
# The channel: what a worker sends is bounded and checked before anything is built from it

FORGED = {
    "deep_nesting": "b'{\"value\":' + b'[' * 200_000 + b']' * 200_000 + b'}'",
    "huge_dtype": "json.dumps({'value': {'$array': '<U100000000', 'lib': 'numpy', 'shape': [3], "
                  "'bytes': 'AAAA'}}).encode()",
    "shape_mismatch": "json.dumps({'value': {'$array': 'float64', 'lib': 'numpy', 'shape': [100000, 100000], "
                      "'bytes': 'AAAAAAAAAAAA'}}).encode()",
    "short_bytes": "json.dumps({'value': {'$array': 'float64', 'lib': 'numpy', 'shape': [4], "
                   "'bytes': 'AAAAAAAAAAAA'}}).encode()",
    "long_bytes": "json.dumps({'value': {'$array': 'float64', 'lib': 'numpy', 'shape': [1], "
                  "'bytes': 'A' * 24}}).encode()",
    "not_base64": "json.dumps({'value': {'$array': 'float64', 'lib': 'numpy', 'shape': [3], "
                  "'bytes': '!' * 32}}).encode()",
    "bool_not_0_or_1": "json.dumps({'value': {'$array': 'bool', 'lib': 'numpy', 'shape': [3], "
                       "'bytes': 'AAIA'}}).encode()",
    "huge_frame": "b'[' + b'1,' * (75 * 2**20) + b'1]'",
    "not_json": "b'\\xff' * 100",
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_frame_costs_that_problem_only(grade_code, name):
    source = f'''
import json, os, struct, sys

def coalesce_runs(runs, max_gap):
    payload = {FORGED[name]}
    os.write(int(sys.argv[2]), struct.pack("<I", min(len(payload), 2**32 - 1)) + payload)
    return []

def index_domain_to_byte_runs(bounds, shape, itemsize, base):
    return [(base, itemsize)] if not shape else []
'''
    report = grade_code(source, problems=["4.2", "4.3"], isolation="strict")
    runs, coalesce = report.problems
    assert coalesce.status == "error" and "not a result" in coalesce.message, coalesce.message
    assert runs.status == "incorrect"  # graded on its own, after the forged frame



def test_a_worker_cannot_claim_more_time_in_its_function_than_it_lived(grade_code):
    """A case frame's seconds (time inside the learner's function) is the worker's own word; the
    results an instructor reads (learners/<id>.json) and the benchmarks show it. Never more than
    the grader's own clock gave the worker (checked: without that bound, this fails)."""
    source = '''
import json, os, struct, sys

def coalesce_runs(runs, max_gap):
    payload = json.dumps({"value": [], "seconds": 999999.0}).encode()
    os.write(int(sys.argv[2]), struct.pack("<I", len(payload)) + payload)
    os._exit(0)
'''
    (result,) = grade_code(source, problems=["4.3"], isolation="strict").problems
    assert 0 < result.seconds < 60 and result.code_seconds <= result.seconds, (result.seconds, result.code_seconds)

def test_a_learner_cannot_write_the_judges_answer_into_the_channel(grade_code):
    """The frames carry only what the function returns: writing one for the judge earns nothing."""
    source = '''
import json, os, struct, sys

def coalesce_runs(runs, max_gap):
    frame = json.dumps({"value": [], "read_bytes": 0, "status": "correct", "score": 10}).encode()
    os.write(int(sys.argv[2]), struct.pack("<I", len(frame)) + frame)
    return []
'''
    (result,) = grade_code(source, problems=["4.3"], isolation="strict").problems
    assert result.score == 0


def test_the_read_seal_is_installed_before_any_learner_code(grade_code):
    """4.4's read seal (no file maps, no sendfile, no process) is a seccomp filter the worker installs
    itself. Installed after the module's top level had run, a top level that rebinds it (looked up
    at call time) left its cases unsealed: the whole file mapped, uncounted, scored full marks. The
    attack is the class's own (tests.hostile), graded alone; its control is the honest reader."""
    (attack,) = [a for a in ATTACKS if a.name == "unseal_then_mmap"]
    (result,) = grade_code(attack.source({}), problems=["4.4"], isolation="strict").problems
    assert result.score == 0 and result.status in ("incorrect", "error"), (result.status, result.message)
    (honest,) = grade_code(inspect.getsource(unit4), problems=["4.4"], isolation="strict").problems
    assert honest.status == "correct", honest.message


def test_a_compiled_extension_imported_late_by_a_read_counted_module_is_named(grade_code):
    """Once reads are counted, file maps are refused, so a compiled extension cannot load: the module
    that asks for one is told which, and why; the extensions loaded beforehand import as usual."""
    base = inspect.getsource(unit4)
    late_import = ("import sqlite3\n" + base + "\n\n_reference = read_shard\n\n\ndef read_shard(path, name, bounds):\n"
                   "    assert sqlite3.sqlite_version\n    return _reference(path, name, bounds)\n")
    (late,) = grade_code(late_import, problems=["4.4"], isolation="strict").problems
    assert late.status == "error" and "imports _sqlite3" in late.message and "compiled extension" in late.message, late.message
    (early,) = grade_code("import hashlib, datetime, pickle, csv\n" + base, problems=["4.4"],
                          isolation="strict").problems
    assert early.status == "correct", early.message


# ---------------------------------------------------------------------------------------------
# Inputs: the references never read a file learner code can write

def test_references_read_their_own_copies_of_the_input_files(root, monkeypatch):
    """Learner code may rewrite every file in its folder while the references run (they overlap):
    a reference reading those files would compute its expected value from the learner's data. The
    rewrite_inputs attack rarely wins that race; this checks the paths themselves."""
    from autograder.engine import grade as grading

    workdirs, reference_paths = [], []
    real_worker, real_parts = grading.sandbox.Worker, grading.trusted_side.parts

    class Spy(real_worker):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            workdirs.append(os.path.realpath(self.workdir))

    def spy_parts(target, problem_id, raw, folder):
        # (the references run in a process of their own: the arguments it computes each case's outcome
        # from are the first thing it sends back)
        made = real_parts(target, problem_id, raw, folder)
        args = next(made)
        reference_paths.extend(a for case in args for a in case if isinstance(a, str) and a.startswith("/"))
        yield args
        yield from made

    monkeypatch.setattr(grading.sandbox, "Worker", Spy)
    monkeypatch.setattr(grading.trusted_side, "parts", spy_parts)
    report = grading.grade([root / "solutions" / "unit4.py"], "inputs-check", problems=["4.1", "4.4"], jobs=1,
                           isolation="strict")
    assert all(p.status == "correct" for p in report.problems), report.to_json()
    assert workdirs and reference_paths
    assert not [p for p in reference_paths if any(os.path.realpath(p).startswith(w + os.sep) for w in workdirs)]


# ---------------------------------------------------------------------------------------------
# The grader killed in the middle (Ctrl-C, OOM): its workers do not outlive it

_GRADER = '''
import sys, time
from autograder import registry
from autograder import sandbox
worker = sandbox.Worker("def f(x):\\n    while True:\\n        pass\\n", "f", [(1,)], level=sys.argv[1], timeout=600)
time.sleep(2)
print("running", flush=True)
time.sleep(600)
'''


@pytest.mark.parametrize("level", ["strict", "basic"])
def test_killing_the_grader_leaves_no_worker_and_the_next_grader_removes_its_folders(level):
    before = set(sandbox_processes())
    grader = subprocess.Popen([sys.executable, "-c", _GRADER, level], stdout=subprocess.PIPE, text=True)
    try:
        assert grader.stdout.readline().strip() == "running"
        assert set(sandbox_processes()) - before, "the endless worker is not running"
    finally:
        grader.kill()
        grader.wait()
    for _ in range(100):
        if not set(sandbox_processes()) - before:
            break
        time.sleep(0.05)
    assert set(sandbox_processes()) - before == set()
    # Its worker's folder stays (no grader left to remove it) until the next grader starts a worker.
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"ckpt-worker-{grader.pid}-")]
    assert left, "the killed grader's worker folder is not where the next grader looks"
    subprocess.run([sys.executable, "-c", "from autograder import sandbox\n"
                    "sandbox.remove_folder(sandbox.new_workdir())"], cwd=ROOT, check=True, timeout=120)
    assert not [n for n in left if os.path.exists(os.path.join(tempfile.gettempdir(), n))]


# ---------------------------------------------------------------------------------------------
# Workers forked from the zygote (the strict level's fast start) inherit its memory: public only

_FORKED_AND_CLEAN = '''
import gc, sys

FORKED = "jax" in sys.modules  # at load time: only a worker forked from the zygote has JAX already
SECRET = ("solutions", "autograder.hidden", "autograder.registry", "autograder.engine.grade", "autograder.classroom.batch")


def coalesce_runs(runs, max_gap):
    held = [m for m in sys.modules if m.startswith(SECRET)]
    gc.unfreeze()  # the zygote froze what it holds: get_objects() sees it again
    code = [f for f in gc.get_objects() if type(f).__name__ == "function" and str(f.__module__).startswith(SECRET)]
    if not FORKED or held or code:
        return [(-1, len(held) + len(code))]  # wrong on purpose: says what was found
    return _right(runs, max_gap)

''' + inspect.getsource(unit4.coalesce_runs).replace("def coalesce_runs(", "def _right(")  # (its text, in the submission)


def test_a_worker_forked_from_the_zygote_holds_no_reference_and_no_hidden_test(grade_code):
    """The zygote imports public libraries only: a worker forked from it finds JAX loaded, and no
    module or function of the references, the hidden tests or the judging side (which it would,
    were any of them preloaded)."""
    (result,) = grade_code(_FORKED_AND_CLEAN, problems=["4.3"], isolation="strict").problems
    assert result.status == "correct", result.message


_ASKS_FOR_SECRETS = _FORKED_AND_CLEAN.replace("    return _right(runs, max_gap)", '''    if runs is None:
        _never_called()
    return _right(runs, max_gap)''') + '''

def _never_called():  # read by the grader, to choose what the zygote imports; never run
    import solutions.unit4
    import autograder.hidden.unit4
    from autograder import registry
    from autograder.classroom import batch
    from autograder.engine import grade
    from solutions import unit1
'''


def test_a_worker_whose_code_imports_the_references_gets_none_of_them_from_the_zygote(grade_code):
    """The grader reads a submission's import statements to choose what the zygote imports before
    forking its worker: only names of a fixed list of public libraries count, so code that names
    the references, the hidden tests or the judging side has none of them imported for it (checked:
    with that list dropped on both sides, the zygote imports them and this fails)."""
    from autograder.sandbox import zygote

    assert zygote.needs(_ASKS_FOR_SECRETS) == []
    (result,) = grade_code(_ASKS_FOR_SECRETS, problems=["4.3"], isolation="strict").problems
    assert result.status == "correct", result.message


_PRELOADED = '''
import sys

AT_LOAD = {m: m in sys.modules for m in ("jax", "flax.linen", "flax.nnx", "orbax.checkpoint")}


def f():
    return [AT_LOAD[m] for m in sorted(AT_LOAD)]
'''


def test_the_zygote_imports_what_a_workers_code_imports_before_it_forks_that_worker_and_no_more(root):
    """A worker is forked once the zygote has imported JAX and the libraries its code imports (a
    learner's Unit 1 does not wait for Orbax); one whose code imports Orbax finds it loaded. In a
    grader of its own, so that no earlier test's zygote has imported anything yet."""
    script = ("import json\n"
              "from autograder import sandbox\n"
              "sandbox.start_zygote()\n"
              f"src = {_PRELOADED!r}\n"
              "plain = sandbox.Worker(src, 'f', [()], level='strict').wait()\n"
              "nnx = sandbox.Worker(src + 'from flax import nnx\\n', 'f', [()], level='strict').wait()\n"
              "orbax = sandbox.Worker(src + '    import orbax.checkpoint\\n', 'f', [()], level='strict').wait()\n"
              "print(json.dumps([r.cases[0]['value'] for r in (plain, nnx, orbax)]))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=180)
    plain, nnx, orbax = json.loads(out.stdout.splitlines()[-1])
    # In the order flax.linen, flax.nnx, jax, orbax.checkpoint:
    assert plain == [False, False, True, False], plain
    assert nnx == [True, True, True, False], nnx
    assert orbax == [True, True, True, True], orbax  # (NNX imported for the worker before)


def test_without_the_zygote_workers_start_afresh_and_grade_the_same(grade_code, monkeypatch, root):
    forked = grade_code((root / "solutions" / "unit2.py").read_text(), problems=["2.1", "2.4"], isolation="strict")
    monkeypatch.setenv("CKPT_ZYGOTE", "0")
    (fresh,) = grade_code(_FORKED_AND_CLEAN, problems=["4.3"], isolation="strict").problems
    assert fresh.status == "incorrect"  # not forked: JAX was not loaded, so it says so
    afresh = grade_code((root / "solutions" / "unit2.py").read_text(), problems=["2.1", "2.4"], isolation="strict")
    assert [p.status for p in forked.problems] == [p.status for p in afresh.problems] == ["correct", "correct"]



_OPEN_DESCRIPTORS = '''
import os


def f():
    held = []
    for n in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{n}"))
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
        except OSError as exc:
            held.append(f"unreadable: {exc}")
    return held
'''


def test_a_forked_worker_holds_no_descriptor_of_the_zygote_or_of_another_worker():
    """The zygote holds its socket to the grader and a pidfd of every worker it forked (readable
    when that worker ends). A worker holding one could talk to the zygote, or signal another
    learner's worker through its pidfd: a forked worker closes every descriptor but its pipes and
    its log before anything else runs. Checked with another worker alive while it is forked
    (checked: with the pidfds kept open in the fork, this fails)."""
    from autograder.sandbox import zygote

    sibling = sandbox.Worker("def f():\n    import time\n    time.sleep(20)\n", "f", [()], level="strict", timeout=60)
    try:
        worker = sandbox.Worker(_OPEN_DESCRIPTORS, "f", [()], level="strict")
        run = worker.wait()
    finally:
        sibling.kill()
    assert isinstance(sibling.proc, zygote.Forked) and isinstance(worker.proc, zygote.Forked)
    (case,) = run.cases
    held = case["value"]
    assert held and not [d for d in held if "pidfd" in d or d.startswith(("socket:", "unreadable"))], held



def test_the_zygote_is_gone_when_the_grader_has_exited(root):
    """A grader that exits ends its zygote and reaps it first: no process of the grader's is left
    for a moment after, to be seen by whatever lists processes next (its parent-death signal
    alone left it there; checked: without the stop at exit, this fails)."""
    script = ("from autograder import sandbox\nfrom autograder.sandbox import zygote\n"
              "sandbox.start_zygote()\n"
              "print(zygote._get(sandbox.zygote_env()).proc.pid, flush=True)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    pid = int(out.stdout.split()[-1])
    assert not Path(f"/proc/{pid}").exists(), Path(f"/proc/{pid}/status").read_text()[:200]


_SIGNAL_EVERYONE = '''
import os, signal


def coalesce_runs(runs, max_gap):
    me = os.getpid()
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(-1, sig)
        except OSError:
            pass
        for pid in range(2, 2**15):  # by number too: the zygote's pid is not secret
            if pid != me:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    return []
'''


def test_a_strict_worker_cannot_stop_or_kill_the_zygote(grade_code):
    """A worker that signals every process it can name leaves the zygote running and forking (a
    dead zygote would only slow grading down, since workers then start afresh: this checks it
    directly, by its pid). Two protections hold here, each enough alone: the worker's pid
    namespace, where the zygote has no number, and Landlock's signal scope (checked: the test
    still passes with the scope off)."""
    from autograder.sandbox import zygote

    grade_code("def coalesce_runs(runs, max_gap):\n    return []\n", problems=["4.3"], isolation="strict")
    before = zygote._current
    assert before is not None and before.proc is not None and not before.dead
    # Its own threads have numbers in its namespace too, and a thread's names its process to kill():
    # the worker stops itself, as any process would, and its wall clock ends it (a short limit here).
    grade_code(_SIGNAL_EVERYONE, problems=["4.3"], isolation="strict", timeout=5)
    state = Path(f"/proc/{before.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert zygote._current is before and not before.dead and state in "SR", state
    worker = sandbox.Worker("def f():\n    return 1\n", "f", [()], level="strict")
    assert isinstance(worker.proc, zygote.Forked) and [c["value"] for c in worker.wait().cases] == [1]


# ---------------------------------------------------------------------------------------------
# The surfaces Units 3, 5 and 6 added (issue 35), graded as a class beside honest classmates who
# solved those units: a resume forged from folder names, a run folder left in a mess or crowded
# with step names, pages given back while the memory is measured, host arrays posing as placed
# ones. Where the grader runs as root (a cgroup per worker) and as a normal user (none: two workers
# at a time all the same, each in namespaces of its own; scratch folders removed without root's
# rights); the attacks the jail stops are graded again without it. (Without namespaces, as under
# Docker's defaults, a user's batch runs one worker at a time: the strict class above covers it.)

SURFACE_PLATFORMS = {"root": ("", "native", False), "user": ("", "native", True)}
SURFACE_PROBLEMS = ("3.3", "5.3", "6.1", "6.2")  # (the classmate leaves the others unsolved)
HONEST_SURFACES = "\n".join(reference(unit, {registry.get(p).function: f"_unsolved_{p.replace('.', '_')}"
                                              for p in ("3.1", "3.2", "3.4", "5.1", "5.2")})
                             for unit in (3, 5, 6))


def _surface_class(tmp: Path, level: str, attacks: list, platform: str, user: bool, classmates: tuple = HONEST):
    return Class(tmp, level, attacks, "", platform, user, honest=HONEST_SURFACES, classmates=classmates)


@pytest.fixture(scope="module", params=list(SURFACE_PLATFORMS))
def surfaces(tmp_path_factory, request):
    abi, platform, user = SURFACE_PLATFORMS[request.param]
    if user and platforms.user_can_run_here():
        pytest.skip(f"the suite as a user: {platforms.user_can_run_here()}")
    tmp = Path(tempfile.mkdtemp(prefix="ckpt-surfaces-")) if user else tmp_path_factory.mktemp("surfaces")
    if user:
        tmp.chmod(0o755)
    graded = _surface_class(tmp, "strict", SURFACES, platform, user, classmates=HONEST[:1])
    yield graded
    graded.clean()
    if user:
        shutil.rmtree(tmp, ignore_errors=True)


def _said(graded, learner: str, problem: str) -> dict:
    (result,) = [p for p in graded.learner_json(learner)["problems"] if p["id"] == problem]
    return result


def test_the_surfaces_batch_finishes_and_honest_classmates_keep_full_marks(surfaces):
    assert surfaces.run.returncode == 0, surfaces.run.stderr[-2000:]
    assert set(surfaces.scores) == {a.name for a in SURFACES} | set(HONEST[:1])
    for name in HONEST[:1]:  # graded first: beside every attack
        for problem in SURFACE_PROBLEMS:
            assert surfaces.score(name, problem) == registry.get(problem).points, _said(surfaces, name, problem)


@pytest.mark.parametrize("attack", SURFACES, ids=lambda a: a.name)
def test_no_surface_attack_earns_a_point(surfaces, attack):
    result = _said(surfaces, attack.name, attack.problem)
    assert result["status"] in ("incorrect", "error") and result["score"] == 0, result
    assert float(surfaces.scores[attack.name]["total"]) == 0
    assert result["category"] != "grader", result  # a learner's trick is never the grader's own failure


def test_each_surface_attack_is_told_what_it_did(surfaces):
    assert _said(surfaces, "forge_resume", "5.3")["category"] == "plant_unreadable"
    assert _said(surfaces, "crowd_the_run_folder", "5.3")["category"] == "crowded"
    for name, problem in (("pose_as_served", "6.1"), ("pose_as_resharded", "3.3")):
        assert _said(surfaces, name, problem)["category"] == "wrong_type"


def test_surface_attacks_leave_nothing_behind(surfaces):
    assert surfaces.left_in_tmp == []
    assert surfaces.after_procs == set(), _described(surfaces.after_procs)
    assert digest(surfaces.subs) == surfaces.before_subs
    after = tree_state(ROOT)
    assert sorted(p for p in set(after) | set(surfaces.before_tree) if after.get(p) != surfaces.before_tree.get(p)) == []


@pytest.fixture(scope="module")
def surfaces_basic(tmp_path_factory):
    graded = _surface_class(tmp_path_factory.mktemp("surfaces-basic"), "basic", [a for a in SURFACES if a.contrast],
                            "native", False, classmates=())
    yield graded
    graded.clean()


@pytest.mark.parametrize("attack", [a for a in SURFACES if a.contrast], ids=lambda a: a.name)
def test_without_the_jail_the_surface_attack_works(surfaces_basic, attack):
    assert surfaces_basic.run.returncode == 0, surfaces_basic.run.stderr[-2000:]
    assert surfaces_basic.score(attack.name, attack.problem) > 0, _said(surfaces_basic, attack.name, attack.problem)
