"""The fastcall extension (backends/fastcall.py, fastcall.c): built wherever this Python's headers
and a C compiler are, the same bits as numpy on small arrays (the sizes it exists for: tails of
every vector width, broadcast operands, 0-d and empty arrays), the kernel's pointers where the
arrays lie, and a size mismatch refused with an error instead of a read or write past a
buffer."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import scratchy_program
from ktir_models.ktir.backends import f16_convert, fastcall, seqmm
from ktir_models.ktir.backends.native_build import compilers

RNG = np.random.default_rng(11)
OPS = ["add", "subtract", "multiply", "divide"]


@pytest.fixture
def ext():
    seqmm._reset()
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    module = f16_convert._functions().ext
    if module is None:
        if fastcall.headers() is not None and compilers():
            pytest.fail(f"headers and a compiler are here, yet no extension: {fastcall.reason}")
        pytest.skip(f"the fastcall extension is unavailable: {fastcall.reason}")
    yield module
    seqmm._reset()


def _f16(shape) -> np.ndarray:
    x = np.asarray(RNG.standard_normal(shape) * 4, dtype=np.float16)
    flat = x.reshape(-1)
    if flat.size > 3:  # specials among ordinary values
        flat[:3] = [np.inf, -0.0, 6e-8]
    return x


def _numpy(name, a, b) -> np.ndarray:
    with np.errstate(all="ignore"):
        return getattr(np, name)(a, b, dtype=np.float32).astype(np.float16)


@pytest.mark.parametrize("name", OPS)
def test_small_f16_ops_are_numpys(ext, name):
    for n in (1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 576, 1023):  # below and across vector widths
        a, b = _f16((n,)), _f16((n,))
        got = f16_convert.binop(name, a, b)
        np.testing.assert_array_equal(got.view(np.uint16), _numpy(name, a, b).view(np.uint16))
    # broadcast operands (an attention row against a [1, d] scale, a per-row scalar), 0-d, empty
    for x, y in [(_f16((9, 1, 64)), _f16((1, 64))), (_f16((9, 1, 1)), _f16((1, 1))),
                 (_f16((1, 64)), _f16((9, 1, 64))), (_f16(()), _f16(())),
                 (_f16((0, 4)), _f16((4,)))]:
        got = f16_convert.binop(name, x, y)
        expected = _numpy(name, x, y)
        assert got.shape == expected.shape and got.dtype == np.float16
        np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))


def test_small_conversions_are_numpys(ext):
    for shape in [(), (1,), (7,), (17,), (9, 1, 64), (3, 32), (0,)]:
        x = _f16(shape)
        wide = f16_convert.convert(x, np.float32)
        np.testing.assert_array_equal(wide.view(np.uint32), x.astype(np.float32).view(np.uint32))
        y = np.asarray(RNG.standard_normal(shape) * 1e4, dtype=np.float32)
        with np.errstate(all="ignore"):
            expected = y.astype(np.float16)
        np.testing.assert_array_equal(f16_convert.convert(y, np.float16).view(np.uint16),
                                      expected.view(np.uint16))
    assert f16_convert.native_from() == 0


def test_sizes_that_do_not_match_are_refused(ext):
    a = np.ones(16, np.float16)
    out = np.full(16, 7, np.float16)
    with pytest.raises(ValueError, match="as many f16 elements"):
        ext.binop(a, a[:15], out, 0)
    with pytest.raises(ValueError, match="as many f16 elements"):
        ext.binop(a, a, out[:8], 0)
    with pytest.raises(ValueError, match="0..3"):
        ext.binop(a, a, out, 4)
    with pytest.raises((ValueError, BufferError)):
        ext.binop(a[::2], a[::2], out[:8], 0)  # not contiguous
    with pytest.raises((ValueError, TypeError)):
        ext.binop(a, a, np.ones(16, np.float16)[::1].view(np.uint8)[:0], 0)
    with pytest.raises(ValueError, match="one element each"):
        ext.convert(a, np.empty(15, np.float32))
    with pytest.raises(ValueError, match="one element each"):
        ext.convert(a, np.empty(16, np.float16))
    assert (out == 7).all()  # nothing was written by a refused call
    readonly = np.empty(16, np.float16)
    readonly.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        ext.binop(a, a, readonly, 0)


def test_the_switch_leaves_small_arrays_to_numpy(monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_NATIVE_EXT", "0")
    seqmm._reset()
    try:
        if not seqmm.available():
            pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
        assert f16_convert._functions().ext is None
        assert "KTIR_MODELS_NATIVE_EXT=0" in fastcall.reason
        a = _f16((576,))
        assert f16_convert.binop("add", a, a) is None
        assert f16_convert.convert(a, np.float32) is None
        assert f16_convert.native_from() == f16_convert.MIN_ELEMENTS
    finally:
        seqmm._reset()


def test_pointers_are_where_the_arrays_lie(ext):
    """The kernel's data pointers, for the strided, shared and read-only operands it takes."""
    w = np.zeros((4, 8, 16), np.float16)
    shared = np.broadcast_to(np.zeros((1, 5), np.float32), (3, 5))  # stride 0, read-only
    view = w[1:, ::2, 3:]
    got = ext.pointers(w, view, shared)
    assert got == (w.ctypes.data, view.ctypes.data, shared.ctypes.data)
    assert got[1] == w.ctypes.data + (1 * 8 * 16 + 3) * 2


def test_kernel_calls_through_the_extension_keep_the_bits(monkeypatch):
    """One kernel call signature run with its pointers from the extension and from ctypes."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 2, 64)).astype(np.float16)
    b = rng.standard_normal((3, 48, 64)).astype(np.float16)[:, ::2]  # strided nt weight
    outs = []
    for setting in ("1", "0"):
        monkeypatch.setenv("KTIR_MODELS_NATIVE_EXT", setting)
        seqmm._reset()
        seqmm._CALLS.clear()
        if not seqmm.available():
            pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
        assert (seqmm._library().ext is None) == (setting == "0") or fastcall.headers() is None
        for _ in range(2):  # the second call takes the kept signature's fast path
            outs.append(seqmm.kloop(a, b, None, trips=2, kb=32, transpose_b=True,
                                    part_dtype=np.float16, acc_dtype=np.float32))
    seqmm._reset()
    seqmm._CALLS.clear()
    expected = seqmm.kloop_reference(a, b, None, trips=2, kb=32, transpose_b=True,
                                     part_dtype=np.float16, acc_dtype=np.float32)
    for out in outs:
        np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def test_scratchy_layer_keeps_its_bits_through_the_extension(ext):
    """Layer 0 of the scratchy smollm2-135m decode (norms, RoPE, attention, SiLU: f16 arithmetic
    on rows of 32-1536 elements, broadcast scales) run three times (plain, batched, taped) with
    the extension and with ctypes: the same output bits."""
    import dataclasses

    from ktir_models import ktir

    directory, nodes, tensors = scratchy_program("smollm2-135m")
    with_ext = seqmm._library()
    without = dataclasses.replace(with_ext, ext=None)
    rng = np.random.default_rng(7)
    try:
        for node in nodes[:16]:
            fresh = {a["tensor"]: (rng.standard_normal(tensors[a["tensor"]]) * 0.5)
                     .astype(np.float16) for a in node["args"] if not a["is_output"]}
            fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
            outs = {}
            for loaded in (with_ext, without):
                seqmm._loaded = loaded
                machine = ktir.Machine()
                addresses, outputs = {}, {}
                for a in node["args"]:
                    buf = machine.hbm.allocate(tensors[a["tensor"]], "float16", name=a["name"])
                    if a["is_output"]:
                        outputs[a["name"]] = buf
                    else:
                        buf.write(fresh[a["tensor"]])
                    addresses[a["name"]] = buf.address
                plan = machine.compile(fn)
                for _ in range(3):
                    plan.run(addresses)
                outs[loaded.ext is None] = {k: b.read().view(np.uint16) for k, b in outputs.items()}
            for name in outs[False]:
                np.testing.assert_array_equal(outs[False][name], outs[True][name],
                                              err_msg=f"{node['mlir']} {name}")
    finally:
        seqmm._reset()


@pytest.mark.parametrize("name", OPS)
def test_repeated_operands_are_numpys(ext, name):
    """An operand broadcast by repeating along the other (binop_repeat), on either side, short
    periods (laid out several times over first) and long ones, tails included."""
    pairs = [((9, 1, 64), (1, 64)), ((9, 1, 1), (1, 1)), ((288, 1, 32), (1, 32)), ((5, 7), (7,)),
             ((3, 130), (1, 130)), ((1, 64), (64,)), ((4, 3), ()), ((6, 5, 3), (5, 3)),
             ((2, 63), (63,)), ((70,), (1,))]
    for big, small in pairs:
        x, y = _f16(big), _f16(small)
        for left, right in ((x, y), (y, x)):
            got = f16_convert.binop(name, left, right)
            expected = _numpy(name, left, right)
            assert got.shape == expected.shape, (left.shape, right.shape)
            np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16),
                                          err_msg=f"{left.shape} {right.shape}")
    # pairs that do not repeat one along the other take the copying path, still numpy's bits
    for left, right in [(_f16((64, 1)), _f16((1, 64))), (_f16((9, 1, 64)), _f16((9, 64, 1))),
                        (_f16((3, 64)), _f16((1, 2, 1, 64)))]:
        np.testing.assert_array_equal(f16_convert.binop(name, left, right).view(np.uint16),
                                      _numpy(name, left, right).view(np.uint16))


def test_repeat_sizes_that_do_not_match_are_refused(ext):
    big, out = np.ones(10, np.float16), np.full(10, 7, np.float16)
    with pytest.raises(ValueError, match="whole number of smalls"):
        ext.binop_repeat(big, np.ones(3, np.float16), out, 0, False)
    with pytest.raises(ValueError, match="whole number of smalls"):
        ext.binop_repeat(big, np.ones(5, np.float16), out[:5], 0, False)
    with pytest.raises(ValueError, match="whole number of smalls"):
        ext.binop_repeat(big, np.ones(0, np.float16), out, 0, False)
    assert (out == 7).all()


@pytest.mark.parametrize("mode", [0, 2, 3, 4, 6, 7])
def test_silu_tail_is_the_ops_one_by_one(ext, mode):
    """seqmm_silu_tail (exec/tape_fusion.py's fused step) against the numpy ops it stands for:
    addf of the constant, divf, mulf (either way round), then truncf; f32 or f16 chains."""
    f16_chain, out16, u_left = mode & 1, mode >> 1 & 1, mode >> 2 & 1
    n = 100_003  # chunk tails
    rng = np.random.default_rng(mode)
    dt = np.float16 if f16_chain else np.float32
    a = (rng.standard_normal(n) * 8).astype(dt)
    with np.errstate(all="ignore"):
        e = np.exp(-a.astype(np.float32)).astype(dt)
    u = (rng.standard_normal(n) * 8).astype(dt)
    a[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 6e-8]
    e[6:10] = [np.inf, -1.0, np.nan, 0.0]  # k + e: inf, 0 (x/0), nan
    u[10:13] = [np.nan, np.inf, -0.0]
    k = 1.0
    with np.errstate(all="ignore"):
        if f16_chain:
            s = f16_convert.binop("add", np.full(n, k, np.float16), e)
            q = f16_convert.binop("divide", a, s)
            p = f16_convert.binop("multiply", u, q) if u_left else \
                f16_convert.binop("multiply", q, u)
        else:
            s = np.add(np.float32(k), e)
            q = np.divide(a, s)
            p = np.multiply(u, q) if u_left else np.multiply(q, u)
            p = p.astype(np.float16) if out16 else p
    out = np.empty(n, np.float16 if out16 else np.float32)
    ext.silu_tail(a, e, u, out, k, mode)
    width = np.uint16 if out16 else np.uint32
    both_nan = np.isnan(out) & np.isnan(p)
    same = (out.view(width) == p.view(width)) | both_nan
    assert same.all(), f"{(~same).sum()} of {n} differ"
    assert (np.isnan(out) == np.isnan(p)).all()


def test_silu_tail_refuses_what_no_chain_has(ext):
    a = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="no chain"):
        ext.silu_tail(a.astype(np.float16), a.astype(np.float16), a.astype(np.float16),
                      np.empty(8, np.float32), 1.0, 1)  # f16 chain, f32 out
    with pytest.raises(ValueError, match="as many elements"):
        ext.silu_tail(a, a, a[:7], np.empty(8, np.float16), 1.0, 2)
