# `make lab`'s terminals (the JSON beside this holds the other settings): each starts through
# terminal.sh, the learner's shell with this server's Python environment (the course's .venv, or
# the conda environment it runs in) first on PATH once its start-up files have run, so `python`,
# `python -m autograder ...` and `make ...` typed there are the course's.
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - provided by Jupyter
c.ServerApp.terminado_settings = {"shell_command": ["/bin/sh", str(Path(__file__).with_name("terminal.sh")),
                                                    str(Path(sys.prefix) / "bin")]}
