"""Where learner code runs, and the wall around it. The trust boundary of the grader:

- :mod:`~autograder.sandbox.inside` is the only code that runs learner code; it runs in the worker
  process, inside the jail, and nothing it says is trusted.
- :mod:`~autograder.sandbox.jail` builds that jail from kernel mechanisms (Landlock, seccomp,
  namespaces, resource limits) in the worker before any learner code runs: Landlock's rules in
  :mod:`~autograder.sandbox.landlock`, seccomp's filters in :mod:`~autograder.sandbox.seccomp`,
  the C library's calls they make in :mod:`~autograder.sandbox.syscalls`; at the strict level
  with namespaces the worker is pid 2 of its pid namespace, under the minimal init of
  :mod:`~autograder.sandbox.pid1` (forwarding signals, reaping orphans), so that its signals act as
  on any machine.
- :mod:`~autograder.sandbox.wire` carries bounded frames between the two sides.
- The grader's side, one concern a module: :mod:`~autograder.sandbox.worker` starts workers,
  feeds them cases, checks their frames, counts what they read, and kills them;
  :mod:`~autograder.sandbox.levels` is the isolation levels and what each holds learner code to
  here; :mod:`~autograder.sandbox.proctree` reads a worker's processes from /proc;
  :mod:`~autograder.sandbox.cgroups` makes a root grader's cgroups for each worker;
  :mod:`~autograder.sandbox.folders` makes, measures and removes its folders;
  :mod:`~autograder.sandbox.endings` says in words how a worker ended before learner code ran;
  :mod:`~autograder.sandbox.environment` is its environment and the zygote's
  (:mod:`~autograder.sandbox.zygote`, which strict workers are forked from);
  :mod:`~autograder.sandbox.trusted` runs the course's own code in a worker, as a learner's is run.

Everything else in :mod:`autograder` judges and never runs learner code.

The grader's public names are this package's (``from autograder import sandbox``, then
``sandbox.Worker``), each loaded from its module on first use: a worker's own process imports this
package for its jail before the jail is on, and must load nothing else then.
"""

import importlib

_PUBLIC = {
    "autograder.sandbox.worker": ("Worker", "RunResult", "IsolationUnavailable", "strict_missing", "strict_namespaces",
                                  "namespaces_refused"),
    "autograder.sandbox.levels": ("Isolation", "STRICT", "BASIC", "AUTO", "NO_CODE_RAN", "resolve", "guarantees",
                                  "concurrent_workers_fair"),
    "autograder.sandbox.folders": ("new_workdir", "remove_folder", "scratch_over"),
    "autograder.sandbox.environment": ("start_zygote", "zygote_env", "worker_xla_flags"),
    "autograder.sandbox.proctree": ("tree_rchar", "namespace_pids"),
    "autograder.sandbox.landlock": ("landlock_status", "STRICT_LANDLOCK_ABI"),
    "autograder.sandbox.jail": ("limit",),
    "autograder.sandbox.cgroups": ("container_limits", "oom_kills"),
    "autograder.sandbox.endings": ("start_failure",),
    "autograder.limits": ("DEFAULT_TIMEOUT", "DEFAULT_MEMORY", "DEFAULT_FILE_BYTES", "WALL_FACTOR", "SCRATCH_BYTES",
                          "SCRATCH_INODES"),
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    """A public name, from its module (not kept here: a test that patches it there is heard here
    too); else a module of this package, imported (``sandbox.jail``)."""
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
