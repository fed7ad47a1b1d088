"""Twin files (ktir/exec/twins.py, ktir/exec/twin_plans.py): files that are one text up to the function's and
arguments' names load, verify, compile and fault exactly as each file on its own would; files
that differ in one more character are not twins."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.parse.printer import print_generic
from ktir_models.ktir.exec.twin_plans import TwinPlan, compile_functions
from ktir_models.ktir.exec.twins import DerivedFunction, TwinLoader, load_modules

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("KTIR_CORPUS", REPO.parent / "shared" / "corpus"))
PREFILL = CORPUS / "scratchy" / "smollm2-135m-prefill"
needs_corpus = pytest.mark.skipif(not PREFILL.is_dir(),
                                  reason=f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)")

# {F}: the function, {M}: a runtime argument, {OUT}: the output's address. The line of %k puts an
# op after a renamed token (its column moves with the name's length); the store faults for an
# address outside HBM, the extract for a value above the upperbound (a message naming {M}).
KERNEL = """module {
  func.func @{F}(%{M}: !ktdp.runtime_arg<index, upperbound=300>, %{OUT}: index) {
    %v = ktdp.runtime_arg_extract value from %{M} : <index, upperbound=300> -> index
    %k = arith.addi %v, %v : index  %c0 = arith.constant 0 : index
    %view = ktdp.construct_memory_view %{OUT}, sizes: [2], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 1 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>} : memref<2xi64>
    %t = ktdp.construct_access_tile %view[%c0] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 1 >= 0)>} : memref<2xi64> -> !ktdp.access_tile<2xindex>
    %vi = arith.index_cast %v : index to i64  %ki = arith.index_cast %k : index to i64
    %x = tensor.from_elements %vi, %ki : tensor<2xi64>
    ktdp.store %x, %t : tensor<2xi64>, !ktdp.access_tile<2xindex>
    return
  }
}
"""
NAMES = [("k_n1", "m", "out"), ("kernel_n1234", "m_long_name", "o"), ("k_n9", "mm", "out9")]


def _write(tmp_path: Path, names=NAMES, text=KERNEL) -> list[Path]:
    paths = []
    for k, (f, m, out) in enumerate(names):
        p = tmp_path / f"node{k}.mlir"
        p.write_text(text.replace("{F}", f).replace("{M}", m).replace("{OUT}", out))
        paths.append(p)
    return paths


def _locations(fn) -> list:
    """Every Location and name of ``fn``'s IR, in walk order."""
    out = [(fn.name, fn.loc, fn.grid)] + [(a.name, a.loc, a.type) for a in fn.args]
    for op in fn.walk():
        out.append((op.name, op.loc, [v.name for v in op.operands],
                    {g: [v.name for v in vs] for g, vs in op.groups.items()}))
        out += [(r.name, r.loc, r.type, r.index) for r in op.results]
        out += [(a.name, a.loc, a.type) for r in op.regions for b in r.blocks for a in b.args]
    return out


def _same_as_alone(module, path: Path) -> None:
    alone = ktir.load_module(path)
    assert module.filename == alone.filename and module.loc == alone.loc
    assert list(module.functions) == list(alone.functions)
    assert _locations(module.only_function) == _locations(alone.only_function)
    assert print_generic(module) == print_generic(alone)


def test_twins_are_derived_in_their_own_names_and_locations(tmp_path):
    paths = _write(tmp_path)
    loader = TwinLoader(share=True)
    modules = [loader.load(p) for p in paths]
    assert loader.parsed == 1 and loader.keys == 1
    for module, path in zip(modules, paths):
        _same_as_alone(module, path)
    derived = modules[1].only_function
    assert isinstance(derived, DerivedFunction) and loader.twin(derived).first is \
        modules[0].only_function
    # the op after %m_long_name on its line: its column is the twin's own (shifted by 10)
    first_c0, twin_c0 = (next(o for o in m.only_function.walk() if o.name == "arith.constant")
                         for m in modules[:2])
    assert twin_c0.loc.line == first_c0.loc.line and twin_c0.loc.col == first_c0.loc.col


def test_columns_after_a_renamed_token_shift_by_its_length(tmp_path):
    text = """func.func @{F}(%{M}: index, %{OUT}: index) {
  %a = arith.addi %{M}, %{OUT} : index  %c0 = arith.constant 0 : index
  return
}
"""
    paths = _write(tmp_path, text=text)
    modules = load_modules(paths, share=True)
    for module, path in zip(modules, paths):
        _same_as_alone(module, path)
    cols = [next(o for o in m.only_function.walk() if o.name == "arith.constant").loc.col
            for m in modules]
    shifts = [len(m) + len(out) for _, m, out in NAMES]
    assert [c - cols[0] for c in cols] == [s - shifts[0] for s in shifts]


def test_a_one_character_difference_is_no_twin(tmp_path):
    paths = _write(tmp_path, NAMES[:2])
    paths[1].write_text(paths[1].read_text().replace("-d0 + 1 >= 0)>,", "-d0 + 1 >= 0 )>,"))
    loader = TwinLoader(share=True)
    modules = [loader.load(p) for p in paths]
    assert loader.parsed == 2 and loader.keys == 2
    assert loader.twin(modules[1].only_function) is None
    # nor a twin whose new name is a name the first's body already uses
    (tmp_path / "clash").mkdir()
    clash = _write(tmp_path / "clash", [NAMES[0], ("k_n2", "v", "out")])
    loader = TwinLoader(share=True)
    with pytest.raises(ktir.KtirError, match="redefinition of value '%v'"):
        [loader.load(p) for p in clash]
    assert loader.parsed == 2


def test_a_twins_verify_error_names_its_own_file_line_and_names(tmp_path):
    bad = KERNEL.replace("%vi = arith.index_cast %v : index to i64  %ki = arith.index_cast %k",
                         "%vi = arith.index_cast %{M} : index to i64  %ki = arith.index_cast %vi")
    paths = _write(tmp_path, text=bad)
    loader = TwinLoader(share=True)
    errors = []
    for p in paths:
        with pytest.raises(ktir.KtirError) as got:
            loader.load(p)
        with pytest.raises(ktir.KtirError) as alone:
            ktir.load_module(p)
        assert str(got.value) == str(alone.value)
        errors.append(str(got.value))
    assert str(paths[1]) in errors[1] and "m_long_name" in errors[1] and str(paths[0]) not in errors[1]


def _plans(paths, machine):
    loader = TwinLoader(share=True)
    functions = [loader.load(p).only_function for p in paths]
    return functions, compile_functions(machine, functions, loader)


def test_twin_plans_run_like_their_own_plans(tmp_path):
    paths = _write(tmp_path)
    machine = ktir.Machine()
    functions, plans = _plans(paths, machine)
    assert not isinstance(plans[0], TwinPlan) and all(isinstance(p, TwinPlan) for p in plans[1:])
    for fn, plan, (_, m, out) in zip(functions, plans, NAMES):
        buf = machine.hbm.allocate((2,), "int64", name=out)
        for value in (5, 7, 7, 7):
            stats = plan.run({m: value, out: buf.address})
            assert stats.function == fn.name and buf.array.tolist() == [value, 2 * value]
        plan.run([9, buf.address])  # positional: the twin compiled on its own binds it
        assert buf.array.tolist() == [9, 18]
        with pytest.raises(ktir.KtirError) as got:
            plan.run({m: 1})
        with pytest.raises(ktir.KtirError) as alone:
            ktir.Machine().compile(ktir.load_module(paths[functions.index(fn)]).only_function).run({m: 1})
        assert str(got.value) == str(alone.value)


def test_a_twin_reuses_an_argument_dict_only_while_it_is_unchanged(tmp_path):
    """A forward passes each node the same bound dict every pass, and a twin keeps its
    translation; the same dict changed in place is translated (and checked) again."""
    paths = _write(tmp_path)
    machine = ktir.Machine()
    functions, plans = _plans(paths, machine)
    _, m, out = NAMES[1]
    plan = plans[1]
    buf = machine.hbm.allocate((2,), "int64", name="a")
    other = machine.hbm.allocate((2,), "int64", name="b")
    args = {m: 4, out: buf.address}
    plan.run(args)
    plan.run(args)
    assert buf.array.tolist() == [4, 8]
    args[m] = 6  # same object, new value
    plan.run(args)
    assert buf.array.tolist() == [6, 12]
    args[out] = other.address
    plan.run(args)
    assert other.array.tolist() == [6, 12] and buf.array.tolist() == [6, 12]
    del args[out]  # same object, now missing an argument: refused as before
    with pytest.raises(ktir.KtirError):
        plan.run(args)


@pytest.mark.parametrize("args, what", [(lambda m, out: {m: 301, out: 0}, "above its upperbound"),
                                        (lambda m, out: {m: 3, out: 1 << 40}, "")])
def test_a_fault_in_a_twin_names_its_function_file_op_and_argument(tmp_path, args, what):
    paths = _write(tmp_path)
    functions, plans = _plans(paths, ktir.Machine())
    for path, fn, plan, (f, m, out) in zip(paths, functions, plans, NAMES):
        with pytest.raises(ktir.EmulationFault) as got:
            plan.run(args(m, out))
        with pytest.raises(ktir.EmulationFault) as alone:
            ktir.Machine().compile(ktir.load_module(path).only_function).run(args(m, out))
        assert str(got.value) == str(alone.value) and what in str(got.value)
        assert got.value.function == f and got.value.loc.file == str(path)
        if what:
            assert f"%{m} is 301" in got.value.message


def test_a_checking_machine_compiles_every_twin_on_its_own(tmp_path):
    from ktir_models.ktir.exec.checks import NumericChecks

    machine = ktir.Machine()
    machine.checks = NumericChecks()
    _, plans = _plans(_write(tmp_path), machine)
    assert not any(isinstance(p, TwinPlan) for p in plans)


@needs_corpus
def test_every_scratchy_prefill_file_loads_as_on_its_own():
    paths = sorted(PREFILL.glob("node*.mlir"), key=lambda p: int(p.stem[4:]))
    loader = TwinLoader(share=True)
    with ktir.bulk_load():
        modules = [loader.load(p) for p in paths]
    assert loader.parsed == loader.keys == 11
    for module, path in zip(modules, paths):
        _same_as_alone(module, path)


@needs_corpus
def test_forks_have_their_own_run_state():
    """Two twins of a multi-core node: one tiers up and records its tape while the other stays
    plain, and the other gives the bytes of its node compiled alone."""
    from ktir_models.model.manifest import load_manifest

    manifest = load_manifest(PREFILL)
    decls = [n for n in manifest.nodes if n.mlir in ("node6.mlir", "node21.mlir")]
    paths = [PREFILL / d.mlir for d in decls]
    machine = ktir.Machine()
    functions, plans = _plans(paths, machine)
    assert isinstance(plans[1], TwinPlan) and functions[0].num_cores > 1
    ref = ktir.Machine()
    ref_plan = ref.compile(ktir.load_module(paths[1]).only_function)
    rng = np.random.default_rng(0)
    bound, buffers = [{}, {}], []
    for arg0, arg1 in zip(decls[0].args, decls[1].args):
        data = (rng.standard_normal(manifest.tensor(arg1.tensor).shape) / 8).astype(np.float16)
        bound[0][arg0.name] = machine.hbm.allocate_from(data.copy(), name=arg0.name).address
        mine = machine.hbm.allocate_from(data.copy(), name=arg1.name)
        theirs = ref.hbm.allocate_from(data.copy(), name=arg1.name)
        bound[1][arg1.name] = (mine.address, theirs.address)
        buffers.append((mine, theirs))
    for _ in range(3):
        plans[0].run(bound[0])
    fork = plans[1].fork
    assert fork._c.stacked is None and fork._c.rerolled is None and plans[1].replays == 0
    for _ in range(4):
        plans[1].run({n: a for n, (a, _) in bound[1].items()})
        ref_plan.run({n: b for n, (_, b) in bound[1].items()})
    assert plans[1].replays == ref_plan.replays > 0
    for mine, theirs in buffers:
        assert mine.read().tobytes() == theirs.read().tobytes()
