"""Lesson 8's models (``ckptlab.graceful``, ``ckptlab.pipeline``) outside their runs: what they
refuse, and the arithmetic their reports do. Their real runs (signals, hosts, Grain) are checked by
the lesson's own claims in a real kernel (tests/lessons/test_notebooks.py)."""

from __future__ import annotations

import pytest

from ckptlab.graceful import Job, Report, preempt
from ckptlab.pipeline import JobResult, run_job


def test_what_the_models_refuse(tmp_path):
    with pytest.raises(ValueError, match="signal_at is 'step', 'eval' or 'save'"):
        preempt(Job(), tmp_path, signal_at="lunch")
    with pytest.raises(ValueError, match="handler is 'jax', 'flag', 'none' or 'alone'"):
        preempt(Job(handler="pray"), tmp_path)
    with pytest.raises(ValueError, match="exit is 'prompt' or 'teardown'"):
        preempt(Job(exit="later"), tmp_path)
    with pytest.raises(ValueError, match="how is 'grain', 'restart' or 'index'"):
        run_job(tmp_path, hosts=2, steps=1, how="sampler")
    with pytest.raises(ValueError, match="cannot be split over 3 hosts"):
        run_job(tmp_path, hosts=3, steps=1)
    assert list(tmp_path.iterdir()) == []  # refused before a process started or a file was written


def test_a_report_counts_the_steps_a_restart_loses():
    report = Report(handler="flag", signalled=[0], signal_at="step", grace=4.0, sent_at_step=15, exits=[-9, -9],
                    exited_after=[4.0, 4.0], reached=[15, 20], saved=[1, 1], committed=[1], pending=["15.tmp"])
    assert report.resumes_from == 1 and report.lost == 19  # the host that trained on counts
    saved = Report(handler="jax", signalled=[0, 1], signal_at="eval", grace=5.0, sent_at_step=15, exits=[0, 0],
                   exited_after=[1.4, 1.4], reached=[15, 15], saved=[15, 15], committed=[1, 15], pending=[])
    assert saved.lost == 0
    assert Report("none", [0], "step", 3.0, 15, [-15], [0.01], [15], [None], [], []).lost == 15  # no save: all of it


def test_a_jobs_global_batches_gather_every_hosts_share():
    job = JobResult(hosts=2, how="grain", seen=[[[4, 9], [5, 7]], [[10, 22], [13, 20]]], step=2)
    assert job.by_step == [[4, 9, 10, 22], [5, 7, 13, 20]]
    assert job.ids == [4, 9, 10, 22, 5, 7, 13, 20]
    assert job.rows == [[4, 9, 10, 22], [5, 7, 13, 20]]  # host 0's rows, then host 1's: the global batch as laid out
