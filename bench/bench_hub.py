"""End to end and measured: a class on one real JupyterHub (``python -m autograder hub``).

As root, on this machine: JupyterHub from the course's environment (``pip install '.[hub]'``),
configurable-http-proxy from npm, system users made for the run (and removed after it), Debian's
Chromium through Playwright. Two courses on one hub, one exchange:

- ``course-a``: instructor ``ckh-ia``, learners ``ckh-l1`` (solves Unit 1 right) and ``ckh-l2``
  (one curated wrong answer, the rest right); ``course-b``: instructor ``ckh-ib``, learners
  ``ckh-l3`` and ``ckh-l4``; ``ckh-out`` is a user of the machine in no course.
- Each instructor, in a terminal of their own JupyterLab in the browser, generates and releases
  Unit 1; each learner logs in, fetches it (nbgrader's Assignments panel's own requests, from
  the learner's page), saves their answers, runs the notebook in JupyterLab (each problem's check
  cell shows Correct or not), and submits; ``ckh-l2`` submits again naming ``ckh-l1``
  (nbgrader's ``--student``: refused by the hub, then taken with the course check dropped in
  ``ckh-l2``'s own nbgrader config); the instructor collects, autogrades (the course's grader, no learner
  kernel), generates and releases feedback; each learner fetches their own feedback.
- Checked: the scores in each gradebook (``ckh-l1`` keeps full marks: the submission naming them
  is collected as ``ckh-l2``'s); each learner's feedback is theirs; a learner cannot list
  the exchange's inbound or feedback folders, nor read another learner's home, the instructors'
  course (references, hidden tests) or a course folder; ``ckh-l3`` (course-b) is refused course-a's
  assignment; ``ckh-out`` is refused at login.
- Measured: the time to set up the hub, each server's start (JupyterHub's own log), a learner's
  server's memory (proportional set size, the kernel with 16 devices included), and servers
  started together for 1 to 4 learners.

Screenshots of each role's page go to ``--shots`` (default: a temporary folder, never the
repository), to be looked at by eye. Run, as root: ``python bench/bench_hub.py`` (about 5 minutes
here; the README's "A class on one JupyterHub" gives what it measured).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import registry  # noqa: E402
from ckptlab.twohost import stop_group  # noqa: E402
from tests.learner.test_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - the suite's browser, as it starts it
from tests.nbgrader_work import reference_answers, submit, wrong_answer  # noqa: E402

UNIT = 1
ASSIGNMENT = f"unit{UNIT}"
NOTEBOOK = registry.UNITS[UNIT].notebook
COURSES = {"course-a": ("ckh-ia", ("ckh-l1", "ckh-l2")), "course-b": ("ckh-ib", ("ckh-l3", "ckh-l4"))}
OUTSIDER = "ckh-out"
USERS = [u for ia, ls in COURSES.values() for u in (ia, *ls)] + [OUTSIDER]
WRONG = ("1.2", 0)  # ckh-l2's one wrong answer: a curated one
LOGIN_TIMEOUT_MS = 300_000


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


# --- the machine's users ------------------------------------------------------------------------

def make_users() -> dict[str, str]:
    passwords = {}
    for user in USERS:
        try:
            pwd.getpwnam(user)
            raise SystemExit(f"user {user} already exists: remove it (userdel -r {user}) or run elsewhere")
        except KeyError:
            pass
        run(["useradd", "-m", "-K", "HOME_MODE=0700", "-s", "/bin/bash", user])
        passwords[user] = secrets.token_urlsafe(12)
    run(["chpasswd"], input="".join(f"{u}:{p}\n" for u, p in passwords.items()), text=True)
    return passwords


def remove_users() -> None:
    for user in USERS:
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
    time.sleep(0.5)
    for user in USERS:
        subprocess.run(["userdel", "-r", user], capture_output=True)
    for group in ["ckpt-instructors", *(f"ckpt-{c}" for c in COURSES)]:
        subprocess.run(["groupdel", group], capture_output=True)


def as_user(user: str, *cmd: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, check=check, cwd="/")


def close_secrets() -> dict[Path, int]:
    """This clone's references and hidden tests closed to other users for the run (the hub refuses
    to start where learners could read them); their modes, to put back."""
    modes = {}
    for rel in ("solutions", "autograder/hidden"):
        path = ROOT / rel
        modes[path] = path.stat().st_mode & 0o7777
        path.chmod(modes[path] & ~0o007)
    return modes


def pss_kib(user: str) -> int:
    """The proportional set size of every process of ``user`` (shared pages split between sharers)."""
    total = 0
    uid = pwd.getpwnam(user).pw_uid
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry.path).st_uid != uid:
                continue
            for line in open(f"{entry.path}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


# --- the hub ------------------------------------------------------------------------------------

class Hub:
    def __init__(self, state: Path, port: int, log: Path):
        self.state, self.port, self.log_path = state, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.token = secrets.token_hex(24)
        self.proc = None

    def set_up(self) -> float:
        started = time.monotonic()
        courses = [f"{c}:{ia}:{','.join(ls)}" for c, (ia, ls) in COURSES.items()]
        run([sys.executable, "-m", "autograder", "hub", str(self.state), *sum((["--course", c] for c in courses), []),
             "--port", str(self.port), "--write-only"], cwd=ROOT)
        # The bench's own service: an admin's token to start and stop servers (the course's config has none).
        with open(self.state / "jupyterhub_config.py", "a") as f:
            f.write(f"\nc.JupyterHub.services = [{{'name': 'bench', 'api_token': {self.token!r}}}]\n"
                    "c.JupyterHub.load_roles = [{'name': 'bench', 'services': ['bench'], 'scopes': "
                    "['admin:servers', 'admin:users', 'list:users']}]\n")
        return time.monotonic() - started

    def start(self) -> None:
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(self.state / "jupyterhub_config.py")],
                                     cwd=self.state, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.api("GET", "/")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the hub did not start:\n{self.log_path.read_text()[-3000:]}") from None
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc)
        if self.proc is not None:
            self.log.close()

    def api(self, method: str, path: str, body=None):
        req = urllib.request.Request(f"{self.url}/hub/api{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def ready(self, user: str) -> bool:
        server = self.api("GET", f"/users/{user}").get("servers", {}).get("")
        return bool(server and server.get("ready"))

    def start_times(self) -> dict[str, list[float]]:
        """Each start JupyterHub logged: ``User <name> took <s> seconds to start``."""
        out: dict[str, list[float]] = {}
        for m in re.finditer(r"User (\S+) took ([\d.]+) seconds to start", self.log_path.read_text()):
            out.setdefault(m.group(1), []).append(float(m.group(2)))
        return out


# --- the browser --------------------------------------------------------------------------------

class Session:
    """One user's browser context on the hub (its own cookies)."""

    def __init__(self, browser, hub: Hub, user: str, password: str, shots: Path):
        self.hub, self.user, self.password, self.shots = hub, user, password, shots
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.base = f"{hub.url}/user/{user}"

    def login(self, wait: bool = True):
        page = self.page
        page.goto(f"{self.hub.url}/hub/login")
        page.fill("#username_input", self.user)
        page.fill("#password_input", self.password)
        with page.expect_response(lambda r: "/hub/login" in r.url and r.request.method == "POST") as answer:
            page.click("#login_submit")
        if wait:
            page.wait_for_url(f"**/user/{self.user}/lab**", timeout=LOGIN_TIMEOUT_MS)
            page.wait_for_selector("#jp-main-dock-panel", timeout=LOGIN_TIMEOUT_MS)
        return answer.value

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{self.user}-{name}.png"))

    def _xsrf(self) -> dict:
        # the server's own cookie (the hub sets one for /hub/ too)
        mine = [c["value"] for c in self.context.cookies() if c["name"] == "_xsrf"
                and c["path"].startswith(f"/user/{self.user}")]
        return {"X-XSRFToken": mine[0] if mine else ""}

    def request(self, method: str, path: str, data=None):
        r = self.page.request.fetch(f"{self.base}{path}", method=method, headers=self._xsrf(),
                                    data=None if data is None else json.dumps(data))
        return r

    def put_notebook(self, path: str, nb: dict) -> None:
        r = self.request("PUT", f"/api/contents/{path}", {"type": "notebook", "format": "json", "content": nb})
        assert r.ok, (r.status, r.text()[:500])

    def assignments(self, action: str, course: str, extra: dict | None = None) -> dict:
        """What nbgrader's Assignments panel sends (its server extension, in this user's server)."""
        form = {"course_id": course, "assignment_id": ASSIGNMENT, **(extra or {})}
        r = self.page.request.post(f"{self.base}/assignments/{action}", form=form, headers=self._xsrf())
        assert r.ok, (r.status, r.text()[:500])
        return r.json()

    def listed(self, course: str) -> dict:
        r = self.page.request.get(f"{self.base}/assignments?course_id={course}", headers=self._xsrf())
        assert r.ok, (r.status, r.text()[:500])
        return r.json()

    def terminal(self, command: str, done: Path, timeout: float = 900, ok: bool = True) -> str:
        """``command`` typed into a terminal of this user's JupyterLab; waits for it to write ``done``
        (its exit status) and returns what it wrote to ``done.log``."""
        page = self.page
        page.goto(f"{self.base}/lab")
        page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
        before = page.locator(".jp-Terminal").count()
        page.keyboard.press("Control+Shift+C")  # the command palette
        page.keyboard.type("New Terminal")
        page.keyboard.press("Enter")
        page.wait_for_function(f"document.querySelectorAll('.jp-Terminal').length > {before}", timeout=120_000)
        screen = page.locator(".jp-Terminal:visible .xterm-screen")
        screen.wait_for(timeout=120_000)
        time.sleep(1)  # (the shell's prompt)
        screen.click()
        log = done.with_name(done.name + ".log")
        page.keyboard.type(f"( {command} ) > {log} 2>&1; echo $? > {done}\n")
        deadline = time.monotonic() + timeout
        while not done.exists() or not done.read_text().strip():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.user}'s terminal: {command} ran over {timeout:.0f} s")
            time.sleep(1)
        out = log.read_text(errors="replace") if log.exists() else ""
        assert (done.read_text().strip() == "0") == ok, f"{self.user}: {command} exited {done.read_text()}:\n{out[-3000:]}"
        return out

    def run_notebook(self, path: str, enough, timeout: float = 600) -> list[tuple[str, str]]:
        """The notebook opened in JupyterLab and run whole (Run > Run All Cells, which stops at a
        cell that errors); returns each check shown, ``(status, function)``, once ``enough(checks)``."""
        page = self.page
        page.goto(f"{self.base}/lab/tree/{path}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        time.sleep(3)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        # a check cell's result ("Correct  fn: ...") and a test cell's ("[Correct] 1.1 fn: ...")
        pattern = re.compile(r"^\[?(Correct|Incorrect|Error|Not attempted|Timeout)\]?\s+(?:\d+\.\d+\s+)?(\w+):")
        deadline = time.monotonic() + timeout
        while True:
            texts = page.locator(".jp-OutputArea-output").all_text_contents()  # (cells scrolled away have no layout)
            found = [(m.group(1), m.group(2)) for t in texts if (m := pattern.match(t.strip()))]
            if enough(found):
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.user}: the checks shown after {timeout:.0f} s: {found}")
            time.sleep(2)

    def close(self) -> None:
        self.context.close()


# --- the run ------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=18000)
    parser.add_argument("--shots", type=Path, help="where screenshots go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the hub's folder and the users (to look)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("run as root: the run makes system users and the hub starts servers as them")
    if not Path(CHROMIUM).exists():
        raise SystemExit("no Chromium: apt-get install chromium")
    from playwright.sync_api import sync_playwright

    state = Path(tempfile.mkdtemp(prefix="ckpt-hub-"))
    state.chmod(0o755)
    shots = args.shots or state / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    hub = Hub(state / "hub", args.port, state / "hub.log")
    figures: dict = {}
    started_all = time.monotonic()
    passwords = make_users()
    modes = close_secrets()
    try:
        say("setting up the hub (python -m autograder hub --write-only)")
        figures["set_up_s"] = hub.set_up()
        say(f"set up in {figures['set_up_s']:.0f} s; starting JupyterHub")
        hub.start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            sessions: dict = {}
            try:
                scenario(browser, hub, passwords, shots, figures, sessions)
                measure_concurrency(hub, figures)
            except BaseException:
                for s in sessions.values():
                    try:
                        s.shot("FAILED")
                    except Exception:  # noqa: BLE001 - a page that is gone has nothing to show
                        pass
                raise
            finally:
                browser.close()
    finally:
        hub.stop()
        for path, mode in modes.items():
            path.chmod(mode)
        if not args.keep:
            remove_users()
            shutil.rmtree(state, ignore_errors=True) if not args.shots else shutil.rmtree(state / "hub", True)
    figures["total_s"] = time.monotonic() - started_all
    print(json.dumps(figures, indent=2))
    print(f"screenshots: {shots}" if args.shots or args.keep else "(screenshots removed with the run: --shots DIR keeps them)")
    return 0


def scenario(browser, hub: Hub, passwords: dict, shots: Path, figures: dict, sessions: dict) -> None:
    sessions.update({u: Session(browser, hub, u, passwords[u], shots) for u in USERS})
    # The outsider: a user of this machine, with a right password, in no course.
    answer = sessions[OUTSIDER].login(wait=False)
    assert answer.status == 403, answer.status
    error = sessions[OUTSIDER].page.locator("p.login_error")
    error.wait_for(timeout=30_000)
    assert "Invalid username or password" in error.inner_text(), error.inner_text()
    sessions[OUTSIDER].shot("refused")
    assert "ckh-out" not in [u["name"] for u in hub.api("GET", "/users") if u.get("server")]
    say("the outsider is refused at login (403)")

    # Instructors release Unit 1, in a terminal of their own JupyterLab.
    for course, (instructor, _) in COURSES.items():
        s = sessions[instructor]
        began = time.monotonic()
        s.login()
        figures.setdefault("login_to_lab_s", {})[instructor] = round(time.monotonic() - began, 1)
        s.shot("lab")
        home = Path(pwd.getpwnam(instructor).pw_dir)
        s.terminal(f"cd ~/{course} && nbgrader generate_assignment {ASSIGNMENT} && "
                   f"nbgrader release_assignment {ASSIGNMENT}", home / "release.done")
        assert (hub.state / "exchange" / course / "outbound" / ASSIGNMENT / NOTEBOOK).is_file()
        s.shot("released")
        say(f"{instructor} released {course}/{ASSIGNMENT}")

    # Learners fetch, solve, check and submit.
    source = hub.state / "courses" / "course-a" / "source" / ASSIGNMENT / NOTEBOOK
    right = reference_answers(source)
    memory = {}
    for course, (_, learners) in COURSES.items():
        for learner in learners:
            s = sessions[learner]
            began = time.monotonic()
            s.login()
            figures.setdefault("login_to_lab_s", {})[learner] = round(time.monotonic() - began, 1)
            memory.setdefault("idle_server_mib", {})[learner] = round(pss_kib(learner) / 1024)
            listed = s.listed(course)
            assert listed.get("success"), listed
            assert [a["assignment_id"] for a in listed["value"] if a["status"] == "released"] == [ASSIGNMENT], listed
            fetched = s.assignments("fetch", course)
            assert fetched.get("success"), fetched
            home = Path(pwd.getpwnam(learner).pw_dir)
            released = home / course / ASSIGNMENT / NOTEBOOK
            assert released.is_file(), list(home.rglob("*"))
            answers = dict(right)
            if learner == "ckh-l2":
                answers[WRONG[0]] = wrong_answer(*WRONG)
            solved = submit(released, answers, hub.state / f"{learner}.ipynb")
            s.put_notebook(f"{course}/{ASSIGNMENT}/{NOTEBOOK}", json.loads(solved.read_text()))
            functions = [registry.get(pid).function for pid in right]
            if learner == "ckh-l2":  # Run All stops at 1.2's test cell, which errors (its check cell shows why)
                wrong_fn = registry.get(WRONG[0]).function
                checks = s.run_notebook(f"{course}/{ASSIGNMENT}/{NOTEBOOK}",
                                        lambda found, w=wrong_fn: any(f == w for _, f in found))
                assert {st for st, f in checks if f == wrong_fn} == {"Incorrect"}, checks
                assert all(st == "Correct" for st, f in checks if f != wrong_fn), checks
            else:
                checks = s.run_notebook(f"{course}/{ASSIGNMENT}/{NOTEBOOK}",
                                        lambda found, fs=frozenset(functions): {f for _, f in found} >= fs)
                assert all(st == "Correct" for st, _ in checks), checks
            statuses = [st for st, _ in checks]
            memory.setdefault("server_and_kernel_mib", {})[learner] = round(pss_kib(learner) / 1024)
            s.shot("checked")
            submitted = s.assignments("submit", course)
            assert submitted.get("success"), submitted
            say(f"{learner} fetched, ran ({statuses.count('Correct')}/{len(statuses)} checks Correct) and "
                f"submitted {course}/{ASSIGNMENT}")
    figures["memory"] = memory

    # A learner submits in a classmate's name: the hub refuses it (the server's token cannot read
    # another user); with the course check dropped in their own nbgrader config (one in the folder
    # nbgrader runs from wins), nbgrader takes it, and it must never replace the classmate's work
    # (the scores below: ckh-l1 keeps 45).
    l2 = sessions["ckh-l2"]
    home = Path(pwd.getpwnam("ckh-l2").pw_dir)
    out = l2.terminal(f"nbgrader submit {ASSIGNMENT} --course course-a --student ckh-l1", home / "named.done", ok=False)
    assert "404" in out, out[-2000:]
    l2.terminal("echo 'c.Authenticator.plugin_class = \"nbgrader.auth.NoAuthPlugin\"' > nbgrader_config.py && "
                f"nbgrader submit {ASSIGNMENT} --course course-a --student ckh-l1", home / "forged.done")
    say("ckh-l2 naming ckh-l1: refused by the hub, then submitted with the course check dropped")

    # A learner of course-b is refused course-a's assignment.
    l3 = sessions["ckh-l3"]
    home = Path(pwd.getpwnam("ckh-l3").pw_dir)
    out = l3.terminal(f"nbgrader fetch_assignment {ASSIGNMENT} --course course-a", home / "other.done", ok=False)
    assert "You do not have access to this course" in out, out[-2000:]
    assert not (home / "course-a").exists()
    assert not l3.listed("course-a").get("value"), "course-a listed to a course-b learner"
    say("ckh-l3 (course-b) is refused course-a's assignment")

    # Instructors collect, autograde, generate and release feedback.
    for course, (instructor, learners) in COURSES.items():
        s = sessions[instructor]
        home = Path(pwd.getpwnam(instructor).pw_dir)
        began = time.monotonic()
        out = s.terminal(f"cd ~/{course} && nbgrader collect {ASSIGNMENT} && nbgrader autograde {ASSIGNMENT} && "
                         f"nbgrader generate_feedback {ASSIGNMENT} && nbgrader release_feedback {ASSIGNMENT} && "
                         f"nbgrader export --to grades.csv", home / "grade.done", timeout=1800)
        figures.setdefault("collect_to_feedback_s", {})[course] = round(time.monotonic() - began)
        with open(hub.state / "courses" / course / "grades.csv") as f:
            grades = {row["student_id"]: row for row in csv.DictReader(f)}
        assert sorted(grades) == sorted(learners), (grades, out[-2000:])
        total = sum(p.points for p in registry.PROBLEMS if p.unit == UNIT)
        scores = {learner: float(grades[learner]["score"]) for learner in learners}
        figures.setdefault("scores", {})[course] = scores
        for learner, score in scores.items():
            if learner == "ckh-l2":
                assert score == total - registry.get(WRONG[0]).points, scores
            else:
                assert score == total, scores
        s.shot("graded")
        say(f"{instructor} collected, autograded and released feedback: {scores}")

    # Each learner fetches their own feedback, and cannot reach anyone else's work.
    for course, (instructor, learners) in COURSES.items():
        for learner in learners:
            s = sessions[learner]
            got = s.assignments("fetch_feedback", course)
            assert got.get("success"), got
            home = Path(pwd.getpwnam(learner).pw_dir)
            feedback = list((home / course / ASSIGNMENT / "feedback").rglob("*.html"))
            assert len(feedback) == 1, feedback
            text = feedback[0].read_text()
            shown = re.search(r"\(Score: ([\d.]+) / ([\d.]+)\)</h4>", text)
            assert shown and float(shown.group(1)) == figures["scores"][course][learner], (learner, shown)
            s.page.goto(f"{s.base}/files/{course}/{ASSIGNMENT}/feedback/{feedback[0].parent.name}/{feedback[0].name}")
            s.shot("feedback")
            forbidden(learner, course, instructor, hub.state)
    say("each learner fetched their own feedback; nothing of another's could be read")
    for s in sessions.values():
        s.close()
    figures["start_times_s"] = hub.start_times()


def forbidden(learner: str, course: str, instructor: str, state: Path) -> None:
    """What ``learner`` must not reach, tried as them (a shell as that user)."""
    exchange = state / "exchange" / course
    others = [u for u in USERS if u not in (learner, OUTSIDER)]
    tries = {f"list {exchange}/inbound": ["ls", str(exchange / "inbound")],
             f"list {exchange}/feedback": ["ls", str(exchange / "feedback")],
             "the instructors' course (references, hidden tests)": ["ls", str(state / "instructors" / "course")],
             "a reference": ["cat", str(state / "instructors" / "course" / "solutions" / "unit1.py")],
             "the course folder (source, gradebook)": ["ls", str(state / "courses" / course)],
             "the repository's references": ["cat", str(ROOT / "solutions" / "unit1.py")],
             "the repository's hidden tests": ["cat", str(ROOT / "autograder" / "hidden" / "unit1.py")],
             **{f"{o}'s home": ["ls", pwd.getpwnam(o).pw_dir] for o in others}}
    for what, cmd in tries.items():
        r = as_user(learner, *cmd)
        assert r.returncode != 0 and "Permission denied" in r.stderr, f"{learner} could {what}: {r.stdout[:300]}"
    bundle = state / "learners" / "course"
    assert not (bundle / "solutions").exists() and not list((bundle / "autograder" / "hidden").glob("unit*.py"))
    r = as_user(learner, str(state / "learners" / "env" / "bin" / "python"), "-c", "import solutions")
    assert r.returncode != 0 and "No module named 'solutions'" in r.stderr, r.stderr[-500:]


def measure_concurrency(hub: Hub, figures: dict) -> None:
    """Servers started together for 1 to 4 learners (through the hub's API, as a login does): the
    slowest start, and the learners' memory once all are up."""
    learners = [u for _, ls in COURSES.values() for u in ls]
    out = {}
    for n in range(1, 5):
        for user in learners:
            if hub.ready(user):
                hub.api("DELETE", f"/users/{user}/server")
        while any(hub.ready(u) for u in learners):
            time.sleep(0.5)
        time.sleep(2)
        began = time.monotonic()
        for user in learners[:n]:
            hub.api("POST", f"/users/{user}/server")
        pending = set(learners[:n])
        while pending:
            pending = {u for u in pending if not hub.ready(u)}
            if time.monotonic() - began > 600:
                raise TimeoutError(f"{sorted(pending)} not started in 600 s")
            time.sleep(0.5)
        out[n] = {"all_ready_s": round(time.monotonic() - began, 1),
                  "idle_servers_mib": round(sum(pss_kib(u) for u in learners[:n]) / 1024)}
        say(f"{n} learners' servers started together: all ready in {out[n]['all_ready_s']} s, "
            f"{out[n]['idle_servers_mib']} MiB in all")
    figures["concurrent"] = out


if __name__ == "__main__":
    raise SystemExit(main())
