"""No regular expression reads KTIR text outside the parser: KTIR is read by
``ktir_models.ktir``'s parser alone, and every other reader works on its IR.

Expressed as an allow-list: a module of ``ktir_models`` that imports ``re`` is either a part of
the parser (which reads KTIR text) or is listed with what its expressions read; and no expression
of a module outside the parser mentions KTIR syntax. A new module that imports ``re`` fails this
test until it is classified here."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ktir_models"

#: The parser's modules: they read KTIR text.
PARSER = {
    "ktir/parse/parser.py": "the KTIR parser",
    "ktir/parse/lexer.py": "the parser's tokens",
    "ktir/parse/types.py": "the parser's type syntax",
    "ktir/ir/affine.py": "the parser's affine maps and sets",
    "ktir/exec/twins.py": "the loader: files equal up to names (twins) are derived from the first's IR",
}

#: Modules whose expressions read something else than KTIR.
NOT_KTIR = {
    "model/checks/diagnose.py": "checkpoint tensor names; the node index in an emulator message",
    "cache_temp.py": "the cache's temporary file names; the host name",
    "model/emit/api.py": "a model name made a KTIR symbol (written, not read)",
    "model/emit/serving.py": "a model name made a KTIR symbol (written, not read)",
    "model/weights/synthetic.py": "a repository id made a cache folder name",
    "model/gguf/names.py": "checkpoint tensor names (HF and GGUF)",
    "model/registry.py": "HuggingFace repository ids",
    "sweep/memory.py": "memory sizes in sweep specs",
    "sweep/spec.py": "case ids of sweep specs",
    "sweep/spec_reader.py": "strings, comments and brackets of sweep specs (the nesting bound)",
}

#: Words of KTIR syntax no expression outside the parser may contain.
KTIR_WORDS = ("func", "ktdp", "arith", "memref", "affine", "tensor<", "scf.", "linalg", "%")


def _imports_re(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "re":
            return True
    return False


def _patterns(tree: ast.AST) -> list[str]:
    """The literal patterns given to ``re.<function>(...)`` calls."""
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and isinstance(func, ast.Attribute) and node.args \
                and isinstance(func.value, ast.Name) and func.value.id == "re":
            for part in ast.walk(node.args[0]):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    found.append(part.value)
    return found


def _modules() -> dict[str, ast.AST]:
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_only_the_parser_reads_ktir_text_with_regular_expressions():
    modules = _modules()
    users = {name for name, tree in modules.items() if _imports_re(tree)}
    assert "model/manifest.py" not in users  # the manifest's checks read the IR
    unclassified = sorted(users - set(PARSER) - set(NOT_KTIR))
    assert not unclassified, f"modules importing re, neither parser nor listed: {unclassified}"
    for name in sorted(users - set(PARSER)):
        ktir = [p for p in _patterns(modules[name]) if any(w in p for w in KTIR_WORDS)]
        assert not ktir, f"{name}: regular expressions over KTIR text outside the parser: {ktir}"


def test_the_check_finds_a_ktir_expression():
    tree = ast.parse('import re\nHEADER = re.compile(r"func\\.func\\s+@(\\w+)")\n')
    assert _imports_re(tree)
    assert any("func" in p for p in _patterns(tree))
