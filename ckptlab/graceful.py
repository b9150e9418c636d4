"""Preemption as clusters deliver it (Lesson 8): a SIGTERM, a grace window, then SIGKILL, sent to a
training job of real processes, one per host, joined by ``jax.distributed`` on localhost.

    from ckptlab.graceful import Job, preempt
    report = preempt(Job(handler="jax", hosts=2), folder, signal_at="eval", grace=3.0)
    report.saved, report.committed, report.lost     # what each host saved, what committed, steps lost

Each host trains (a step is ``step_s`` of work on its state), evaluates every ``eval_every`` steps
(``eval_s`` of work, checking nothing), and hands every step to Orbax's ``CheckpointManager``, which
saves every ``save_every`` steps. How it answers a SIGTERM is its ``handler``:

- ``"jax"``: nothing of its own. ``jax.distributed`` starts JAX's preemption notifier, which catches
  the SIGTERM and, through the coordination service, agrees with every host on one step to save at
  (the largest step any host has reached, plus one: ``multihost_utils.reached_preemption_sync_point``);
  ``CheckpointManager.save`` saves at that step (its ``PreemptionCheckpointingPolicy``) and
  ``reached_preemption(step)`` tells the loop to wait for the save and exit. The notifier's thread
  looks at the signal's flag once a second (XLA's ``preemption_notifier.cc``, ``kListenInterval``),
  so the hosts agree up to a second (plus a step) after the SIGTERM.
- ``"flag"``: a plain Python handler (``signal.signal``) sets a flag the training loop checks after
  each step; the host that sees it saves at its own step and exits.
- ``"none"``: no handler; a single process, as a script without ``jax.distributed`` runs, ended by
  the SIGTERM's default action at once.
- ``"alone"``: the ``"jax"`` loop in a single process without ``jax.distributed`` (as problem 8.3's
  runs), with a handler that only notes the SIGTERM, so that the process lives on to show what
  ``reached_preemption`` says then: JAX has no sync point without its distributed client.

How a host ends once its last save committed is its ``exit``: ``"prompt"``, as a production job
ends (the manager closed, the log closed, then ``os._exit(0)``: no interpreter teardown), or
``"teardown"`` (``sys.exit(0)``: atexit handlers, then every module and JAX's runtime freed), the
control. Each host logs ``exit`` once its last save committed; the process's end after that line
is the exit's time (``Report.exit_s``).

The scheduler (:func:`preempt`, in this process) waits until host 0 logs the moment asked for
(``"step"``: a training step begins; ``"eval"``: an evaluation begins; ``"save"``: a periodic save
begins), sends SIGTERM to the hosts asked for (GKE sends it to every pod of a job; a maintenance
event may reach one), waits ``grace`` seconds, then SIGKILLs whatever still runs. Every time here
is measured from outside, by the scheduler and by each host's log of what it did when.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

_HOST = r"""
import json, os, signal, sys, time
job = json.loads(sys.argv[1])
from ckptlab.devices import prepare_environment

prepare_environment(job["devices_per_host"])
import jax

if job["handler"] in ("jax", "flag"):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{job['port']}", num_processes=job["hosts"], process_id=job["host"],
                               initialization_timeout=120)
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

logging.set_verbosity(logging.ERROR)
log = open(job["log"], "a")


def say(event, **kw):
    log.write(json.dumps({"t": time.time(), "event": event, **kw}) + "\n")
    log.flush()


flag = {}
if job["handler"] in ("flag", "alone"):
    signal.signal(signal.SIGTERM, lambda *_: flag.setdefault("at", time.time()))


def work(seconds):  # compute, not sleep: a signal handler in Python runs between bytecodes
    end = time.time() + seconds
    while time.time() < end:
        pass


def leave(step, why):
    say("exit", step=step, why=why)  # the step is committed: from here on the process only has to end
    if job["exit"] == "teardown":  # the control: the interpreter's teardown (atexit handlers, threads, modules)
        sys.exit(0)
    manager.close()  # its saves committed, its threads stopped: nothing for os._exit to cut short
    log.close()  # the last line written (os._exit flushes no buffer)
    os._exit(0)  # no teardown: the process ends now


manager = ocp.CheckpointManager(job["folder"], options=ocp.CheckpointManagerOptions(
    save_interval_steps=job["save_every"]))
state = {"w": np.zeros((job["rows"], 256), np.float32), "step": np.int64(0)}
say("ready")
for step in range(1, job["steps"] + 1):
    say("step", step=step)
    work(job["step_s"])
    state["w"] = state["w"] + 1.0
    state["step"] = np.int64(step)
    if step % job["eval_every"] == 0:
        say("eval", step=step)
        work(job["eval_s"])
        say("eval_done", step=step)
    started = time.time()
    if job["handler"] == "alone" and "at" in flag and "noted" not in flag:
        say("sigterm", at=flag["at"])  # the handler only noted it; the loop goes on as "jax"'s does
        flag["noted"] = True
    if job["handler"] == "flag" and "at" in flag:
        say("save", step=step, why="flag")
        manager.save(step, args=ocp.args.StandardSave(state), force=True)
        manager.wait_until_finished()
        say("saved", step=step, seconds=time.time() - started, began=started, why="flag")
        leave(step, "flag")
    if step % job["save_every"] == 0:
        say("save", step=step, why="periodic")  # announced: the scheduler may signal during it
    if manager.save(step, args=ocp.args.StandardSave(state)):  # asks reached_preemption(step) itself
        manager.wait_until_finished()
        why = "periodic" if step % job["save_every"] == 0 else "first" if step == 1 else "preemption"
        say("saved", step=step, seconds=time.time() - started, began=started, why=why)
    if job["handler"] in ("jax", "alone") and manager.reached_preemption(step):
        leave(step, "preemption")
say("exit", step=job["steps"], why="done")
"""


@dataclass
class Job:
    """A training job: its hosts, how it answers a SIGTERM, and the time its parts take."""

    handler: str = "jax"  # "jax", "flag", "none" or "alone" (see the module's text)
    hosts: int = 2
    steps: int = 200
    step_s: float = 0.05  # a training step's work
    eval_every: int = 15
    eval_s: float = 1.0  # an evaluation's work, during which nothing is checked
    save_every: int = 20  # the periodic saves
    rows: int = 1024  # the state: rows x 256 float32 (1 MiB at 1,024 rows)
    devices_per_host: int = 2
    exit: str = "prompt"  # after the last commit: "prompt" (close the manager, os._exit) or "teardown" (sys.exit)


@dataclass
class Report:
    """What the scheduler and each host's log saw."""

    handler: str
    signalled: list  # the hosts sent SIGTERM
    signal_at: str  # the moment asked for
    grace: float
    sent_at_step: int  # host 0's step when SIGTERM was sent
    exits: list  # each host's exit code (-9: SIGKILLed at the grace window's end; -15: ended by SIGTERM)
    exited_after: list  # seconds from SIGTERM to each host's end (the grace window, for one killed)
    reached: list  # each host's last step begun
    saved: list  # each host's last committed save, by its log (None: none)
    committed: list  # the step folders Orbax committed, after the job ended
    pending: list  # step folders a save left uncommitted
    save_s: list = field(default_factory=list)  # each committed save's seconds (save and wait), every host's
    preemption_saves: list = field(default_factory=list)  # per host, the step it saved for the preemption, or None
    noticed_after: list = field(default_factory=list)  # per host, seconds from SIGTERM to the check that began that save
    committed_after: list = field(default_factory=list)  # per host, seconds from SIGTERM to that save's commit
    exit_s: list = field(default_factory=list)  # per host, seconds from its last log line ("exit") to its end, or None
    noted_after: list = field(default_factory=list)  # per host, seconds from SIGTERM to its handler ("alone"), or None
    events: list = field(default_factory=list, repr=False)  # per host, its log: (seconds from the SIGTERM, event, step)

    @property
    def resumes_from(self) -> int:
        return max(self.committed, default=0)

    @property
    def lost(self) -> int:
        """The steps a restart loses: those reached beyond the newest committed step."""
        return max(self.reached) - self.resumes_from


def _events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def preempt(job: Job, folder, signal_at: str = "step", grace: float = 3.0, signal_hosts=None,
            after: int = 14, timeout: float = 120.0) -> Report:
    """Run ``job`` in ``folder`` (its checkpoints in ``folder/ckpt``), send SIGTERM to
    ``signal_hosts`` (default: every host) when host 0 begins its first ``signal_at`` ("step",
    "eval" or "save") after step ``after``, SIGKILL what still runs ``grace`` seconds later, and
    report. The folder is the caller's to remove."""
    from ckptlab.twohost import free_port

    if signal_at not in ("step", "eval", "save"):
        raise ValueError(f"signal_at is 'step', 'eval' or 'save', not {signal_at!r}")
    if job.handler not in ("jax", "flag", "none", "alone"):
        raise ValueError(f"handler is 'jax', 'flag', 'none' or 'alone', not {job.handler!r}")
    if job.exit not in ("prompt", "teardown"):
        raise ValueError(f"exit is 'prompt' or 'teardown', not {job.exit!r}")
    hosts = 1 if job.handler in ("none", "alone") else job.hosts
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(JAX_PLATFORMS="cpu", PYTHONSAFEPATH="1",  # as ckptlab.twohost starts its hosts
               PYTHONPATH=os.pathsep.join(filter(None, (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")))))
    procs = []
    for h in range(hosts):
        spec = {**job.__dict__, "hosts": hosts, "host": h, "port": port, "folder": str(folder / "ckpt"),
                "log": str(folder / f"host{h}.log")}
        procs.append(subprocess.Popen([sys.executable, "-c", _HOST, json.dumps(spec)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    targets = list(range(hosts)) if signal_hosts is None else [h for h in signal_hosts if h < hosts]
    try:
        deadline, sent, step = time.time() + timeout, None, 0
        while sent is None:
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the job never reached a {signal_at} after step {after} (host logs in {folder})")
            for e in _events(folder / "host0.log"):
                if e["event"] == "step":
                    step = e["step"]
                if e["event"] == signal_at and e.get("step", 0) > after and (signal_at != "save" or e["why"] == "periodic"):
                    for h in targets:
                        procs[h].send_signal(signal.SIGTERM)
                    sent = time.time()
                    break
            time.sleep(0.005)
        ended = [None] * hosts
        while time.time() < sent + grace and any(p.poll() is None for p in procs):
            for h, p in enumerate(procs):
                if ended[h] is None and p.poll() is not None:
                    ended[h] = time.time() - sent
            time.sleep(0.005)
        for h, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
                ended[h] = grace
            elif ended[h] is None:
                ended[h] = time.time() - sent
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    logs = [_events(folder / f"host{h}.log") for h in range(hosts)]
    ckpt = folder / "ckpt"
    names = sorted(os.listdir(ckpt)) if ckpt.exists() else []
    save_s = [round(e["seconds"], 3) for ev in logs for e in ev if e["event"] == "saved"]
    last = [next((e for e in ev if e["event"] == "saved" and e["why"] in ("preemption", "flag")), None) for ev in logs]
    left = [next((e["t"] for e in ev if e["event"] == "exit"), None) for ev in logs]
    return Report(
        handler=job.handler, signalled=targets, signal_at=signal_at, grace=grace, sent_at_step=step,
        exits=[p.returncode for p in procs], exited_after=[round(x, 3) for x in ended],
        reached=[max((e["step"] for e in ev if e["event"] == "step"), default=0) for ev in logs],
        saved=[max((e["step"] for e in ev if e["event"] == "saved"), default=None) for ev in logs],
        committed=sorted(int(n) for n in names if n.isdigit()),
        pending=[n for n in names if not n.isdigit()], save_s=save_s,
        events=[[(round(e["t"] - sent, 3), e["event"], e.get("step")) for e in ev] for ev in logs],
        preemption_saves=[e and e["step"] for e in last],
        noticed_after=[e and round(e["began"] - sent, 3) for e in last],
        committed_after=[e and round(e["t"] - sent, 3) for e in last],
        exit_s=[None if t is None or p.returncode != 0 else round(sent + end - t, 3)
                for t, p, end in zip(left, procs, ended)],
        noted_after=[next((round(e["at"] - sent, 3) for e in ev if e["event"] == "sigterm"), None) for ev in logs])


__all__ = ["Job", "Report", "preempt"]
