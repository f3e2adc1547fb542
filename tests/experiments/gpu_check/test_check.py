"""experiments/gpu_check: its --cpu run fills every row, and the wheels' device command."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import transformer_nmt
from experiments.gpu_check import wheels

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_cpu_run_measures_every_section_and_writes_each_row(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{Path(transformer_nmt.__file__).parents[1]}:{ROOT}"}
    command = [sys.executable, "-m", "experiments.gpu_check.check", "--cpu", "--steps", "3"]
    result = subprocess.run(
        [*command, "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["result"].startswith(("failed", "skipped: 0"))]
    assert not [r for r in failed if "not installed" not in r["result"]], failed
    sections = {r["what"].split(".")[0] for r in rows}
    assert sections == {"1", "2", "3", "4"}
    end_to_end = rows[0]
    assert end_to_end["result"].startswith("completes in 32-true") and end_to_end["met"] in (
        True,
        False,
    )
    assert "| what | result | target | met |" in result.stdout.splitlines()[-len(rows) - 2]
    assert (tmp_path / "table.md").read_text().count("\n") == len(rows) + 2
    assert (tmp_path / "probe.json").exists() and (tmp_path / "evaluate.log").exists()


def test_the_device_command_installs_the_carried_wheels_then_runs_the_check():
    line = wheels.command()
    assert 'carry: [".whl"]' in line and "timeout_s: 540" in line
    assert (
        "--target /tmp/site .whl/*.whl" in line and "experiments.gpu_check.check --out $OUT" in line
    )
    assert "hydra-core==" in wheels.pinned(("hydra-core",))[0]
    assert ".whl" in (ROOT / ".gitignore").read_text()
