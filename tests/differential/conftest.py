"""Differential suite against PyTorch (a dev-only dependency) and float64/mpmath truth.

Hypothesis profiles: "ci" (default; few examples, derandomized so CI is deterministic) and
"full" (NUMR_HYPOTHESIS_PROFILE=full: many examples, still derandomized). The profile decorates
this suite's tests only (_diff.HYPOTHESIS, where the profiles are registered); the global
default profile is left alone.
The `device` fixture comes from tests/conftest.py (cpu, webgpu on lavapipe, cuda when present).
"""
import pytest

torch = pytest.importorskip("torch")
