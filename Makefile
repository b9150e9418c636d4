# One command per job, on a fresh clone: each target builds .venv from pyproject.toml when it is
# missing or older than pyproject.toml.
# The Python .venv is built with: PYTHON=/path/to/python3.13, or the newest 3.13 or 3.12 found on PATH,
# under pyenv or uv (tools/find_python.sh says what to install when there is none).
PYTHON ?=
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
STAMP  := $(VENV)/.installed
# nbgrader runs `alembic` (and Jupyter finds its kernels) through PATH.
export PATH := $(BIN):$(PATH)
export JAX_PLATFORMS := cpu

LAB_ARGS ?=
# Containers often run as root, which Jupyter refuses unless told.
ROOT_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root)
PYTEST_ARGS ?=

.PHONY: help lab check progress practice drill test bench platforms venv clean

help:
	@echo "make lab    - open the course in JupyterLab (start with course/00_start_here.ipynb)"
	@echo "make check  - grade your work in problems/ with the hidden tests (UNIT=2 or ONLY=2.5,3.1: only those)"
	@echo "make progress - where you stand: per unit and problem (grading, practice, notebook checks and hints, drills)"
	@echo "make practice - a timed set of problems you have not mastered, or due for review (MINUTES=30 UNIT= DIFFICULTY=easy CATEGORY=orbax)"
	@echo "make drill  - quick-fire numeric questions with worked answers, from the units you studied (UNIT=4)"
	@echo "make test   - run the project's test-suite"
	@echo "make bench  - speed and memory benchmarks: grading, isolation, shard reads, nbgrader, class memory, budgets, Gradescope's container, lessons (alone, then with both cores kept busy), the checkpoint tool's inspect and plan"
	@echo "make platforms - (root) the hostile suite in a real Docker container, default seccomp, as root and a user"

$(STAMP): pyproject.toml
	@python="$$(PYTHON='$(PYTHON)' VENV_PYTHON='$(VENV)/bin/python' sh tools/find_python.sh)" && "$$python" tools/setup_env.py $(VENV) -e ".[test]"
	@touch $(STAMP)

venv: $(STAMP)

# jupyter_config/ (first on JUPYTER_CONFIG_PATH) opens course/00_start_here.ipynb, keeps nbgrader's
# instructor tools off and the log to warnings, and starts each terminal through
# jupyter_config/terminal.sh: at the top of the repository, the learner's shell with .venv/bin
# first on PATH after their start-up files, so `python` and `make` there are the course's (and
# VIRTUAL_ENV names it); `env -u` keeps make's own variables out of those terminals.
lab: $(STAMP)
	@echo "Starting JupyterLab on course/00_start_here.ipynb (stop it with Ctrl-C, twice)."
	@env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS -u MAKEOVERRIDES VIRTUAL_ENV="$(CURDIR)/$(VENV)" \
	  JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter_config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" $(ROOT_ARGS) $(LAB_ARGS)

# UNIT=2 (or 2,3) and ONLY=2.5,3.1 grade only those problems; each result is printed as it comes.
UNIT ?=
ONLY ?=
check: $(STAMP)
	@$(BIN)/python -m autograder grade problems/ $(if $(UNIT),--unit $(UNIT)) $(if $(ONLY),--only $(ONLY))

progress: $(STAMP)
	@$(BIN)/python -m autograder progress

MINUTES ?= 30
DIFFICULTY ?=
CATEGORY ?=
practice: $(STAMP)
	@$(BIN)/python -m autograder practice --minutes $(MINUTES) $(if $(UNIT),--unit $(UNIT)) \
	  $(if $(DIFFICULTY),--difficulty $(DIFFICULTY)) $(if $(CATEGORY),--category $(CATEGORY))

drill: $(STAMP)
	@$(BIN)/python -m autograder drill $(if $(UNIT),--unit $(UNIT))

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/bench_grading.py
	$(BIN)/python bench/bench_isolation.py
	$(BIN)/python bench/bench_shard_reads.py
	$(BIN)/python bench/bench_nbgrader.py --learners 16
	$(BIN)/python bench/bench_batch_memory.py
	$(BIN)/python bench/bench_budgets.py
	$(BIN)/python bench/bench_similarity.py
	$(BIN)/python bench/bench_container.py
	$(BIN)/python bench/bench_lessons.py
	$(BIN)/python bench/bench_lessons.py --load 2
	$(BIN)/python bench/bench_inspector.py

platforms: $(STAMP)
	bash bench/platforms.sh

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
