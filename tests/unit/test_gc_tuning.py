"""mirrorline processes raise the collector's generation-0 threshold (see mirrorline.boot.gc_tuning)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from mirrorline.api.errors import ConfigError
from mirrorline.boot import gc_tuning


def test_thresholds_default_and_from_the_environment():
    assert gc_tuning.thresholds_from({}) == gc_tuning.THRESHOLDS
    assert gc_tuning.thresholds_from({"MIRRORLINE_GC_THRESHOLDS": " 700, 10,10 "}) == (700, 10, 10)


@pytest.mark.parametrize("value", ["700,10", "a,b,c", "0,10,10", "700,-1,10", "700,10,10,1"])
def test_a_malformed_value_is_a_config_error_naming_the_variable(value):
    with pytest.raises(ConfigError, match="MIRRORLINE_GC_THRESHOLDS=.*three comma-separated integers"):
        gc_tuning.thresholds_from({"MIRRORLINE_GC_THRESHOLDS": value})


def test_tune_sets_them_and_the_command_line_reports_a_bad_value_in_one_line():
    before = gc.get_threshold()
    try:
        assert gc_tuning.tune({"MIRRORLINE_GC_THRESHOLDS": "1234,5,6"}) == (1234, 5, 6)
        assert gc.get_threshold() == (1234, 5, 6)
    finally:
        gc.set_threshold(*before)
    env = {**os.environ, "MIRRORLINE_GC_THRESHOLDS": "lots"}
    done = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "plugins"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mirrorline: error: MIRRORLINE_GC_THRESHOLDS='lots'"), done.stderr


def test_a_mirrorline_command_runs_with_the_tuned_thresholds():
    env = {k: v for k, v in os.environ.items() if k != "MIRRORLINE_GC_THRESHOLDS"}
    done = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "--log-level", "DEBUG", "plugins"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert f"garbage collector thresholds: {','.join(map(str, gc_tuning.THRESHOLDS))}" in done.stderr
