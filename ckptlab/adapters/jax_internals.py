"""JAX's private names, the only ones the course uses: see :mod:`ckptlab.adapters`.

- :func:`array_type`: the concrete class of every ``jax.Array`` (jaxlib's own; ``jax.Array`` is an
  abstract base a class can register with), and the getters of its slots. The grader takes them
  before any learner code runs, so a placement is read through JAX's own code only (see
  ``autograder/wall/codec.py``); public properties (``.sharding``) could be replaced by then.
"""

from __future__ import annotations

ADAPTER = "ckptlab/adapters/jax_internals.py"


def _moved(name: str, exc: BaseException):
    from ckptlab.adapters.errors import moved

    return moved("jax", "jax", name, ADAPTER, exc)


def array_type() -> tuple[type, dict]:
    """(JAX's arrays class, {what: the getter of its slot}): ``sharding``, ``arrays`` (per-device
    buffers) and ``shape`` of an array; ``device`` of a single-device sharding; ``mesh`` and ``spec``
    of a named sharding. Raises :class:`ckptlab.adapters.MovedError` naming what moved."""
    import jax

    try:
        from jax._src.array import ArrayImpl
    except ImportError as exc:
        raise _moved("jax._src.array.ArrayImpl", exc) from exc
    single, named = jax.sharding.SingleDeviceSharding, jax.sharding.NamedSharding
    getters = {}
    for what, cls, slot in (("sharding", ArrayImpl, "_sharding"), ("arrays", ArrayImpl, "_arrays"),
                            ("shape", ArrayImpl, "shape"), ("device", single, "_device"),
                            ("mesh", named, "mesh"), ("spec", named, "spec")):
        try:
            getters[what] = cls.__dict__[slot]
        except KeyError as exc:
            raise _moved(f"{cls.__module__}.{cls.__qualname__}.{slot}", exc) from exc
    return ArrayImpl, getters


def check() -> list[str]:
    """The private names above that the installed JAX lacks (each message names its version)."""
    try:
        cls, getters = array_type()
        import jax.numpy as jnp

        if not isinstance(jnp.zeros(()), cls):
            raise _moved("jax._src.array.ArrayImpl as the class of jnp.zeros(())", TypeError(type(jnp.zeros(()))))
    except ImportError as exc:
        return [str(exc)]
    return []
