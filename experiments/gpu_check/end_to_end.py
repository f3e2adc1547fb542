"""The check's first row: the headline path end to end, as a user runs it.

`train.py experiment=toy model=base` on one GPU in the precision `trainer.precision=auto` picks:
Lightning's sanity check, one validation (greedy search and sacreBLEU on the GPU), attention
maps, a checkpoint; then `nmt-evaluate --device cuda` with beam 4 on the toy test set. The probe
callback (probe.py) measures tokens/s, peak memory and syncs per step inside the run.
"""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from transformer_nmt.data.toy import ToyCorpus

ROOT = Path(__file__).resolve().parents[2]
SEED = 1234  # the run's seed, which also draws the toy test split written for nmt-evaluate
CPU_SENTENCES = 16  # validation and test sentences with --cpu: the path, not the score
# Lines of a run's log that the target "no warning about a CPU tensor or a sync" looks for.
WARNING = re.compile(r"warn|synchroniz|cpu tensor", re.IGNORECASE)


def train_command(run_dir: Path, cpu: bool, steps: int) -> list[str]:
    """`python train.py ...` as a user types it, plus the probe callback."""
    if cpu:
        hardware = ["model=tiny", "trainer=cpu", f"data.corpus.num_val={CPU_SENTENCES}"]
        hardware.append(f"data.corpus.num_test={CPU_SENTENCES}")
    else:  # batches as large as the GPU holds, padded to multiples of 8 under bf16
        hardware = ["model=base", "trainer=gpu", "data.max_tokens=auto"]
        hardware.append("data.pad_to_multiple_of=auto")
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "experiment=toy",
        *hardware,
        f"trainer.max_steps={steps}",
        "trainer.max_epochs=-1",
        f"trainer.val_check_interval={steps}",  # one validation, at the last step
        "trainer.check_val_every_n_epoch=null",
        "logger=csv",
        f"seed={SEED}",
        f"hydra.run.dir={run_dir}",
        f"paths.cache_dir={run_dir.parent / 'cache'}",
        "+callbacks.probe._target_=experiments.gpu_check.probe.SmokeProbe",
        f"+callbacks.probe.path={run_dir / 'probe.json'}",
        f"+callbacks.probe.skip_steps={max(1, min(5, steps // 2))}",  # warm-up steps untimed
    ]


def write_test_set(out: Path, cpu: bool) -> tuple[Path, Path]:
    """The toy test split the run's data module holds out, as nmt-evaluate's --src and --ref."""
    corpus = ToyCorpus(num_val=CPU_SENTENCES, num_test=CPU_SENTENCES, seed=SEED) if cpu else None
    pairs = (corpus or ToyCorpus(seed=SEED)).read("test", "en", "de")
    src, ref = out / "test.en", out / "test.de"
    src.write_text("".join(f"{en}\n" for en, _ in pairs))
    ref.write_text("".join(f"{de}\n" for _, de in pairs))
    return src, ref


def run(command: list[str], log: Path, timeout: float) -> float:
    """Runs a command with its output in `log`; its wall time; fails with the log's tail."""
    start = time.perf_counter()
    with open(log, "w") as f:
        result = subprocess.run(
            command, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, timeout=timeout
        )
    if result.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(f"failed ({result.returncode}): {' '.join(command)}\n{tail}")
    return time.perf_counter() - start


def end_to_end(out: Path, cpu: bool, steps: int, timeout: float) -> dict:
    """Train, validate and evaluate once; the probe's measurements and the evaluation's."""
    run_dir = out / "end_to_end"
    run_dir.mkdir(parents=True, exist_ok=True)
    train_log = run_dir / "train.log"
    train_seconds = run(train_command(run_dir, cpu, steps), train_log, timeout)
    src, ref = write_test_set(run_dir, cpu)
    device = "cpu" if cpu else "cuda"
    evaluate = [sys.executable, "-m", "transformer_nmt.cli.evaluate"]
    evaluate += [str(run_dir / "checkpoints" / "last.ckpt"), "--src", str(src), "--ref", str(ref)]
    evaluate += ["--device", device, "--beam-size", "4", "--max-tokens", "4096"]
    evaluate += ["--output-dir", str(run_dir / "evaluation")]
    evaluate += ["--max-len-b", "5"] if cpu else ["--dtype", "bf16-mixed"]
    evaluate_seconds = run(evaluate, run_dir / "evaluate.log", timeout - train_seconds)
    report = json.loads((run_dir / "evaluation" / "report.json").read_text())
    probe = json.loads((run_dir / "probe.json").read_text())
    warnings = [line for line in train_log.read_text().splitlines() if WARNING.search(line)]
    return {
        **probe,
        "test_bleu": report["BLEU"]["score"],
        "eval_device": device,
        "attention_maps": len(list((run_dir / "attention").rglob("*.png"))),
        "warnings": warnings[:20],
        "train_seconds": train_seconds,
        "evaluate_seconds": evaluate_seconds,
    }
