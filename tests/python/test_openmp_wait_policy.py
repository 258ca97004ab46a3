"""Kiln's OpenMP runtime spins long enough to bridge a vCPU wake-up before
sleeping, unless the user chose a policy.

libgomp prints the settings it loaded with when OMP_DISPLAY_ENV=verbose; its
default spin count is 300000, passive waiting is a spin count of 0. Checked in
fresh processes, since a policy is read once, when the runtime loads.
"""

import os
import re
import subprocess
import sys

import pytest

from kiln._openmp_wait_policy import SPIN_COUNT
from kiln_testing import CLI


def loaded_spin_counts(command, **env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(OMP_DISPLAY_ENV="verbose", **env_overrides)
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout, re.findall(r"GOMP_SPINCOUNT = '(\d+)'", result.stderr)


IMPORT_KILN = [sys.executable, "-c", "import os, kiln; print(os.environ.get('GOMP_SPINCOUNT'))"]


def test_spin_is_long_enough_to_bridge_a_wake_up_and_finite():
    # ~6 ms on this VM (kiln/_openmp_wait_policy.py); an infinite spin would hold the cores while idle.
    assert 100000 <= int(SPIN_COUNT) <= 1000000


def test_python_package_loads_openmp_with_kilns_spin_and_leaves_the_environment_alone():
    stdout, spins = loaded_spin_counts(IMPORT_KILN)
    assert spins == [SPIN_COUNT]
    assert stdout.strip() == "None"  # a PyTorch imported later keeps its own default


@pytest.mark.parametrize("variable,value,expected", [("GOMP_SPINCOUNT", "1234", "1234"),
                                                     ("OMP_WAIT_POLICY", "ACTIVE", None)])
def test_users_choice_wins(variable, value, expected):
    _, spins = loaded_spin_counts(IMPORT_KILN, **{variable: value})
    assert len(spins) == 1 and spins[0] not in ("0", SPIN_COUNT)
    if expected:
        assert spins == [expected]


def test_cli_runs_with_kilns_openmp_spin():
    _, spins = loaded_spin_counts([CLI, "--version"])
    assert spins[-1] == SPIN_COUNT  # the process that runs the command


def test_cli_keeps_the_users_choice():
    stdout, spins = loaded_spin_counts([CLI, "--version"], GOMP_SPINCOUNT="777")
    assert spins == ["777"] and stdout.strip()
