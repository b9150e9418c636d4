"""An interactive shard-placement explorer for JupyterLab: ``from ckptlab.explore import explore``.

Choose a global shape, a dtype, a mesh of up to 16 devices and a PartitionSpec, and see at once
who holds what (and its replicas), the chunk files Orbax writes and which device writes each, the
bytes written per device and per host, and, for a second (target) mesh and spec, the saved chunks
each target device reads and the bytes a restore reads against the bytes it needs (whole chunks are
read: Unit 3 names that ratio the read amplification; Lesson 2 uses the explorer before it, so the
explorer says it in words and names the term as Unit 3's).

Every number comes from the real libraries, computed by the two functions below that the
explorer calls: :func:`placement` asks JAX's ``NamedSharding`` who holds what and Orbax's own
replica slices who writes what, on a real array on the course's devices; :func:`restore_reads`
intersects the target devices' slices (again from JAX) with the saved chunk grid. The test suite
checks both against real Orbax saves and TensorStore reads. An invalid choice shows the error
JAX raises, word for word, instead of a figure.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tempfile
from pathlib import Path

import numpy as np

from ckptlab import layout

MAX_DEVICES = 16
DTYPES = ("float32", "bfloat16", "float16", "int8", "float8_e4m3fn")
# The explorer really places the array on the devices (Orbax needs a real one); replicas are real
# copies, so the bytes held over all devices are bounded.
MAX_HELD_BYTES = 256 * 2**20


class ChoiceError(ValueError):
    """A choice the explorer cannot read (the text says what to type instead)."""


# ----------------------------------------------------------------------------------- parsing
def parse_shape(text: str) -> tuple[int, ...]:
    parts = [p for p in re.split(r"[\s,()x×]+", str(text).strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ChoiceError(f"shape {text!r}: type whole numbers separated by commas, e.g. 64, 32")
    shape = tuple(int(p) for p in parts)
    if len(shape) > 2 or min(shape) < 1:
        raise ChoiceError(f"shape {text!r}: the explorer draws 1-D and 2-D arrays of positive sizes, e.g. 64, 32")
    return shape


def parse_mesh(text: str) -> dict[str, int]:
    """:func:`ckptlab.layout.parse_mesh` (the checkpoint tool's grammar too), on the course's 16 devices at most."""
    try:
        mesh = layout.parse_mesh(text)
    except ValueError as exc:
        raise ChoiceError(str(exc)) from None
    if math.prod(mesh.values()) > MAX_DEVICES:
        raise ChoiceError(f"mesh {text!r} needs {math.prod(mesh.values())} devices; the course has {MAX_DEVICES}")
    return mesh


def parse_spec(text: str) -> tuple:
    """``'x', None`` or ``x, None`` or ``('x', 'y')`` -> a PartitionSpec's entries."""
    text = str(text).strip()
    if text.startswith("P(") and text.endswith(")"):
        text = text[2:-1]
    quoted = re.sub(r"(?<!['\"\w])([A-Za-z_]\w*)(?!['\"\w])", lambda m: m.group(1) if m.group(1) == "None" else repr(m.group(1)), text)
    try:
        entries = ast.literal_eval(f"({quoted},)") if quoted else ()
    except (ValueError, SyntaxError):
        raise ChoiceError(f"spec {text!r}: type one entry per dimension, each None, an axis or a tuple of axes, "
                          "e.g. 'x', None or ('x', 'y')") from None
    for e in entries:
        if not (e is None or isinstance(e, str) or (isinstance(e, tuple) and all(isinstance(a, str) for a in e))):
            raise ChoiceError(f"spec {text!r}: {e!r} is not None, an axis name or a tuple of axis names")
    return tuple(entries)


def spec_text(spec) -> str:
    return "P(" + ", ".join(repr(e) for e in spec) + ")"


# ------------------------------------------------------------------------------------ numbers
def placement(global_shape, dtype, mesh_shape, spec, devices_per_host=None, replica_parallel=True) -> dict:
    """What a save of this array does, from JAX and Orbax themselves.

    Returns ``shard_shape``, ``domains`` (device -> index domain it holds), ``holders`` (index
    domain -> devices, replicas together), ``writers`` (device -> index domain it writes),
    ``chunk_shape``, ``chunk_files`` (file name -> writing device), ``bytes_per_device``,
    ``bytes_per_host`` (with ``devices_per_host``), ``bytes_written`` and ``array_bytes``.
    Raises what JAX raises for an invalid choice.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    from ckptlab.adapters.orbax_internals import replica_slices

    global_shape = tuple(int(n) for n in global_shape)
    dtype = jnp.dtype(dtype)
    mesh = layout.course_mesh(mesh_shape)
    sharding = NamedSharding(mesh, PartitionSpec(*spec))
    shard_shape = tuple(sharding.shard_shape(global_shape))
    held = math.prod(shard_shape) * dtype.itemsize * mesh.size
    if held > MAX_HELD_BYTES:
        raise ChoiceError(f"this choice holds {held / 2**20:,.0f} MiB over the devices (replicas are real copies); "
                          f"the explorer allows {MAX_HELD_BYTES // 2**20} MiB: choose a smaller shape")
    domains = {d.id: tuple(sl.indices(n)[:2] for sl, n in zip(index, global_shape))
               for d, index in sharding.devices_indices_map(global_shape).items()}
    holders: dict = {}
    for d, dom in sorted(domains.items()):
        holders.setdefault(dom, []).append(d)
    array = jax.make_array_from_callback(global_shape, sharding,
                                         lambda index: np.zeros(shard_shape, dtype))
    writers, per_device = {}, {d: 0 for d in domains}
    for rs in replica_slices(array, replica_parallel).replica_slices:
        (device,) = rs.unsliced_data.devices()
        domain = tuple(sl.indices(n)[:2] for sl, n in zip(rs.index, global_shape))
        writers[device.id] = domain
        per_device[device.id] += math.prod(b - a for a, b in domain) * dtype.itemsize
    del array
    chunk_shape = tuple(b - a for a, b in next(iter(writers.values())))
    chunk_files = {}
    for device, domain in sorted(writers.items()):
        index = tuple(a // c for (a, _), c in zip(domain, chunk_shape))
        chunk_files[layout.chunk_name(index)] = device
    out = {
        "global_shape": global_shape, "dtype": dtype.name, "mesh": dict(mesh_shape), "spec": tuple(spec),
        "shard_shape": shard_shape, "domains": domains, "holders": holders,
        "replicas": len(next(iter(holders.values()))), "writers": writers, "chunk_shape": chunk_shape,
        "chunk_files": dict(sorted(chunk_files.items())), "bytes_per_device": per_device,
        "bytes_written": sum(per_device.values()), "array_bytes": math.prod(global_shape) * dtype.itemsize,
    }
    if devices_per_host:
        hosts: dict = {}
        for d, n in per_device.items():
            hosts[d // int(devices_per_host)] = hosts.get(d // int(devices_per_host), 0) + n
        out["bytes_per_host"] = hosts
    return out


def restore_reads(global_shape, chunk_shape, mesh_shape, spec, devices_per_host: int = 1) -> dict:
    """The saved chunks each target device overlaps (a chunk is read whole), from the target's index
    domains in JAX: ``chunks_read`` (device -> sorted chunk grid positions); ``read_amplification``,
    bytes read / bytes needed with one read per chunk per host of ``devices_per_host`` devices (the
    least a restore reads; Lesson 3 measures Orbax at or above it); and
    ``no_sharing_amplification``, with every device reading alone (the most)."""
    domains = layout.real_index_domains(tuple(global_shape), mesh_shape, spec)
    chunks_read = {device: layout.chunks_overlapped(domain, chunk_shape) for device, domain in domains.items()}
    per_chunk = math.prod(chunk_shape)

    def amplification(per_host: int) -> float:
        read = needed = 0
        for host in {device // per_host for device in domains}:
            mine = [device for device in domains if device // per_host == host]
            read += len({c for device in mine for c in chunks_read[device]}) * per_chunk
            needed += sum(math.prod(b - a for a, b in dom) for dom in {tuple(map(tuple, domains[d])) for d in mine})
        return read / needed

    return {"domains": domains, "chunks_read": chunks_read, "read_amplification": amplification(int(devices_per_host)),
            "no_sharing_amplification": amplification(1), "devices_per_host": int(devices_per_host)}


def save_for_real(global_shape, dtype, mesh_shape, spec, replica_parallel=True, directory=None) -> dict:
    """Save the array with Orbax (one file per chunk, zarr 2, uncompressed) and return
    ``{chunk file name: size in bytes}`` and the ``chunks`` recorded in its ``.zarray``."""
    import json

    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    sharding = NamedSharding(layout.course_mesh(mesh_shape), PartitionSpec(*spec))
    size = math.prod(global_shape)
    array = jax.device_put(jnp.arange(size, dtype=jnp.float32).reshape(global_shape).astype(dtype), sharding)
    path = Path(directory or tempfile.mkdtemp(prefix="explore-")) / "saved"
    handlers = ocp.type_handlers.create_type_handler_registry(
        (jax.Array, ocp.type_handlers.ArrayHandler(use_replica_parallel=replica_parallel)))
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=False, use_compression=False,
                                          type_handler_registry=handlers)
    with ocp.Checkpointer(handler) as ckpt:
        ckpt.save(path, args=ocp.args.PyTreeSave({"a": array}))
    folder = path / "a"
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if not p.name.startswith(".")}
    return {"path": str(path), "files": files, "chunks": tuple(json.loads((folder / ".zarray").read_text())["chunks"])}


# ------------------------------------------------------------------------------------- widget
def human_bytes(n: float) -> str:
    from ckptlab.plotting import human_bytes as human

    return human(n)


class Explorer:
    """The widget: ``explore()`` makes one. ``widgets`` holds the controls by name, ``numbers``
    what the last redraw computed, ``error`` the text shown instead of a figure (or None), and
    ``image``/``table`` the widgets showing the figure and the numbers."""

    def __init__(self, shape="64, 32", dtype="float32", mesh="x=4, y=2", spec="'x', None",
                 target_mesh="x=16", target_spec="'x'", devices_per_host=4, replica_parallel=True):
        import ipywidgets as w

        text = dict(continuous_update=False, style={"description_width": "initial"},
                    layout=w.Layout(width="220px"))
        self.widgets = {
            "shape": w.Text(value=str(shape).strip("()"), description="global shape", **text),
            "dtype": w.Dropdown(options=DTYPES, value=dtype, description="dtype", layout=w.Layout(width="200px")),
            "mesh": w.Text(value=mesh, description="mesh", **text),
            "spec": w.Text(value=spec, description="spec P(...)", **text),
            "devices_per_host": w.BoundedIntText(value=devices_per_host, min=1, max=MAX_DEVICES,
                                                 description="devices per host", **text),
            "replica_parallel": w.Checkbox(value=replica_parallel, description="replica-parallel save"),
            "target_mesh": w.Text(value=target_mesh, description="target mesh", **text),
            "target_spec": w.Text(value=target_spec, description="target spec P(...)", **text),
        }
        self.status = w.HTML()
        self.note = w.HTML("<small>Text boxes apply when you press Enter or leave the box.</small>")
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self.table = w.HTML()
        self.real = w.HTML()
        self.button = w.Button(description="Save it for real", tooltip="save with Orbax and list the files")
        self.button.on_click(lambda _: self.save_for_real())
        self.numbers: dict = {}
        self.error: str | None = None
        self.redraws = 0
        for widget in self.widgets.values():
            widget.observe(lambda _: self.update(), names="value")
        v = self.widgets
        self.box = w.VBox([
            w.HBox([v["shape"], v["dtype"], v["mesh"], v["spec"]]),
            w.HBox([v["devices_per_host"], v["replica_parallel"], v["target_mesh"], v["target_spec"]]),
            w.HBox([self.note, self.status]), self.image, self.table, w.HBox([self.button]), self.real,
        ])
        self.update()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)

    def choice(self) -> dict:
        v = {k: w.value for k, w in self.widgets.items()}
        return {"shape": parse_shape(v["shape"]), "dtype": v["dtype"], "mesh": parse_mesh(v["mesh"]),
                "spec": parse_spec(v["spec"]), "devices_per_host": int(v["devices_per_host"]),
                "replica_parallel": bool(v["replica_parallel"]), "target_mesh": parse_mesh(v["target_mesh"]),
                "target_spec": parse_spec(v["target_spec"])}

    def update(self):
        """Recompute every number and redraw; an invalid choice shows its error instead."""
        self.real.value = ""
        try:
            c = self.choice()
            saved = placement(c["shape"], c["dtype"], c["mesh"], c["spec"], c["devices_per_host"], c["replica_parallel"])
        except ChoiceError as e:
            self._show_error(str(e))
        except Exception as e:  # what JAX raises, word for word
            self._show_error(f"{type(e).__name__}: {e}")
        else:
            self.status.value = "<i>drawing...</i>"  # a redraw takes seconds: say so while it runs
            try:  # a wrong target leaves the save drawn, and says what is wrong with the target
                target, target_error = restore_reads(c["shape"], saved["chunk_shape"], c["target_mesh"],
                                                     c["target_spec"], c["devices_per_host"]), None
            except ChoiceError as e:
                target, target_error = None, f"target: {e}"
            except Exception as e:  # noqa: BLE001 - JAX's own words
                target, target_error = None, f"target: {type(e).__name__}: {e}"
            self.error = target_error
            self.numbers = {"saved": saved, "target": target, "choice": c}
            self.image.value = self._figure(c, saved, target, target_error)
            self.table.value = self._table(c, saved, target, target_error)
            self.status.value = ""
        self.redraws += 1

    def _show_error(self, message: str):
        import html

        self.error = message
        self.numbers = {}
        self.image.value = b""
        self.table.value = ("<div style='color:#cf222e; font-family:monospace; white-space:pre-wrap'>"
                            f"{html.escape(message)}</div>")

    def _figure(self, c, saved, target, target_error=None) -> bytes:
        import matplotlib.pyplot as plt

        from ckptlab import plotting

        if True:
            fig, axes = plt.subplots(2, 2, figsize=(15, 8.5))
            mesh_label = " x ".join(f"{k}={v}" for k, v in c["mesh"].items())
            target_label = " x ".join(f"{k}={v}" for k, v in c["target_mesh"].items())
            plotting.plot_sharded_array(c["shape"], c["mesh"], c["spec"], chunk_shape=saved["chunk_shape"],
                                        writers=saved["writers"], ax=axes[0, 0],
                                        title=f"saved: {spec_text(c['spec'])} on {mesh_label}")
            plotting.plot_bytes_per_device(saved["bytes_per_device"], devices_per_host=c["devices_per_host"],
                                           ax=axes[0, 1], title="Bytes each device writes")
            if target is None:
                import textwrap

                axes[1, 0].text(0.02, 0.95, "\n".join(textwrap.wrap(target_error, 70)), va="top", fontsize=11,
                                color="#cf222e", family="monospace", transform=axes[1, 0].transAxes)
                for ax in axes[1]:
                    ax.set_axis_off()
            else:
                plotting.plot_sharded_array(c["shape"], c["target_mesh"], c["target_spec"],
                                            chunk_shape=saved["chunk_shape"], ax=axes[1, 0],
                                            title=f"target: {spec_text(c['target_spec'])} on {target_label}")
                plotting.plot_chunk_reads({d: len(ch) for d, ch in target["chunks_read"].items()}, ax=axes[1, 1],
                                          title=f"Saved chunks each target device overlaps (bytes read / bytes "
                                                f"needed: {target['read_amplification']:g}x by host, "
                                                f"{target['no_sharing_amplification']:g}x unshared)")
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100)
            plt.close(fig)
        return buf.getvalue()

    def _table(self, c, saved, target, target_error=None) -> str:
        rows = [
            ("shard shape", f"{saved['shard_shape']}, held by {saved['replicas']} device(s) each"),
            ("chunk shape (Orbax)", f"{saved['chunk_shape']}: {len(saved['chunk_files'])} chunk files"),
            ("who writes each chunk", ", ".join(f"{n}: d{d}" for n, d in list(saved["chunk_files"].items())[:16])
             + (" ..." if len(saved["chunk_files"]) > 16 else "")),
            ("bytes written", f"{saved['bytes_written']:,} = {saved['bytes_written'] / saved['array_bytes']:g}x the array"),
            ("per host", ", ".join(f"host {h}: {human_bytes(n)}" for h, n in saved["bytes_per_host"].items())),
        ]
        if target is None:
            import html

            rows.append(("target", f"<span style='color:#cf222e; font-family:monospace'>{html.escape(target_error)}</span>"))
        else:
            rows += [
            ("target device reads", ", ".join(f"d{d}: {len(ch)}" for d, ch in target["chunks_read"].items()) + " chunks"),
            ("bytes read / bytes needed", f"{target['read_amplification']:g}x with one read per chunk per host of "
                                          f"{target['devices_per_host']} devices (the least); "
                                          f"{target['no_sharing_amplification']:g}x with every device reading alone "
                                          "(the most). A restore reads saved chunks whole, so it reads more than its "
                                          "devices need wherever a chunk crosses their slices: Unit 3 calls this "
                                          "ratio the <i>read amplification</i>"),
            ]
        body = "".join(f"<tr><td style='text-align:left'><b>{k}</b></td><td style='text-align:left'>{v}</td></tr>"
                       for k, v in rows)
        return f"<table>{body}</table>"

    def save_for_real(self) -> dict | None:
        """Save the current choice with Orbax and say whether the files are the predicted ones."""
        if not self.numbers:  # (a wrong target alone does not stop the save)
            return None
        c, saved = self.numbers["choice"], self.numbers["saved"]
        real = save_for_real(c["shape"], c["dtype"], c["mesh"], c["spec"], c["replica_parallel"])
        import jax.numpy as jnp

        chunk_bytes = math.prod(saved["chunk_shape"]) * jnp.dtype(saved["dtype"]).itemsize
        real["matches"] = (sorted(real["files"]) == sorted(saved["chunk_files"])
                           and real["chunks"] == saved["chunk_shape"]
                           and set(real["files"].values()) == {chunk_bytes})
        self.real.value = (f"<p>Orbax wrote {len(real['files'])} chunk files of {sorted(set(real['files'].values()))} "
                           f"bytes, chunks {real['chunks']}, in <code>{real['path']}</code>: "
                           f"<b>{'as predicted' if real['matches'] else 'NOT as predicted'}</b></p>")
        return real


def explore(**choices) -> Explorer:
    """Open the explorer (needs the course's devices: call ``ckptlab.setup_devices()`` first).
    Keyword arguments set the first choice: ``shape``, ``dtype``, ``mesh``, ``spec``,
    ``target_mesh``, ``target_spec``, ``devices_per_host``, ``replica_parallel``."""
    return Explorer(**choices)
