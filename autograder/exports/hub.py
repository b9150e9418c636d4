"""A class on one machine's JupyterHub: ``python -m autograder hub STATE_DIR --course ID:INSTRUCTORS:LEARNERS``.

Run as root. It writes, under ``STATE_DIR``:

- ``exchange/``: nbgrader's exchange, mode 1777, every course in a folder of its id;
- ``learners/``: the learner bundle (``autograder release``: no references, no hidden tests) and
  an environment of the course's packages with that bundle on its path;
- ``instructors/`` (mode 0750, group ``ckpt-instructors``): a copy of the course, references and
  hidden tests included, and its environment: the grader behind ``nbgrader autograde``;
- ``courses/<id>/``: each course's nbgrader folder (``autograder nbgrader``), group ``ckpt-<id>``
  (its instructors), mode 2770;
- ``jupyter/learners``, ``jupyter/instructors``: each role's Jupyter settings (nbgrader's
  Assignments panel for learners; the instructor tools too for instructors);
- ``proxy/``: configurable-http-proxy from npm, at :data:`PROXY_VERSION`;
- ``jupyterhub_config.py``, then starts JupyterHub on it (``--write-only``: not).

Users log in with their system passwords (PAM) and get a server of their own (JupyterHub's
LocalProcessSpawner: a process as that user, in their home), with 16 simulated CPU devices. Only
the users named in ``--course`` may log in. nbgrader asks JupyterHub which courses a user is in
(its groups ``nbgrader-<id>`` for learners, ``formgrade-<id>`` for instructors).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.exports.nbgrader_course import check_course_id, learners_config

PROXY_VERSION = "5.3.0"  # configurable-http-proxy, from npm: the hub's one pin outside pyproject.toml
INSTRUCTORS_GROUP = "ckpt-instructors"
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_NBGRADER_LAB = "@jupyter/nbgrader"


@dataclass(frozen=True)
class Course:
    id: str
    instructors: tuple[str, ...]
    learners: tuple[str, ...]


def parse_course(text: str) -> Course:
    """``ID:INSTRUCTOR[,INSTRUCTOR...]:LEARNER[,LEARNER...]``, as ``--course`` takes it."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"--course {text!r}: give ID:INSTRUCTORS:LEARNERS (ml-101:ada:bo,cy), user names separated by "
                         "commas")
    cid, instructors, learners = parts[0], _names(parts[1]), _names(parts[2])
    check_course_id(cid)
    if not instructors or not learners:
        raise ValueError(f"--course {text!r}: a course needs at least one instructor and one learner")
    for name in (*instructors, *learners):
        if not _USER.fullmatch(name):
            raise ValueError(f"user name {name!r} in --course {text!r}: a system user's name (lowercase letters, "
                             "digits, '_' and '-')")
    return Course(cid, instructors, learners)


def _names(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def check_class(courses: list[Course]) -> None:
    """Refuse a class this hub cannot keep apart: a course twice, or one user an instructor anywhere
    and a learner anywhere (an instructor's server holds the references)."""
    ids = [c.id for c in courses]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a course named twice: {sorted({i for i in ids if ids.count(i) > 1})}")
    teaching = {n for c in courses for n in c.instructors}
    learning = {n for c in courses for n in c.learners}
    both = sorted(teaching & learning)
    if both:
        raise ValueError(f"{', '.join(both)}: an instructor in one course and a learner in another (or the same); an "
                         "instructor's server holds the references and hidden tests: give them another account to "
                         "learn with")


def roles(courses: list[Course]) -> dict[str, str]:
    """Each user named: ``instructors`` or ``learners``."""
    out = {n: "learners" for c in courses for n in c.learners}
    out.update({n: "instructors" for c in courses for n in c.instructors})
    return out


def groups(courses: list[Course]) -> dict[str, dict]:
    """JupyterHub's groups as nbgrader reads them: ``nbgrader-<id>`` its learners, ``formgrade-<id>``
    its instructors."""
    out = {}
    for c in courses:
        out[f"nbgrader-{c.id}"] = {"users": list(c.learners)}
        out[f"formgrade-{c.id}"] = {"users": list(c.instructors)}
    return out


def missing_users(courses: list[Course]) -> list[str]:
    out = []
    for name in roles(courses):
        try:
            pwd.getpwnam(name)
        except KeyError:
            out.append(name)
    return out


def open_homes(courses: list[Course]) -> list[str]:
    """Users whose home other users can read (a learner's work, an instructor's course)."""
    out = []
    for name in roles(courses):
        home = Path(pwd.getpwnam(name).pw_dir)
        if home.is_dir() and home.stat().st_mode & 0o005:
            out.append(f"{name} ({home}, mode {oct(home.stat().st_mode & 0o777)})")
    return out


def server_config(role: str) -> dict:
    """``jupyter_server_config.json`` of a role: learners get nbgrader's Assignments panel (fetch,
    submit, feedback) and Validate; instructors also the formgrader and the course list."""
    teaching = role == "instructors"
    return {"ServerApp": {"jpserver_extensions": {
        "nbgrader.server_extensions.assignment_list": True,
        "nbgrader.server_extensions.validate_assignment": True,
        "nbgrader.server_extensions.formgrader": teaching,
        "nbgrader.server_extensions.course_list": teaching},
        # A shell that keeps the server's PATH (the role's environment first: nbgrader, python): a
        # login shell, JupyterLab's default, reads /etc/profile, which puts the system's first.
        "terminado_settings": {"shell_command": ["/bin/bash"]}},
        "KernelManager": {"transport_encryption": "auto"}}


def page_config(role: str) -> dict:
    off = {"@jupyterlab/apputils-extension:announcements": True}
    if role == "learners":
        off.update({f"{_NBGRADER_LAB}:{p}": True for p in ("formgrader", "create-assignment", "course-list")})
    return {"disabledExtensions": off}


def nbgrader_config(exchange: Path) -> str:
    """Every server's nbgrader: the shared exchange, and who is in which course asked of JupyterHub."""
    return (learners_config(exchange) +
            "# Which courses a user is in: their JupyterHub groups (nbgrader-<id>, formgrade-<id>).\n"
            "from nbgrader.auth import JupyterHubAuthPlugin\n"
            "c.Authenticator.plugin_class = JupyterHubAuthPlugin\n")


HUB_CONFIG = '''\
# JupyterHub configuration written by `python -m autograder hub`; written anew each time it runs.
import os
import subprocess

c = get_config()  # noqa: F821 - provided by JupyterHub

STATE = {state!r}
ROLES = {roles!r}
ENVIRONMENTS = {environments!r}
LESSONS = {lessons!r}

c.JupyterHub.ip = {ip!r}
c.JupyterHub.port = {port!r}
c.JupyterHub.hub_port = {hub_port!r}
c.JupyterHub.db_url = "sqlite:///" + os.path.join(STATE, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(STATE, "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [os.path.join(STATE, "proxy", "node_modules", ".bin", "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = os.path.join(STATE, "proxy.pid")
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"

# System users and their passwords (PAM); only those the class names may log in.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(ROLES)
# Not JupyterHub's default: a user left in its database by an earlier class, or named in a group
# only, may not log in.
c.Authenticator.allow_existing_users = False
c.Authenticator.admin_users = set()
c.JupyterHub.load_groups = {groups!r}

# A server per user: a process of theirs, in their home (no memory or CPU limits of its own: see
# the README's "A class on one JupyterHub" for what one weighs).
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = c.Spawner.start_timeout = 180  # JAX's import is slow on a small machine
# nbgrader's Assignments panel asks JupyterHub for the user's groups (their courses).
c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", "read:users:groups!user"]


def _lessons(user):
    """A learner's copy of the lessons, ~/lessons, made once as the learner (never overwritten)."""
    home = os.path.expanduser("~" + user)
    if not os.path.exists(os.path.join(home, "lessons")):
        subprocess.run(["runuser", "-u", user, "--", "cp", "-r", LESSONS, os.path.join(home, "lessons")], check=True)


def pre_spawn_hook(spawner):
    role = ROLES[spawner.user.name]
    env = ENVIRONMENTS[role]
    # Instructors: umask 002, so what one writes in their course's folder (its group's) the others can change.
    umask = "002" if role == "instructors" else "022"
    spawner.cmd = ["/bin/sh", "-c", f"umask {{umask}}; exec \\"$0\\" -m jupyterhub.singleuser \\"$@\\"",
                   os.path.join(env, "bin", "python")]
    spawner.environment.update({{
        "PATH": os.path.join(env, "bin") + ":/usr/local/bin:/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": os.path.join(STATE, "jupyter", role),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=16",
        "JAX_PLATFORMS": "cpu",
    }})
    if role == "learners":
        _lessons(spawner.user.name)


c.Spawner.pre_spawn_hook = pre_spawn_hook
'''


def hub_config(state: Path, courses: list[Course], environments: dict[str, str], lessons: Path, *,
               ip: str = "127.0.0.1", port: int = 8000) -> str:
    return HUB_CONFIG.format(state=str(state), roles=roles(courses), environments=environments, lessons=str(lessons),
                             ip=ip, port=port, hub_port=port + 81, proxy_api_port=port + 1, groups=groups(courses))


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def _group(name: str, members: list[str]) -> int:
    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        _run(["groupadd", "--system", name])
        gid = grp.getgrnam(name).gr_gid
    for user in members:
        _run(["usermod", "-a", "-G", name, user])
    return gid


def proxy(state: Path) -> Path:
    """configurable-http-proxy at :data:`PROXY_VERSION`, installed from npm into ``state/proxy``."""
    command = state / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
    if not command.exists():
        if shutil.which("npm") is None:
            raise RuntimeError("JupyterHub's proxy, configurable-http-proxy, comes from npm: install Node.js 20 or "
                               "later (Debian: apt-get install nodejs npm)")
        _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(state / "proxy"),
              f"configurable-http-proxy@{PROXY_VERSION}"], stdout=subprocess.DEVNULL)
    return command


SECRET = ("solutions", "autograder/hidden")  # what no learner may read: the references, the hidden tests


def readable_secrets(roots: list[Path]) -> list[str]:
    """The course's references and hidden tests other users of this machine can reach."""
    from autograder.exports.shared_python import closed_to_users

    return sorted({str(root / s) for root in roots for s in SECRET
                   if (root / s).exists() and not closed_to_users(root / s)})


def set_up(state: Path, courses: list[Course], root: Path, *, port: int = 8000, say=print,
           references_readable: bool = False) -> Path:
    """Everything the hub needs, under ``state``; returns its ``jupyterhub_config.py``."""
    _refuse_what_it_cannot_keep_apart(courses, root, references_readable, say)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)
    exchange = state / "exchange"
    exchange.mkdir(exist_ok=True)
    exchange.chmod(0o1777)
    say(f"exchange: {exchange} (mode 1777: every course in a folder of its id)")
    environments = _environments(state, courses, root, say)
    for role in ("learners", "instructors"):
        folder = state / "jupyter" / role
        (folder / "labconfig").mkdir(parents=True, exist_ok=True)
        (folder / "jupyter_server_config.json").write_text(json.dumps(server_config(role), indent=2) + "\n")
        (folder / "labconfig" / "page_config.json").write_text(json.dumps(page_config(role), indent=2) + "\n")
        (folder / "nbgrader_config.py").write_text(nbgrader_config(exchange))
        for path in [state / "jupyter", folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    for course in courses:
        _course_folder(state, course, exchange, say)
    proxy(state)
    config = state / "jupyterhub_config.py"
    config.write_text(hub_config(state, courses, environments, state / "learners" / "course" / "course", port=port))
    config.chmod(0o600)
    return config


def _refuse_what_it_cannot_keep_apart(courses: list[Course], root: Path, references_readable: bool, say) -> None:
    if os.geteuid() != 0:
        raise PermissionError("the hub starts each user's server as that user: run it as root")
    check_class(courses)
    missing = sorted(missing_users(courses))
    if missing:
        raise ValueError(f"no such user on this machine: {', '.join(missing)} (the hub logs in system users: create "
                         f"each, e.g. useradd -m -K HOME_MODE=0700 NAME, and give a password with passwd)")
    where = readable_secrets([root, Path(__file__).resolve().parents[2]])
    if where and not references_readable:
        raise ValueError(f"every user of this machine can read {', '.join(where)}: a learner with a terminal on the "
                         "hub could read the references and hidden tests. Close them to others (chmod o-rwx on "
                         "each, or chmod 700 on the repository's folder: the hub needs none of it for learners), or "
                         "pass --references-readable to go on anyway")
    if where:
        say(f"warning: every user can read {', '.join(where)} (--references-readable)")
    homes = open_homes(courses)
    if homes:
        raise ValueError(f"home folders other users can read: {'; '.join(homes)}: a learner could read another's "
                         "work there (chmod 700 each)")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        raise RuntimeError("JupyterHub is not installed in the course's environment: pip install '.[hub]'") from None


def _environments(state: Path, courses: list[Course], root: Path, say) -> dict[str, str]:
    """Each role's environment: learners the bundle, instructors the whole course (group-only)."""
    from autograder.exports.release import build_release
    from autograder.exports.shared_python import course_environment

    cache = state / "python"
    learners = state / "learners"
    if not (learners / "course").is_dir():
        build_release(root, learners / "course")
        for folder in [learners / "course", *(learners / "course").rglob("*")]:
            folder.chmod(0o755 if folder.is_dir() else 0o644)
    say(f"learners: the learner bundle in {learners / 'course'} (no references, no hidden tests)")
    course_environment(learners / "env", [learners / "course"], cache)
    say(f"learners: their environment {learners / 'env'}")
    teaching = state / "instructors"
    teaching.mkdir(exist_ok=True)
    gid = _group(INSTRUCTORS_GROUP, sorted({n for c in courses for n in c.instructors}))
    os.chown(teaching, 0, gid)
    teaching.chmod(0o750)
    if not (teaching / "course").is_dir():
        copy_tracked(root, teaching / "course")
    course_environment(teaching / "env", [teaching / "course"], cache)
    say(f"instructors: the whole course and its environment in {teaching} (group {INSTRUCTORS_GROUP}, mode 0750)")
    return {"learners": str(learners / "env"), "instructors": str(teaching / "env")}


def _course_folder(state: Path, course: Course, exchange: Path, say) -> None:
    """The course's nbgrader folder, its instructors' group's alone, linked from each one's home."""
    from autograder.exports.nbgrader_course import write_course

    folder = state / "courses" / course.id
    fresh = not folder.exists()
    write_course(folder, course_id=course.id, exchange=exchange)
    gid = _group(f"ckpt-{course.id}", list(course.instructors))
    if fresh:
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, 0, gid)
            path.chmod(0o2770 if path.is_dir() else 0o660)
    (state / "courses").chmod(0o755)
    for name in course.instructors:
        link = Path(pwd.getpwnam(name).pw_dir) / course.id
        if not link.exists() and not link.is_symlink():
            link.symlink_to(folder)
            os.lchown(link, pwd.getpwnam(name).pw_uid, pwd.getpwnam(name).pw_gid)
    say(f"course {course.id}: {folder} (group ckpt-{course.id}: {', '.join(course.instructors)}), learners "
        f"{', '.join(course.learners)}")


def copy_tracked(root: Path, dest: Path) -> None:
    """The course as git tracks it (no environment, no learner's work), as a fresh clone holds it: for
    the instructors' grader (and the suite's pip route, tests/pip_route.py)."""
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    building = dest.with_name(dest.name + ".part")
    shutil.rmtree(building, ignore_errors=True)
    for rel in filter(None, files.decode().split("\0")):
        src = root / rel
        if src.is_file():
            (building / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, building / rel)
    for path in [building, *building.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    building.rename(dest)


def start(config: Path) -> int:
    """JupyterHub on ``config``, in the foreground, until it is stopped."""
    cmd = [sys.executable, "-m", "jupyterhub", "-f", str(config)]
    return subprocess.run(cmd, cwd=config.parent).returncode
