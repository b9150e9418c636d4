"""What the training-loop problems return, and how their public examples run in the learner's own
process: problem 5.3's run, started again where a run left its folder (and, as the grader does
before a last run, another valid state put in its latest step), and problem 8.3's, sent a real
SIGTERM during an evaluation (:mod:`autograder.wall.grace`). Each is checked from the example's own
arguments, with the rule a run broke named as the grader's messages name it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.wall.returns import ExactArrays, ReturnSpec, exact_arrays_error, is_int, type_name


@dataclass(frozen=True)
class ResumedRun(ReturnSpec):
    """What a run of problem 5.3 returns: ``(params, first_step)``, the parameters (compared bit
    for bit with a run never interrupted, the expected value) and the step this run started
    training from (held by the hidden tests against where the grader saw it should resume)."""

    checks_examples = True

    @property
    def describe(self) -> str:
        return ("a tuple (params, first_step): params a dict from each parameter's path (str) to its value "
                "(np.ndarray), first_step an int")

    def type_error(self, v, detail: bool = True) -> str | None:
        if type(v) is not tuple or len(v) != 2:
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        params, first = v
        bad = exact_arrays_error(params, self.describe, detail)
        if bad:
            return bad
        if isinstance(first, (bool, np.bool_)) or not is_int(first):
            return f"must return {self.describe}: first_step is a {type_name(first, detail)}"
        return None

    def has_nan(self, v) -> bool:
        return False  # compared bit for bit below, NaN included

    def equal(self, actual, expected) -> bool:
        """The parameters only: where a run started is the hidden tests' to check."""
        return ExactArrays().equal(actual[0], expected[0])

    def run_example(self, fn, args, real_args):
        """In a folder a run has already trained in (:class:`~autograder.wall.kinds.RunFolder`'s
        ``left_at``, k): the function first runs there with ``total_steps=k``, to its end, as the
        grader runs it (a notebook cannot kill it), then again with the example's arguments, the run
        started again. The latest committed step between the two calls, where the second must go on
        from, is noted on the path (``left``) for :meth:`check_example`. With the folder's ``plant``,
        another valid state is put in that step before the second call, as the grader does before a
        last run (:func:`plant_step`): only a run that restores it ends where the check computes."""
        from autograder.wall.kinds import RunFolder
        from ckptlab.steps import committed_steps

        folder, path = args[0], real_args[0]
        if isinstance(folder, RunFolder) and folder.left_at:
            fn(path, folder.left_at, *real_args[2:])
            path.left = max(committed_steps(path), default=0)
            if folder.plant and path.left == folder.left_at:
                path.planted = plant_step(path, path.left, int(real_args[1]), int(real_args[2]), folder.plant)
                if path.planted[0]:
                    return None  # the step holds no state to plant in: check_example says so
        return fn(*real_args)

    def check_example(self, args, real_args, got) -> str | None:
        """A public example's run is never killed: in a fresh folder it starts at 0; in a folder a run
        of k steps left (``left_at``), it must go on from step k. Either way it ends as training never
        saved does (:func:`ckptlab.training.uninterrupted_params`, computed in this same process), and
        a resume that ends otherwise is told the rule it broke (the data's position lost, told by
        :func:`ckptlab.training.resumed_without_position`, or the state)."""
        from ckptlab.training import uninterrupted_params

        total, seed = int(args[1]), int(args[2])
        left_at = getattr(args[0], "left_at", 0)
        problem, table = getattr(real_args[0], "planted", (None, None))
        if problem:
            return PLANT_PROBLEMS[problem].format(step=left_at)
        bad = self.type_error(got)
        if bad:
            return bad
        want = table["uninterrupted"] if table is not None else uninterrupted_params(total, seed)
        if set(got[0]) != set(want):
            return "the keys are not the model's parameter paths: return training.params_of(model)"
        first = int(got[1])
        if not left_at:
            if not self.equal(got, (want, 0)):
                return ("the parameters differ from a run of the same steps never interrupted: check the batches "
                        "(one next(batches) per step) and the number of steps")
            if first != 0:
                return f"first_step is {got[1]}, but a run in a fresh folder starts from step 0"
            return None
        at = getattr(real_args[0], "left", None)
        if at != left_at:
            found = f"step {at}" if at else "no committed step"
            return (f"when your function returns, its last step must be committed on disk: after it ran with "
                    f"total_steps {left_at} in a fresh folder, the folder held {found}, not step {left_at}. Save step "
                    "s + 1 after training step s, and wait for the manager (wait_until_finished) before returning")
        return self.resumed_error(got, at, total, seed, want, table)

    def resumed_error(self, got, at: int, total: int, seed: int, want: dict, table: dict | None) -> str | None:
        """What is wrong with a run started again where step ``at`` is the latest committed one (``table``:
        :func:`plant_step`'s, where the check planted a state there), or None."""
        from ckptlab.training import resumed_without_position

        first = int(got[1])
        if first != at:
            if first == 0:
                return (f"a run must go on from the latest committed step ({at} here): restore it (the manager's "
                        "latest_step()) instead of training from step 0, train only the steps that remain, and "
                        "return that step as first_step")
            return (f"first_step is {first}, but a run must go on from the latest committed step ({at} here): "
                    "restore that step, train only the steps that remain, and return it as first_step")
        if table is not None:
            if self.equal(got, (table["final"][at], at)):
                return None
            if self.equal(got, (table["uninterrupted"], at)):
                return (f"your run did not go on from what step {at} holds: before this call the check put another "
                        "valid training state in that step (the grader does so before your last run), and your run "
                        "ended as if it had not. Restore the state and the data's position from the step itself")
            fresh = table["fresh_data"][at]
        elif self.equal(got, (want, at)):
            return None
        else:
            fresh = resumed_without_position(total, seed, at)
        if self.equal(got, (fresh, at)):
            return (f"a resumed run must continue the data where it stopped: this one went on from step {at} with "
                    "a fresh pipeline, which serves epoch 0 again, so it trained on the wrong batches. Save the "
                    "pipeline's position, batches.get_state(), as each step's data item, and after restoring the "
                    "step put it back with batches.set_state(...)")
        ends = "where a run that restores that step ends" if table is not None else "with the parameters of a run never interrupted"
        return (f"resumed from step {at}, the run does not end {ends}: "
                "restore the whole training state (training.load_train_state: the optimizer's moments and step "
                "too, not only the parameters) and the pipeline's position (batches.set_state), then train only "
                "the steps that remain")


# Why the check could not plant a state in a run's step (plant_step's first answer), as 5.3's and 8.3's
# hidden messages say it.
PLANT_PROBLEMS = {
    "not_state": ("your step {step} does not hold the training state after {step} training steps (the check restored "
                  "its `state` item and compared it, leaf by leaf, with training.train_state(model, optimizer) after "
                  "as many steps, as the grader does before your last run): save the whole state after the steps "
                  "finished, under that step's number (a copy of an older save under a new number is not it)"),
    "unreadable": ("the check could not restore the `state` item of your step {step} with Orbax, as the grader does "
                   "before your last run: save real checkpoints, each step holding the two items `state` and `data`"),
}


def plant_step(folder: str, step: int, total: int, seed: int, plant_seed: int) -> tuple[str | None, dict]:
    """Put another valid training state in committed step ``step`` of a run's ``folder``, in this process,
    with the grader's own code (:mod:`autograder.wall.plant`), once its ``state`` item proves to be the
    training state after ``step`` steps. Returns (None, or why not: a key of :data:`PLANT_PROBLEMS`;
    :func:`ckptlab.training.planted_runs`'s table for the run, which says where a run restoring the
    planted state ends)."""
    import os

    from autograder.wall import plant
    from ckptlab.steps import committed_folders
    from ckptlab.training import planted_runs

    table = planted_runs(total, seed, plant_seed)
    name = committed_folders(folder).get(step)
    if name is None or step not in table["planted"]:
        return "not_state", table
    code: dict = {}
    exec(compile(plant.SOURCE, "<autograder.wall.plant>", "exec"), code)  # noqa: S102 - the grader's own code
    got = code[plant.FUNCTION](os.path.join(folder, name), table["planted"][step])
    if not isinstance(got, dict):
        return ("not_state" if got == plant.NOT_A_STATE else "unreadable"), table
    want = table["saved"][step]
    same = set(got["saved"]) == set(want) and all(
        got["saved"][k].dtype == want[k].dtype and got["saved"][k].shape == want[k].shape
        and np.array_equal(got["saved"][k], want[k]) for k in want)
    return (None if same else "not_state"), table


@dataclass(frozen=True)
class GraceRun(ResumedRun):
    """What a run of problem 8.3 returns, as 5.3's. A public example whose folder names a SIGTERM
    (:class:`~autograder.wall.kinds.RunFolder`'s ``("term_eval", k)`` and ``grace``) sends the learner's
    own process a real one during an evaluation (:func:`autograder.wall.grace.signalled_run`), then plants
    another state in the step the run committed (its ``plant``) and calls the function again, as the
    grader does; :meth:`check_example` says which rule the run broke, in the grader's order: the signal
    never sent, the process ended by it, the step saved not the state, the grace window missed, saves
    between the periodic ones, training on, nothing saved, then the resume."""

    def run_example(self, fn, args, real_args):
        from autograder.wall.grace import signalled_run
        from autograder.wall.kinds import RunFolder
        from ckptlab import training

        folder, path = args[0], real_args[0]
        if not (isinstance(folder, RunFolder) and folder.grace and folder.kills):
            with training.evaluations_at_once():  # no signal planned: its evaluations only take time
                return super().run_example(fn, args, real_args)
        path.term = term = signalled_run(fn, real_args, folder.kills[0], folder.grace)
        if not term["sent"] or term["unhandled"] or term["ended"] or not isinstance(term["value"], tuple):
            return term["value"]
        latest = max((s for s, done in term["folders"].items() if done), default=0)
        if folder.plant and latest:
            path.planted = plant_step(path, latest, int(real_args[1]), int(real_args[2]), folder.plant)
        if self.signalled_error(args, term, getattr(path, "planted", (None, None))[0]):
            return term["value"]  # judged by check_example: no second call
        path.left = latest
        with training.evaluations_at_once():
            return fn(*real_args)

    def signalled_error(self, args, term: dict, plant_problem: str | None) -> str | None:
        """What the signalled call broke (the grader's precedence), or None."""
        total, every, evals, grace = int(args[1]), int(args[3]), int(args[4]), args[0].grace
        if not term["sent"]:
            return ("your run ended before the check could send its SIGTERM during an evaluation: evaluate as the "
                    "statement says (training.eval_loss on every batch of training.eval_batches(seed), after step s - 1 "
                    "when s is a multiple of eval_every), and save every save_every steps")
        if term["unhandled"]:
            return ("the SIGTERM reached no handler of yours: in a real process (as the grader runs your function) "
                    "Python's default action ends it at once, whatever it is saving, and the steps since the last save "
                    "are lost. Install a handler (signal.signal(signal.SIGTERM, ...)) that records the signal, then let "
                    "the loop save the steps finished, wait for the commit and return")
        if term["ended"]:
            return (f"your function ended with {term['ended']} after the SIGTERM instead of returning: save the steps "
                    "finished, wait for the commit, and return (params, first_step)")
        if plant_problem:
            return PLANT_PROBLEMS[plant_problem].format(step=max(s for s, done in term["folders"].items() if done))
        if term["after"] > grace:
            return (f"your function returned {term['after']:.1f} s after the SIGTERM: the grader's SIGKILL comes "
                    f"{grace:g} s after it, so your run would have been killed first. After a SIGTERM the loop must stop "
                    "whatever it is doing (an evaluation lasts longer than the window: look at the signal inside it "
                    "too), save, wait for the commit and return")
        before = term["before"]
        at = before // evals * evals + evals  # the step the evaluation the SIGTERM met follows
        committed = sorted(s for s, done in term["folders"].items() if done)
        latest = max(committed, default=0)
        allowed = set(range(every, total + 1, every)) | {total} | ({latest} if latest > before else set())
        extra = [s for s in committed if s not in allowed]
        if extra:
            return (f"your run committed step{'s' if len(extra) > 1 else ''} {', '.join(map(str, extra))}, neither "
                    "periodic saves nor the step saved on the SIGTERM: save every save_every steps and the last step "
                    "only (each save costs time), plus one save when the SIGTERM comes")
        if latest > at:
            return (f"after the SIGTERM your run went on training and committed step {latest}; it had finished step {at} "
                    "when the signal came, during the evaluation after it: stop where the run stands, whatever it is "
                    "doing, and save the steps finished then")
        if latest <= before:
            if any(not done for s, done in term["folders"].items() if s > before):
                return ("your function returned while its save after the SIGTERM was still under way: a real process "
                        "ends with your function, and the commit dies with it. Wait for it to commit "
                        "(wait_until_finished) before returning")
            return (f"the SIGTERM came during the evaluation after step {at}, which no save held, and your run returned "
                    f"without committing step {at}: on a SIGTERM save the steps finished (force the save: it is not a "
                    "periodic step, and a manager with save_interval_steps skips it silently), then wait for the commit")
        return None

    def check_example(self, args, real_args, got) -> str | None:
        from ckptlab.training import uninterrupted_params

        term = getattr(real_args[0], "term", None)
        if term is None:
            return super().check_example(args, real_args, got)
        problem, table = getattr(real_args[0], "planted", (None, None))
        bad = self.signalled_error(args, term, problem)
        if bad:
            return bad
        bad = self.type_error(got)
        if bad:
            return bad
        total, seed = int(args[1]), int(args[2])
        want = table["uninterrupted"] if table is not None else uninterrupted_params(total, seed)
        if set(got[0]) != set(want):
            return "the keys are not the model's parameter paths: return training.params_of(model)"
        return self.resumed_error(got, real_args[0].left, total, seed, want, table)
