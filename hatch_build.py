"""Hatchling build hook: ship the built browser app (web/dist) inside the wheel as numr_web/web/, so
`pip install numr-web` then `numr-web serve` needs no Node and no checkout.

web/dist is a build output (scripts/build-web.sh, ignored by git). When it exists it goes into
  * the wheel, as numr_web/web/ (numr_web/apps/serve.py serves it from there);
  * the sdist, as web/dist/ (so the wheel that `python -m build` makes from the sdist has it too).
When it does not (a fresh checkout, `pip install -e .`, CI before the web build), the package builds
without the app and says so; `numr-web serve` in a checkout then builds the app itself.
NUMR_WEB_NO_APP=1 leaves it out on purpose: scripts/build-web.sh builds the engine-only wheel that the
app installs into Pyodide that way.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

REQUIRED = ("index.html", "sw.js", "lib/numr-web.js", "lib/wheels/manifest.json",
            "lib/pyodide/pyodide.asm.wasm")


class AppBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if os.environ.get("NUMR_WEB_NO_APP") == "1":
            return
        if self.target_name == "wheel" and version == "editable":
            return                      # an editable install serves the checkout's web/dist
        dist = Path(self.root) / "web" / "dist"
        if not all((dist / f).is_file() for f in REQUIRED):
            # (pip shows a build's output only with -v: `numr-web info` tells the user too)
            print("numr-web build: web/dist is not built, so this package has no browser app "
                  "(run scripts/build-web.sh first to ship it; in a checkout, numr-web serve "
                  "builds it)", file=sys.stderr)
            return
        dest = "numr_web/web" if self.target_name == "wheel" else "web/dist"
        build_data["force_include"][str(dist)] = dest
