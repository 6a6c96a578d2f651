"""The PEP 517 backend of ``pip install ./host/python``: maturin's, after one
check that cargo cannot make early.

The extension embeds the policy component of this checkout,
``target/policy/session_switch.wasm`` (``make component``), or the file
``$SESSION_SWITCH_POLICY_WASM`` names; ``host/runtime/build.rs`` looks in the
same two places. When it is missing, cargo only reaches that build script
after compiling most of wasmtime (minutes on two cores), and pip then shows
the panic among pages of compiler output. Checked here first, the build
stops at once with one line saying what to run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import maturin
from maturin import (  # noqa: F401  (the hooks pip calls, unchanged)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

VAR = "SESSION_SWITCH_POLICY_WASM"


def _policy_component() -> Path:
    """The component the build will embed (the rule of host/runtime/build.rs);
    exits with the fix when it is missing."""
    named = os.environ.get(VAR)
    # This file is host/python/build-backend/; the checkout is three up.
    checkout = Path(__file__).resolve().parents[3]
    path = Path(named) if named else checkout / "target" / "policy" / "session_switch.wasm"
    if not path.is_file():
        sys.stderr.write(
            f"session-switch: the policy component {path} is missing: run `make component` "
            f"in the checkout first (or set {VAR} to a built component)\n"
        )
        raise SystemExit(1)
    return path


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _policy_component()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _policy_component()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
