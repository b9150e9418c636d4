"""Orbax's private names, the only ones the course uses: see :mod:`ckptlab.adapters`.

- :func:`replica_slices`: which device writes which slice of an array when Orbax saves it (its own
  ``get_replica_slices``, replica-parallel or not): the lessons and the explorer ask Orbax itself.
- :func:`read_box_bytes`: the bytes Orbax reserves against ``restore_concurrent_gb`` for one read (its
  ``estimate_read_memory_footprint``: the chunk-aligned box around the target shard).
- :func:`index_domain_to_byte_runs` and :func:`partition_runs`: Orbax v1's safetensors helpers
  (the byte runs of an index domain; runs coalesced into reads).
- :func:`initialize_distributed_to_device_ids`: the call Orbax's emergency (multi-tier)
  ``CheckpointManager`` needs after ``jax.distributed.initialize`` on processes that are not TPU or GPU
  slices (its own error names it: ``Please call initialize_distributed_to_device_ids()``).
"""

from __future__ import annotations

ADAPTER = "ckptlab/adapters/orbax_internals.py"


def _moved(name: str, exc: BaseException):
    from ckptlab.adapters.errors import moved

    return moved("orbax-checkpoint", "orbax-checkpoint", name, ADAPTER, exc)


def _private(module_name: str, *names: str):
    """The private module ``module_name``, its ``names`` looked up now: a move is named here, with the
    installed version and this adapter, not mid-lesson."""
    import importlib

    try:
        module = importlib.import_module(module_name)
        for name in names:
            getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise _moved(f"{module_name}." + (names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"), exc) from exc
    return module


def _replica_slices_module():
    return _private("orbax.checkpoint._src.serialization.replica_slices", "get_replica_slices")


def replica_slices(arr, replica_parallel: bool = True):
    """Orbax's own replica slices of ``arr`` (``get_replica_slices(arr, replica_id=0, ...)``): its
    ``.replica_slices`` each have ``unsliced_data`` (the device buffer), ``index`` (the global
    slices it covers) and ``slice_args`` (None, or the part of that buffer this replica writes:
    ``axis``, ``start_index``, ``limit_index``)."""
    return _replica_slices_module().get_replica_slices(arr, 0, replica_parallel)


def _serialization():
    return _private("orbax.checkpoint._src.serialization.serialization", "estimate_read_memory_footprint")


def read_box_bytes(store, domain) -> int:
    """Bytes Orbax reserves to read ``domain`` of the TensorStore ``store`` (in ``store``'s dtype)."""
    return int(_serialization().estimate_read_memory_footprint(store, domain))


def _safetensors_layout():
    return _private("orbax.checkpoint.experimental.v1._src.layout.safetensors_layout", "index_domain_to_byte_runs", "_partition_runs")


def index_domain_to_byte_runs(bounds, global_shape, itemsize, tensor_base):
    """Orbax's byte runs ``[(offset, length)]`` of the index domain ``bounds`` (per dimension
    ``(start, stop)``) in a row-major tensor of ``global_shape`` starting at ``tensor_base``."""
    return _safetensors_layout().index_domain_to_byte_runs(bounds, global_shape, itemsize, tensor_base)


def partition_runs(runs, max_over_read_ratio: float, min_coalesce_gap: int = 4096):
    """Orbax's coalescing of sorted byte ``runs`` into reads (its ``_partition_runs``): each read has
    ``.start`` and ``.end``."""
    return _safetensors_layout()._partition_runs(runs, max_over_read_ratio, min_coalesce_gap)


def _multihost():
    return _private("orbax.checkpoint._src.multihost.multihost", "initialize_distributed_to_device_ids")


def initialize_distributed_to_device_ids() -> None:
    """Record, through JAX's coordination service, which device ids each process holds (every process
    calls it, after ``jax.distributed.initialize``): the emergency ``CheckpointManager``'s local tier
    and its restore ask for this map and refuse to start without it."""
    _multihost().initialize_distributed_to_device_ids()


def check() -> list[str]:
    """The private names above that the installed Orbax lacks (each message names its version)."""
    problems = []
    for find in (_replica_slices_module, _serialization, _safetensors_layout, _multihost):
        try:
            find()
        except ImportError as exc:
            problems.append(str(exc))
    return problems
