"""The platforms instructors grade on, emulated on this machine with the kernel's own mechanisms.

Run as ``python tests/platforms.py PLATFORM [--user UID] -- PROGRAM ARGS...``: sets up what that
platform takes away, then execs the program (as root, or as the user ``UID``):

- ``native``: nothing taken away (``--user`` alone: an unprivileged user on this machine);
- ``docker-default``: Docker's defaults: its capability set (no CAP_SYS_ADMIN, CAP_SYS_PTRACE,
  CAP_SYS_RESOURCE...), the cgroup file system read-only, and a seccomp filter that refuses new
  namespaces (``unshare``; Docker's default profile refuses it to containers without
  CAP_SYS_ADMIN) and ``mount``;
- ``no-userns``: only new namespaces refused (Ubuntu 24.04's AppArmor rule for normal users, or
  ``user.max_user_namespaces=0``).

A cap on the Landlock ABI the grader uses is a separate, test-only switch
(``CKPT_TEST_LANDLOCK_ABI``), passed in the environment.

``user_python(folder)`` makes an interpreter an unprivileged user can run: a virtual environment
of the machine's own Python (or, where the machine's is of another version, of a copy of the
course's, made readable: :func:`autograder.exports.shared_python.shared_interpreter`) whose site-packages point at this course's
(the course's own interpreter may sit in root's home, which no other user can read).
"""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from autograder.exports import shared_python

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ("native", "docker-default", "no-userns")
USER = 4242  # an uid with no account: nothing of it on this machine but what a test makes

# Docker's default capabilities (moby's oci/caps/defaults.go)
DOCKER_CAPS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7,
               "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27,
               "AUDIT_WRITE": 29, "SETFCAP": 31}
PR_CAPBSET_DROP = 24
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 1 << 18


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _ok(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _cgroups_read_only(libc) -> None:
    """In a mount namespace of this process's own: every cgroup mount read-only, as Docker mounts them."""
    _ok(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    _ok(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "private mounts")
    mounts = [line.split()[4] for line in open("/proc/self/mountinfo").read().splitlines()]
    for point in sorted(m for m in mounts if m == "/sys/fs/cgroup" or m.startswith("/sys/fs/cgroup/")):
        _ok(libc.mount(None, point.encode(), None, ctypes.c_ulong(MS_REMOUNT | MS_BIND | MS_RDONLY), None),
            f"read-only {point}")


def _docker_capabilities(libc) -> None:
    for cap in range(64):
        if cap not in DOCKER_CAPS.values() and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 \
                and ctypes.get_errno() != errno.EINVAL:
            _ok(-1, "dropping a capability")


def _refuse(libc, names: dict) -> None:
    from autograder.sandbox import seccomp, syscalls

    _ok(libc.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    seccomp.install(seccomp.program(names, guard_pdeathsig=False, forbid_file_maps=False), libc)


def main(argv: list[str]) -> int:
    platform, rest = argv[0], argv[1:]
    user = None
    if rest[:1] == ["--user"]:
        user, rest = int(rest[1]), rest[2:]
    assert rest[:1] == ["--"] and platform in PLATFORMS, __doc__
    program = rest[1:]
    libc = _libc()
    sys.path.insert(0, str(ROOT))
    from autograder.sandbox import jail  # noqa: F401 - now: as another user, root's Python cannot load it
    if platform == "docker-default" and os.geteuid() == 0:
        _cgroups_read_only(libc)
        _docker_capabilities(libc)
    if user is not None:
        os.setgroups([])
        os.setresgid(user, user, user)
        os.setresuid(user, user, user)  # every capability goes with root's uid
    if platform in ("docker-default", "no-userns"):
        _refuse(libc, {"unshare": errno.EPERM, "mount": errno.EPERM, "setns": errno.EPERM})
    os.execv(program[0], program)
    return 127


def user_python(folder: Path) -> str:
    """A Python that the user :data:`USER` can run, with this course's packages importable."""
    python = folder / "bin" / "python"
    if not python.exists():
        base = shared_python.shared_interpreter(folder.parent / "ckpt-shared-python")
        subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        # the course's site-packages (its .pth files too: the editable install's), as a site folder
        (site / "ckpt_course.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return str(python)


def user_can_run_here() -> str:
    """Why the hostile suite cannot run as :data:`USER` here ('' when it can)."""
    if os.geteuid() != 0:
        return "needs root, to become another user"
    cannot = shared_python.can_share()
    if cannot:
        return cannot
    closed = shared_python.closed_to_users(ROOT)
    if closed:
        return closed
    if not os.stat(sysconfig.get_paths()["purelib"]).st_mode & 0o005:
        return "the course's site-packages is closed to other users"
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
