"""``python -m autograder hub``'s pieces that need no running hub: the class it accepts, the
JupyterHub and nbgrader settings it writes, and the learners' environment (no references, no
hidden tests). The hub itself, with its proxy, system users and a browser, is run end to end by
``bench/bench_hub.py`` (the README's "A class on one JupyterHub" gives its time)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.exports import hub

ROOT = Path(__file__).resolve().parents[2]
COURSES = [hub.parse_course("course-a:ia:l1,l2"), hub.parse_course("course-b:ib,ic:l3")]


@pytest.mark.parametrize("text, says", [
    ("course-a", "ID:INSTRUCTORS:LEARNERS"),
    ("two words:ia:l1", "course id"),
    ("c::l1", "at least one instructor"),
    ("c:ia:", "at least one instructor and one learner"),
    ("c:Ada:l1", "system user"),
    ("c:ia:l1;rm -rf", "system user"),
])
def test_a_course_it_cannot_use_is_refused_saying_how_to_write_it(text, says):
    with pytest.raises(ValueError, match=says):
        hub.parse_course(text)


def test_an_instructor_is_never_also_a_learner_and_a_course_is_named_once():
    with pytest.raises(ValueError, match="holds the references"):
        hub.check_class([*COURSES, hub.parse_course("course-c:zed:ia")])
    with pytest.raises(ValueError, match="holds the references"):
        hub.check_class([hub.parse_course("course-c:ia:ia")])
    with pytest.raises(ValueError, match="named twice"):
        hub.check_class([*COURSES, hub.parse_course("course-a:zed:yan")])
    hub.check_class(COURSES)


def _config() -> dict:
    text = hub.hub_config(Path("/srv/hub"), COURSES, {"learners": "/srv/hub/learners/env",
                                                      "instructors": "/srv/hub/instructors/env"},
                          Path("/srv/hub/learners/course/course"), port=8123)

    class Section(dict):
        def __getattr__(self, name):
            return self.setdefault(name, Section())

        def __setattr__(self, name, value):
            self[name] = value

    c = Section()
    namespace = {"get_config": lambda: c}
    exec(compile(text, "jupyterhub_config.py", "exec"), namespace)
    return c, namespace


def test_only_the_class_may_log_in_each_in_the_groups_nbgrader_reads():
    c, _ = _config()
    assert c.Authenticator.allowed_users == {"ia", "ib", "ic", "l1", "l2", "l3"}
    assert c.Authenticator.allow_existing_users is False  # JupyterHub's default would admit any user it has seen
    assert c.Authenticator.admin_users == set()
    assert c.JupyterHub.load_groups == {"nbgrader-course-a": {"users": ["l1", "l2"]},
                                        "formgrade-course-a": {"users": ["ia"]},
                                        "nbgrader-course-b": {"users": ["l3"]},
                                        "formgrade-course-b": {"users": ["ib", "ic"]}}
    assert "read:users:groups!user" in c.Spawner.server_token_scopes  # nbgrader asks for the user's courses
    assert c.JupyterHub.authenticator_class == "pam" and c.JupyterHub.spawner_class == "localprocess"
    assert (c.JupyterHub.ip, c.JupyterHub.port) == ("127.0.0.1", 8123)


def test_each_role_gets_its_environment_and_settings_and_16_devices():
    c, namespace = _config()

    class Spawner:
        def __init__(self, name):
            self.user = type("User", (), {"name": name})()
            self.environment, self.cmd = {}, None

    namespace["_lessons"] = lambda user: None  # (copies the lessons into the learner's home, as them)
    for name, role in (("l1", "learners"), ("ib", "instructors")):
        s = Spawner(name)
        c.Spawner.pre_spawn_hook(s)
        assert s.cmd[-1] == f"/srv/hub/{role}/env/bin/python" and "jupyterhub.singleuser" in s.cmd[2]
        assert s.environment["JUPYTER_CONFIG_PATH"] == f"/srv/hub/jupyter/{role}"
        assert s.environment["PATH"].startswith(f"/srv/hub/{role}/env/bin:")
        assert s.environment["XLA_FLAGS"] == "--xla_force_host_platform_device_count=16"
        assert ("umask 002" in s.cmd[2]) == (role == "instructors")
    learners, instructors = hub.server_config("learners"), hub.server_config("instructors")
    on = learners["ServerApp"]["jpserver_extensions"]
    assert on["nbgrader.server_extensions.assignment_list"] and not on["nbgrader.server_extensions.formgrader"]
    assert instructors["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"]
    assert "@jupyter/nbgrader:formgrader" in hub.page_config("learners")["disabledExtensions"]
    assert "@jupyter/nbgrader:formgrader" not in hub.page_config("instructors")["disabledExtensions"]
    config = hub.nbgrader_config(Path("/srv/hub/exchange"))
    assert "JupyterHubAuthPlugin" in config and "path_includes_course = True" in config
    assert "course_id" not in config  # a learner sees every course they belong to


@pytest.fixture(scope="module")
def shared_python_cache(tmp_path_factory):
    """Where the course's interpreter is copied for other users (once for this module's tests)."""
    return tmp_path_factory.mktemp("shared-python")


def test_the_learners_environment_has_the_packages_but_not_the_references_or_hidden_tests(tmp_path,
                                                                                         shared_python_cache):
    """The course's own environment has the whole repository on its path (an editable install):
    the learners' one takes its third-party packages and only the folders it is given."""
    from autograder.exports.shared_python import course_environment

    bundle = tmp_path / "bundle"
    (bundle / "ckptlab").mkdir(parents=True)
    (bundle / "ckptlab" / "__init__.py").write_text("WHERE = 'bundle'\n")
    python = course_environment(tmp_path / "env", [bundle], shared_python_cache)
    code = ("import importlib.util, nbgrader, jupyterhub.singleuser, ckptlab\n"
            "print(ckptlab.WHERE, [m for m in ('solutions', 'autograder') if importlib.util.find_spec(m)])")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["bundle", "[]"], run.stdout
    assert not list((tmp_path / "env").rglob("__editable__*"))
    nbgrader = (tmp_path / "env" / "bin" / "nbgrader").read_text()
    assert nbgrader.startswith(f"#!{python}\n")
    assert sys.executable not in nbgrader


def test_references_or_hidden_tests_other_users_can_read_are_found():
    """The hub refuses to start where a learner with a terminal could read them (unless told)."""
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # (pytest's own temp folders sit in one closed to others)
    try:
        repo = folder / "repo"
        for rel in hub.SECRET:
            (repo / rel).mkdir(parents=True)
        folder.chmod(0o755)
        repo.chmod(0o755)
        assert hub.readable_secrets([repo]) == sorted(str(repo / rel) for rel in hub.SECRET)
        (repo / "solutions").chmod(0o750)
        assert hub.readable_secrets([repo]) == [str(repo / "autograder" / "hidden")]
        repo.chmod(0o700)  # the repository closed: nothing inside is reachable
        assert hub.readable_secrets([repo]) == []
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_non_editable_course_install_lends_learners_none_of_its_packages(tmp_path, shared_python_cache):
    """Where the course was installed with ``pip install .`` (not editable), its site-packages holds
    ``solutions/`` and ``autograder/hidden/`` themselves: the learners' environment takes none of the
    course's packages, only the third-party ones, whatever the install."""
    import tomllib

    from autograder.exports import shared_python

    site = tmp_path / "course-site"
    for rel in ("solutions/unit1.py", "autograder/hidden/unit1.py", "ckptlab/__init__.py", "thirdparty/__init__.py",
                "sharded_checkpointing_course-0.1.0.dist-info/RECORD"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("SECRET = 1\n")
    (site / "__editable__.sharded_checkpointing_course-0.1.0.pth").write_text("import x\n")
    shared_python.course_environment(tmp_path / "env", [], shared_python_cache, site_packages=site)
    linked = tmp_path / "env" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    assert sorted(p.name for p in linked.iterdir() if p.name != "ckpt_course.pth") == ["thirdparty"]
    # the course's packages, as pyproject.toml names them, are those kept out
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(p.rstrip("*") for p in packages) == sorted(shared_python.COURSE_PACKAGES)
