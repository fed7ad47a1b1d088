"""JUnit XML of a sweep, for CI systems: one ``<testcase>`` per case.

A ``fail`` verdict (the forward ran, the logits do not match) is a ``<failure>``; an ``error``
(bad input, a crash, a timeout, a kill) is an ``<error>``; CI systems show the two apart. The
report states actual verdicts; a case's ``expect`` is recorded as a property, and the sweep's
exit code (0 only when every verdict equals its ``expect``) is the CI gate.

``--junit FILE`` follows the rules of every output option (ktir_models/outputs.py), checked
before any case runs: not a directory, its directory exists and is writable, never the spec,
a file or directory a case reads, or a file the sweep writes in ``--out``; an existing file is
replaced only when it is a JUnit report a sweep wrote (or with ``--force``); the report is
written to a temporary sibling and renamed over the target once complete.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from ..errors import UserError
from ..outputs import OutputKind, atomic_output, check_output_target
from .inputs import input_holding
from .reports import SweepSummary
from .spec import SweepSpec
from .store import CASES, OWN_NAMES

_OUTPUT_CHARS = 2000
CLASS_PREFIX = "ktir_models.sweep."
_SNIFF_BYTES = 1 << 20


def junit_xml(summary: SweepSummary) -> str:
    counts = summary.counts
    suites = ET.Element("testsuites", name=summary.name)
    suite = ET.SubElement(suites, "testsuite", {
        "name": summary.name, "tests": str(len(summary.results)), "failures": str(counts["fail"]),
        "errors": str(counts["error"]), "skipped": "0", "time": f"{summary.seconds:.3f}",
    })
    for result in summary.results:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"{CLASS_PREFIX}{summary.name}", "name": result.case_id,
            "time": f"{result.seconds:.3f}",
        })
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="expect", value=result.expect)
        ET.SubElement(props, "property", name="key", value=result.key)
        if result.metric is not None:
            ET.SubElement(props, "property", name="max_abs_rel", value=f"{result.metric:.6g}")
        if result.verdict != "pass":
            tag = "failure" if result.verdict == "fail" else "error"
            element = ET.SubElement(case, tag, message=_clean(result.cause or result.verdict),
                                    type=result.verdict)
            element.text = _clean(result.stderr_tail[-_OUTPUT_CHARS:])
        if result.stdout_tail:
            ET.SubElement(case, "system-out").text = _clean(result.stdout_tail[-_OUTPUT_CHARS:])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def is_sweep_junit(path: Path) -> bool:
    """Whether ``path`` (a regular file) is a JUnit report a sweep wrote: ``<testsuites>`` whose
    first ``<testcase>`` has a sweep's classname, found in its first ``_SNIFF_BYTES``."""
    parser = ET.XMLPullParser(events=("start",))
    first = True
    with open(path, "rb") as fh:
        for _ in range(_SNIFF_BYTES >> 16):
            chunk = fh.read(1 << 16)
            if not chunk:
                return False
            try:
                parser.feed(chunk)
                for _, element in parser.read_events():
                    if first and element.tag != "testsuites":
                        return False
                    first = False
                    if element.tag == "testcase":
                        return element.get("classname", "").startswith(CLASS_PREFIX)
            except ET.ParseError:
                return False
    return False


JUNIT = OutputKind("JUnit report of a sweep", is_sweep_junit)


def check_junit_target(path: Path, *, out: Path, spec: SweepSpec, force: bool = False) -> Path:
    """Refuse ``path`` as ``--junit`` (see the module docstring); returns it."""
    path = Path(path)
    target = path.resolve()
    root = Path(out).resolve()
    if target == root:
        raise UserError(f"--junit {path}: is the --out directory (expected a file name)")
    if target in {root / name for name in OWN_NAMES} or target.is_relative_to(root / CASES):
        raise UserError(f"--junit {path}: is a file the sweep writes in --out {out}")
    held = input_holding(target, spec)
    if held is not None:
        raise UserError(f"--junit {path}: refusing to overwrite an input of this sweep ({held})")
    if target.parent == root and not root.exists():
        return path  # in the --out this sweep creates: nothing there yet
    return check_output_target(path, "--junit", JUNIT, force=force)


def write_junit(summary: SweepSummary, path: Path) -> Path:
    with atomic_output(path, "--junit", "w") as fh:
        fh.write(junit_xml(summary))
    return Path(path)


def _clean(text: str) -> str:
    """XML 1.0 forbids most control characters (a progress bar's escape codes, say)."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)
