#!/usr/bin/env python
"""(Re)build the vendored fixtures in fixtures/: tiny synthetic checkpoints, our emitted programs
for them, and their goldens and runtime inputs (via scripts/gen_golden.py).

    python scripts/make_fixtures.py [--force | --programs]

Layout::

    fixtures/models/<model>/      config.json + model.safetensors (seeded synthetic weights)
    fixtures/<model>-<pass>/      manifest.json, node*.mlir, golden.f16.gz, t<id>.f16.gz, golden.json

Run it after any change that alters emitted programs (``EMITTER_VERSION``): the test suite checks
that the vendored programs equal a fresh emission and that they reproduce the vendored goldens.
Existing fixtures are kept unless ``--force``. ``--programs`` re-emits only the programs
(``manifest.json``, ``node*.mlir``) of existing fixtures and keeps their checkpoints, goldens and
inputs byte for byte: a change of spelling must not move the goldens, which come from the
reference model, not from the program.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ktir_models.model.emit import emit_program  # noqa: E402
from ktir_models.model.emit.fixtures import FIXTURE_MODELS, FIXTURE_PASSES, FIXTURES_DIR  # noqa: E402
from ktir_models.model.weights.synthetic import write_synthetic  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild fixtures that already exist")
    parser.add_argument("--programs", action="store_true",
                        help="re-emit the programs of existing fixtures, keep goldens and inputs")
    args = parser.parse_args()
    if args.programs:
        for fx in FIXTURE_PASSES:
            out = FIXTURES_DIR / fx.directory
            emit_program(FIXTURE_MODELS[fx.model], fx.mode, fx.tokens, fx.past, out, fx.model,
                         force=True)
            print(f"re-emitted {out.relative_to(REPO)}")
        return 0

    for name, cfg in FIXTURE_MODELS.items():
        model_dir = FIXTURES_DIR / "models" / name
        if model_dir.exists() and not args.force:
            print(f"keep   {model_dir.relative_to(REPO)}")
            continue
        shutil.rmtree(model_dir, ignore_errors=True)
        write_synthetic(model_dir, cfg, seed=0)
        print(f"wrote  {model_dir.relative_to(REPO)}")

    for fx in FIXTURE_PASSES:
        out = FIXTURES_DIR / fx.directory
        if out.exists() and not args.force:
            print(f"keep   {out.relative_to(REPO)}")
            continue
        shutil.rmtree(out, ignore_errors=True)
        emit_program(FIXTURE_MODELS[fx.model], fx.mode, fx.tokens, fx.past, out, fx.model)
        model_dir = FIXTURES_DIR / "models" / fx.model
        subprocess.run([sys.executable, str(REPO / "scripts" / "gen_golden.py"), str(out), str(model_dir),
                        "--weights", "hub", "--force"], check=True)
        print(f"wrote  {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
