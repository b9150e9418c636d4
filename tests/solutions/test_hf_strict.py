"""The course's safetensors readers are as strict as the library that will open the file: a header
``safetensors.safe_open`` refuses is refused (ckptlab.stheader, under ckptlab.hf's reader, which grades
9.1, and ckptlab.serving's), and one it opens is read. Held both ways on generated headers: valid
tensors beside metadata of every kind of value, duplicate keys, NaN, lone surrogates and unknown fields."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ckptlab import hf, serving

_T = '{"dtype": "F32", "shape": [2], "data_offsets": [%d, %d]}'

# A metadata value, as JSON text: strings (ok), and what safe_open refuses.
_META_VALUES = st.sampled_from(['"pt"', '"1234"', '""', "1234", "1.5", "true", "null", '["x"]', '{"a": "b"}',
                                "NaN", "Infinity", '"\\ud800"', '"\\u00e9"'])
_META_KEYS = st.sampled_from(['"format"', '"total_size"', '"format"', '"\\udfff"', '"k"'])


@st.composite
def _metadata(draw) -> str:
    kind = draw(st.sampled_from(["object", "object", "object", "null", "list", "number", "string"]))
    if kind == "null":
        return "null"
    if kind != "object":
        return {"list": '["pt"]', "number": "3", "string": '"pt"'}[kind]
    pairs = draw(st.lists(st.tuples(_META_KEYS, _META_VALUES), max_size=3))
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


@st.composite
def _header(draw) -> tuple[str, int]:
    """(the header's text, the data's length): tensors of 8 bytes each, one after the other, with
    the variations drawn."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "a", "\\ud800", "\\u00e9"]), min_size=0, max_size=4))
    entries, offset = [], 0
    for name in names:
        entry = _T % (offset, offset + 8)
        twist = draw(st.sampled_from(["none"] * 6 + ["extra", "extra_nan", "extra_object", "dtype_twice",
                                                     "shape_float", "offsets_twice"]))
        extra = {"extra": ', "x": 1', "extra_nan": ', "x": NaN', "extra_object": ', "x": {"y": [1, 2]}',
                 "dtype_twice": ', "dtype": "F32"', "shape_float": "", "offsets_twice": f', "data_offsets": [{offset}, {offset + 8}]'}
        if twist == "shape_float":
            entry = entry.replace('"shape": [2]', '"shape": [2.0]')
        elif twist != "none":
            entry = entry[:-1] + extra[twist] + "}"
        entries.append(f'"{name}": {entry}')
        offset += 8
    metas = draw(st.integers(0, 2))
    for _ in range(metas):
        entries.insert(draw(st.integers(0, len(entries))), f'"__metadata__": {draw(_metadata())}')
    return "{" + ", ".join(entries) + "}", offset


def _write(path, text: str, data: int) -> None:
    raw = text.encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data))


def _library_opens(path) -> bool:
    from safetensors import safe_open

    try:
        with safe_open(str(path), "np") as f:
            for key in f.keys():
                f.get_tensor(key)
            f.metadata()
        return True
    except Exception:  # noqa: BLE001 - whatever it raises, the library refused the file
        return False


def _ours(path) -> tuple[bool, bool]:
    try:
        hf.read_header(str(path))
        ours = True
    except hf.HFFormatError:
        ours = False
    try:
        serving.safetensors_header(str(path))
        serving_ok = True
    except ValueError:
        serving_ok = False
    return ours, serving_ok


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=_header())
def test_the_reader_refuses_exactly_what_safe_open_refuses(tmp_path, header):
    text, data = header
    path = tmp_path / "model.safetensors"
    _write(path, text, data)
    library = _library_opens(path)
    ours, serving_ok = _ours(path)
    assert ours == library, (text, "safe_open opens it" if library else "safe_open refuses it")
    # ckptlab.serving's reads the JSON only (the tensors' bytes are the library's to check there): it
    # opens what the library opens, and refuses what the JSON alone makes the library refuse.
    if library:
        assert serving_ok, text


@pytest.mark.parametrize(("metadata", "says"), [
    ('{"format": "pt", "total_size": 1234}', "'total_size': 1234, not a string"),
    ('{"format": "pt"}, "__metadata__": {"format": "pt"}', "__metadata__ twice"),
    ('{"format": NaN}', "NaN, which is not JSON"),
    ('["pt"]', "is a list, not an object of strings"),
])
def test_a_header_safe_open_refuses_is_refused_saying_why(tmp_path, metadata, says):
    """The hostile holdout's files: each refused by the library, and by the reader with what to do."""
    path = tmp_path / "model.safetensors"
    _write(path, '{"__metadata__": ' + metadata + ', "a": ' + _T % (0, 8) + '}', 8)
    assert not _library_opens(path)
    with pytest.raises(hf.HFFormatError, match="safe_open refuses") as caught:
        hf.read_header(str(path))
    assert says in str(caught.value), caught.value
    with pytest.raises(ValueError, match="safe_open refuses"):
        serving.safetensors_header(str(path))
