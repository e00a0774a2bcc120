"""Differential suite against PyTorch (a dev-only dependency) and float64/mpmath truth.

Hypothesis profiles: "ci" (default; few examples, derandomized so CI is deterministic) and
"full" (NUMR_HYPOTHESIS_PROFILE=full: many examples, still derandomized).
The `device` fixture comes from tests/conftest.py (cpu, webgpu on lavapipe, cuda when present).
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

torch = pytest.importorskip("torch")

settings.register_profile("ci", max_examples=12, derandomize=True, deadline=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("full", max_examples=400, derandomize=True, deadline=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.load_profile(os.environ.get("NUMR_HYPOTHESIS_PROFILE", "ci"))
