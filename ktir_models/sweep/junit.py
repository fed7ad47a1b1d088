"""JUnit XML of a sweep, for CI systems: one ``<testcase>`` per case.

A ``fail`` verdict (the forward ran, the logits do not match) is a ``<failure>``; an ``error``
(bad input, a crash, a timeout, a kill) is an ``<error>``; CI systems show the two apart. The
report states actual verdicts; a case's ``expect`` is recorded as a property, and the sweep's
exit code (0 only when every verdict equals its ``expect``) is the CI gate.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .reports import SweepSummary
from .store import write_text_atomic

_OUTPUT_CHARS = 2000


def junit_xml(summary: SweepSummary) -> str:
    counts = summary.counts
    suites = ET.Element("testsuites", name=summary.name)
    suite = ET.SubElement(suites, "testsuite", {
        "name": summary.name, "tests": str(len(summary.results)), "failures": str(counts["fail"]),
        "errors": str(counts["error"]), "skipped": "0", "time": f"{summary.seconds:.3f}",
    })
    for result in summary.results:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"ktir_models.sweep.{summary.name}", "name": result.case_id,
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


def write_junit(summary: SweepSummary, path: Path) -> Path:
    return write_text_atomic(Path(path), junit_xml(summary))


def _clean(text: str) -> str:
    """XML 1.0 forbids most control characters (a progress bar's escape codes, say)."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)
