"""The stack the course is pinned to, read from its one source: ``pyproject.toml``, as installed (the
distribution's metadata, so the same in a clone and in Gradescope's installed copy). What the
Gradescope ``setup.sh``, the nbgrader course's README and the checks of ``README.md`` and
``environment.yml`` (tests/house/test_stack.py) say comes from here."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata

DISTRIBUTION = "sharded-checkpointing-course"
# The names the course's texts give the pinned libraries, in the order they are listed.
NAMES = {"jax": "JAX", "jaxlib": "jaxlib", "flax": "Flax", "orbax-checkpoint": "Orbax", "tensorstore": "TensorStore",
         "optax": "optax", "safetensors": "safetensors", "numpy": "NumPy", "nbgrader": "nbgrader",
         "jupyterlab": "JupyterLab", "matplotlib": "matplotlib"}


@lru_cache(maxsize=1)
def pins() -> dict[str, str]:
    """{distribution: exact version} of every dependency the course pins (the test extras left out)."""
    out = {}
    for requirement in metadata.requires(DISTRIBUTION) or ():
        if "extra ==" in requirement:
            continue
        name, _, version = requirement.partition("==")
        out[name.split("[")[0].strip().lower()] = version.split(";")[0].strip()  # moto[s3]: the distribution moto
    return out


@lru_cache(maxsize=1)
def pythons() -> tuple[str, ...]:
    """The Python minor versions the course runs on, oldest first (from Requires-Python, e.g.
    '>=3.12,<3.14' -> ('3.12', '3.13'))."""
    spec = metadata.metadata(DISTRIBUTION)["Requires-Python"] or ""
    low = re.search(r">=\s*3\.(\d+)", spec)
    high = re.search(r"<\s*3\.(\d+)", spec)
    if not (low and high):
        raise ValueError(f"pyproject.toml's requires-python should read '>=3.X,<3.Y', not {spec!r}")
    return tuple(f"3.{m}" for m in range(int(low.group(1)), int(high.group(1))))


def newest_python() -> str:
    """The Python a new environment is built with where there is a choice (Colab's, today's)."""
    return pythons()[-1]


def describe() -> str:
    """One line: 'Python 3.12 or 3.13, JAX 0.12.0.1, Flax 0.12.12, ...' (the pinned libraries by name)."""
    pinned = pins()
    libraries = ", ".join(f"{label} {pinned[name]}" for name, label in NAMES.items() if name in pinned)
    return f"Python {' or '.join(pythons())}, {libraries}"
