"""experiments/gpu_check: its --cpu run fills every row, the CTranslate2 GPU probe, the section
selection of a rerun, and the wheels' device command."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transformer_nmt
from experiments.gpu_check import check, ct2_cuda, wheels
from transformer_nmt.training.plan.precision import AUTO_CPU_PRECISION_ENV

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_the_cpu_run_measures_every_section_and_writes_each_row(tmp_path):
    pythonpath = f"{Path(transformer_nmt.__file__).parents[1]}:{ROOT}"
    # precision=auto fixed to fp32: a bf16 timing on a busy CI machine may choose either
    env = {**os.environ, "PYTHONPATH": pythonpath, AUTO_CPU_PRECISION_ENV: "32-true"}
    command = [sys.executable, "-m", "experiments.gpu_check.check", "--cpu", "--steps", "3"]
    result = subprocess.run(
        [*command, "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["result"].startswith(("failed", "skipped: 0"))]
    assert not [r for r in failed if "not installed" not in r["result"]], failed
    sections = {r["what"].split(".")[0] for r in rows}
    assert sections == {"0", "1", "2", "3", "4"}
    versions = rows[0]  # printed before any row is measured, and the first row
    assert versions["what"].startswith("0. ") and versions["torch"] == torch.__version__
    assert {"CUDA", "cuDNN", "lightning", "transformers", "ctranslate2", "driver"} <= set(versions)
    assert result.stdout.startswith(f"gpu_check on torch {torch.__version__}")
    budgets = {r["world_size"]: r for r in rows if "world_size" in r}
    assert set(budgets) == {1, check.SIMULATED_RANKS}
    for ranks, row in budgets.items():  # the plan reaches 1,024 tokens an update, within 1 %
        update = row["max_tokens"] * row["accumulate_grad_batches"] * ranks
        assert 1024 <= update <= 1024 * 1.01 and row["met"], row
    assert all(r["cpu_seconds"] >= 0 and r["seconds"] >= 0 for r in rows)
    end_to_end = rows[1]
    assert end_to_end["result"].startswith("completes in 32-true"), end_to_end
    assert "| what | result | target | met |" in result.stdout.splitlines()[-len(rows) - 2]
    assert (tmp_path / "table.md").read_text().count("\n") == len(rows) + 2
    assert (tmp_path / "probe.json").exists() and (tmp_path / "evaluate.log").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the reason given without a GPU")
def test_ctranslate2_on_the_gpu_is_tried_in_a_subprocess_that_says_why_it_cannot_run():
    assert "sees no CUDA device" in ct2_cuda.problem()


@pytest.mark.parametrize(
    ("argv", "sections"),
    [([], {1, 2, 3, 4}), (["--rows", "3"], {2, 3}), (["--rows", "1", "4"], {1, 2, 4})],
)
def test_a_rerun_selects_sections_and_brings_the_batches_3_and_4_train_on(
    monkeypatch, argv, sections
):
    monkeypatch.setattr("sys.argv", ["check", "--cpu", *argv])
    assert check.parse_args().rows == sections


def test_the_device_command_installs_the_carried_wheels_then_runs_the_check():
    line = wheels.command()
    assert 'carry: [".whl"]' in line and "timeout_s: 480" in line and "timeout 420 " in line
    assert (
        "--target /tmp/site .whl/*.whl" in line and "experiments.gpu_check.check --out $OUT" in line
    )
    rerun = wheels.command([3, 4])  # on the warm machine, inside the session's 900 device seconds
    assert "--rows 3 4 --seconds 150" in rerun and "timeout 200 " in rerun
    assert "timeout_s: 240" in rerun
    assert wheels.FULL_CALL_S[0] + wheels.RERUN_S[0] <= 900 - 180  # a start of up to 3 minutes
    assert "hydra-core==" in wheels.pinned(("hydra-core",))[0]
    assert ".whl" in (ROOT / ".gitignore").read_text()
