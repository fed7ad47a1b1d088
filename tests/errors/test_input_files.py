"""Malformed input files: each is refused with the file and the reason, exit code 2, no traceback,
and the file is left byte-identical."""

from __future__ import annotations

import gzip
import json
import shutil
import struct

import numpy as np
import pytest

from .cli_harness import assert_user_error, run_cli, tree_digest

#: A one-function kernel: y = x * s over a 1x4 f16 buffer (s an f16 scalar argument).
SCALE = """module {
  func.func @scale(%x: index, %y: index, %s: f16) {
    %c0 = arith.constant 0 : index
    %vx = ktdp.construct_memory_view %x, sizes: [1, 4], strides: [4, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<1x4xf16>
    %vy = ktdp.construct_memory_view %y, sizes: [1, 4], strides: [4, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<1x4xf16>
    %tx = ktdp.construct_access_tile %vx[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<1x4xf16> -> !ktdp.access_tile<1x4xindex>
    %ty = ktdp.construct_access_tile %vy[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<1x4xf16> -> !ktdp.access_tile<1x4xindex>
    %d = ktdp.load %tx : !ktdp.access_tile<1x4xindex> -> tensor<1x4xf16>
    %st = tensor.splat %s : tensor<1x4xf16>
    %r = arith.mulf %d, %st : tensor<1x4xf16>
    ktdp.store %r, %ty : tensor<1x4xf16>, !ktdp.access_tile<1x4xindex>
    return
  }
}
"""


@pytest.fixture
def kernel(tmp_path):
    path = tmp_path / "scale.mlir"
    path.write_text(SCALE)
    return path


def good_inputs(path):
    np.savez(path, x=np.arange(4, dtype=np.float16).reshape(1, 4), y=np.zeros((1, 4), np.float16))
    return path


def test_run_works_on_good_inputs(kernel, tmp_path):
    """The control: valid inputs run and --out receives y = 2 x."""
    out = tmp_path / "out.npz"
    r = run_cli("run", kernel, "--inputs", good_inputs(tmp_path / "in.npz"), "--scalar", "s=2", "--out", out)
    assert r.code == 0, r.stderr
    with np.load(out) as data:
        np.testing.assert_array_equal(data["y"], 2 * np.arange(4, dtype=np.float16).reshape(1, 4))


def _npz_of(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("make, fragments", [
    (lambda p: p.write_bytes(b"garbage, not a zip") and p, ["not a .npz archive"]),
    (lambda p: p.write_bytes(b"PK\x03\x04" + b"\0" * 40) and p, ["not a .npz archive"]),
    (lambda p: _npz_of(p, x=np.ones((1, 4), np.complex64), y=np.zeros((1, 4), np.float16)), ["complex"]),
    (lambda p: _npz_of(p, x=np.array([["a", "b", "c", "d"]]), y=np.zeros((1, 4), np.float16)), ["string"]),
    (lambda p: _npz_of(p, x=np.array([[object(), 1, 2, 3]], dtype=object), y=np.zeros((1, 4))), ["object"]),
    (lambda p: _npz_of(p, x=np.float16(1), y=np.zeros((1, 4), np.float16)), ["0-d"]),
    (lambda p: _npz_of(p, x=np.zeros((0, 4), np.float16), y=np.zeros((1, 4), np.float16)), ["empty array"]),
], ids=["garbage", "broken-zip", "complex", "strings", "objects", "scalar", "empty"])
def test_bad_npz_inputs(kernel, tmp_path, make, fragments):
    path = make(tmp_path / "bad.npz")
    before = tree_digest(path, kernel)
    r = run_cli("run", kernel, "--inputs", path, "--scalar", "s=1", "--out", tmp_path / "o.npz")
    assert_user_error(r, "--inputs", str(path), *fragments)
    assert tree_digest(path, kernel) == before
    assert not (tmp_path / "o.npz").exists()


def test_truncated_npz_member(kernel, tmp_path):
    """A member whose .npy header promises more bytes than the archive stores."""
    path = tmp_path / "short.npz"
    import zipfile

    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, 4), np.float16))
    with zipfile.ZipFile(path, "w") as z:
        buf = __import__("io").BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        z.writestr("x.npy", buf.getvalue() + b"\0\0")  # 2 of the 8 data bytes
    r = run_cli("run", kernel, "--inputs", path, "--scalar", "s=1")
    assert_user_error(r, str(path), "array 'x'", "holds 2 data bytes")


@pytest.mark.parametrize("value, fragment", [
    ("1e300", "outside the finite range of f16"),
    ("70000", "outside the finite range of f16"),
    ("inf", "outside the finite range of f16"),
    ("nan", "outside the finite range of f16"),
    ("two", "not a valid f16 value"),
])
def test_scalar_out_of_its_type(kernel, tmp_path, value, fragment):
    r = run_cli("run", kernel, "--inputs", good_inputs(tmp_path / "in.npz"), "--scalar", f"s={value}")
    assert_user_error(r, f"--scalar s={value}", fragment)


# ------------------------------------------------------------------ manifests, goldens, checkpoints


def _program_copy(tiny_program, tmp_path):
    target = tmp_path / "prog"
    shutil.copytree(tiny_program, target)
    return target


def _forward(tiny_model, program, *extra):
    return run_cli("forward", tiny_model, "--program", program, "--weights", tiny_model, "--golden", "none",
                   "-q", *extra)


@pytest.mark.parametrize("text, fragments", [
    ("[" * 200000 + "]" * 200000, ["nested deeper than 64 levels"]),
    ('{"tensors": ' + "9" * 5000 + "}", ["an integer of 5000 digits"]),
    ('{"tensors": [], "x": 1e999}', ["outside the float64 range"]),
    ('{"tensors": [], "x": NaN}', ["NaN is not a JSON value"]),
    ('{"tensors": [\n', ["manifest.json:2:1: invalid JSON"]),
    ("\udcff", ["not UTF-8"]),
], ids=["deep", "huge-int", "huge-float", "nan", "syntax", "not-utf8"])
def test_malformed_manifest_json(tiny_model, tiny_program, tmp_path, text, fragments):
    program = _program_copy(tiny_program, tmp_path)
    (program / "manifest.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    before = tree_digest(program)
    assert_user_error(_forward(tiny_model, program), "manifest.json", *fragments)
    assert tree_digest(program) == before


def test_malformed_config_json(tiny_model, tmp_path):
    model = tmp_path / "M"
    shutil.copytree(tiny_model, model)
    (model / "config.json").write_text('{"model_type": "llama", "vocab_size": ' + "1" * 5000 + "}")
    assert_user_error(run_cli("forward", model, "--weights", model, "-q"), "config.json", "5000 digits")


@pytest.mark.parametrize("mutate, fragments", [
    (lambda data: b"", ["holds 0 bytes"]),
    (lambda data: b"plain text, not gzip", ["not gzip data"]),
    (lambda data: data[: len(data) // 2], ["truncated or corrupt gzip data"]),
    (lambda data: gzip.compress(b"\0" * (1 << 24)), ["holds more than 1024 bytes"]),
    (lambda data: gzip.compress(b"\0" * 10), ["holds 10 bytes"]),
], ids=["empty", "not-gzip", "truncated", "bomb", "short"])
def test_bad_golden_file(tiny_model, tiny_program, tmp_path, mutate, fragments):
    golden = tmp_path / "golden.f16.gz"
    golden.write_bytes(gzip.compress(b"\0" * 1024))
    golden.write_bytes(mutate(golden.read_bytes()))
    program = _program_copy(tiny_program, tmp_path)
    r = run_cli("forward", tiny_model, "--program", program, "--weights", tiny_model, "--golden", golden, "-q")
    assert_user_error(r, str(golden), *fragments)


def _rewrite_header(path, edit):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8: 8 + n])
    edit(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


@pytest.mark.parametrize("corrupt, fragments", [
    (lambda p: p.write_bytes(p.read_bytes()[:5]), ["shorter than its 8-byte header length"]),
    (lambda p: p.write_bytes(struct.pack("<Q", 1 << 60) + p.read_bytes()[8:]), ["header length"]),
    (lambda p: _rewrite_header(p, lambda h: h["model.norm.weight"].update(data_offsets=[0, 10**12])),
     ["'model.norm.weight'", "outside the file's"]),
    (lambda p: _rewrite_header(p, lambda h: h["model.norm.weight"].update(shape=[65])),
     ["'model.norm.weight'", "needs 130 bytes"]),
    (lambda p: _rewrite_header(p, lambda h: h["model.norm.weight"].update(dtype="Q7")),
     ["unknown dtype 'Q7'"]),
    # found by the fuzz suite (KTIR_MODELS_FUZZ_RANDOM=1): a list where the dtype name belongs
    (lambda p: _rewrite_header(p, lambda h: h["model.norm.weight"].update(dtype=["F16"])),
     ["unknown dtype ['F16']"]),
], ids=["short", "header-length", "offsets", "shape", "dtype", "dtype-list"])
def test_corrupt_safetensors_header(tiny_model, tmp_path, corrupt, fragments):
    model = tmp_path / "M"
    shutil.copytree(tiny_model, model)
    corrupt(model / "model.safetensors")
    r = run_cli("forward", tiny_model, "--weights", model, "--golden", "none", "-q")
    assert_user_error(r, "model.safetensors", *fragments)
