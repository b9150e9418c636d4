"""A worker's folders on the grader's side: its work folder, made fresh and removed whatever the
worker left in it (and those a grader killed outright left), and its scratch folder's size,
measured where it has no tmpfs of its own.
"""

from __future__ import annotations

import os
import re
import tempfile
from functools import cache

from autograder.limits import SCRATCH_DEPTH


def new_workdir(on_disk: bool = False) -> str:
    """A fresh directory for one worker; it is removed when the worker is done (its name holds this
    grader's pid: one a grader killed outright leaves is removed by the next, see
    :func:`sweep_orphaned_workdirs`). ``on_disk``: for a memory-measured worker, off a tmpfs where
    the machine has a disk folder (see :func:`ckptlab.memory.measured_tempdir`)."""
    prefix = f"ckpt-worker-{os.getpid()}-"
    if on_disk:
        from ckptlab.memory import measured_tempdir

        folder = measured_tempdir(prefix)
    else:
        folder = tempfile.mkdtemp(prefix=prefix)
    sweep_orphaned_workdirs(os.path.dirname(folder))
    return folder


_WORKDIR_NAME = re.compile(r"ckpt-worker-(\d+)-[^/]+")


@cache
def sweep_orphaned_workdirs(parent: str) -> int:
    """Remove, once per grader and folder, the worker folders a grader killed outright (SIGKILL, the
    OOM killer) left in ``parent``: those of this uid named after a process that no longer runs. A
    live grader's (another's too) are kept: its process answers. How many were removed."""
    removed = 0
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    for name in names:
        match = _WORKDIR_NAME.fullmatch(name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        path = os.path.join(parent, name)
        try:
            if os.lstat(path).st_uid != os.geteuid():
                continue
            os.kill(int(match.group(1)), 0)
            continue  # its grader runs
        except ProcessLookupError:
            removed += remove_folder(path)
        except OSError:
            continue  # another user's process (EPERM): running
    return removed


def scratch_over(top: str, max_bytes: int, max_inodes: int) -> bool:
    """Whether the folder ``top`` holds more than ``max_bytes`` (of disk blocks) or ``max_inodes``
    files and folders, or folders nested deeper than :data:`SCRATCH_DEPTH`. Walked depth first by
    descriptors, never following a link: at most two descriptors per level are open, however many
    folders the worker makes (its folders cannot exhaust this grader's descriptors, nor hide bytes
    in folders the walk could not open). Stops as soon as it is over."""
    seen, used = set(), 0
    try:
        root = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    stack = []  # (folder descriptor, its scandir iterator), one per level
    try:
        stack.append((root, os.scandir(root)))
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_ino not in seen:  # a hard link's blocks count once
                seen.add(st.st_ino)
                used += st.st_blocks * 512
                if used > max_bytes or len(seen) > max_inodes:
                    return True
            if entry.is_dir(follow_symlinks=False):
                if len(stack) >= SCRATCH_DEPTH:
                    return True
                try:
                    child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    continue  # removed since it was listed
                except OSError:
                    return True  # a folder the grader cannot measure is not given the benefit of the doubt
                try:
                    stack.append((child, os.scandir(child)))
                except OSError:
                    os.close(child)
                    return True
    except OSError:
        return True
    finally:
        for fd, entries in stack:
            entries.close()
            os.close(fd)
    return False


def remove_folder(top: str) -> bool:
    """Remove the folder ``top`` and everything in it, whatever a worker left there: no recursion
    and no path longer than a name (each folder met is first moved up to be a child of ``top``,
    under a name no worker can guess, so a chain nested thousands deep is removed one level at a
    time), at most two descriptors open, no link followed, and a folder its worker made unreadable
    or unwritable (``mkdir(mode=0o300)``) given back its owner's rights first (the grader's uid, or
    root's). Never raises: returns whether ``top`` is gone (a file that could not be removed stays
    and is logged as the grader's own concern, never charged to a learner)."""
    import secrets
    import stat as stat_

    try:
        st = os.lstat(top)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat_.S_ISDIR(st.st_mode):
        try:
            os.unlink(top)
            return True
        except OSError:
            return False
    token = f".ckpt-removing-{secrets.token_hex(8)}-"
    try:
        root = _opened(top, None)
    except OSError:
        return False
    try:
        _empty_tree(root, token)
    finally:
        os.close(root)
    try:
        os.rmdir(top)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _opened(name: str, parent: int | None) -> int:
    """A descriptor on the folder ``name`` (in the folder ``parent`` is open on), never through a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except PermissionError:  # made unreadable: its owner (or root) gives its rights back
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, flags, dir_fd=parent)


def _empty_tree(root: int, token: str) -> None:
    """Remove everything in the folder open on ``root``, one folder at a time: each folder met deeper
    down moved up into it first (named ``token`` and a count), then emptied and removed."""
    moved = iter(range(1 << 62))
    pending: list[str | None] = [None]  # None: top itself; else a folder moved up into it
    while pending:
        name = pending.pop()
        try:
            fd = root if name is None else _opened(name, root)
        except FileNotFoundError:
            continue
        except OSError:
            continue
        try:
            _empty_folder(fd, name, root, token, moved, pending)
        finally:
            if fd != root:
                os.close(fd)
        if name is not None:
            try:
                os.rmdir(name, dir_fd=root)
            except OSError:
                pass


def _empty_folder(fd: int, name: str | None, root: int, token: str, moved, pending: list) -> None:
    """Empty the folder open on ``fd`` (``name`` in ``root``; None: ``root`` itself) of its files; each
    folder in it is added to ``pending``, moved up into ``root`` first where it is not there already."""
    import stat as stat_

    try:
        os.chmod(fd, 0o700)  # listable, and its entries removable
    except OSError:
        pass
    try:
        names = os.listdir(fd)
    except OSError:
        names = []
    for entry in names:
        try:
            is_dir = stat_.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode)
        except OSError:
            continue
        try:
            if not is_dir:
                os.unlink(entry, dir_fd=fd)
            elif name is None:
                pending.append(entry)
            else:
                up = f"{token}{next(moved)}"
                os.rename(entry, up, src_dir_fd=fd, dst_dir_fd=root)
                pending.append(up)
        except OSError:
            continue
