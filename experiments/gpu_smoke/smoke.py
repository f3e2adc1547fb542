"""The first thing to run on a new GPU machine: the headline path end to end, in minutes.

For one GPU, then two if the machine has them: `train.py experiment=toy model=base` for 50
steps in the precision `trainer.precision=auto` picks, Lightning's sanity check and one
validation (greedy search and sacreBLEU on the GPU), then `nmt-evaluate --device cuda` (beam
search) on the toy test set. Prints one table: precision picked, tokens/s, peak memory, val
BLEU, syncs per training step, test BLEU.

    python experiments/gpu_smoke/smoke.py               # on a GPU machine
    python experiments/gpu_smoke/smoke.py --cpu         # tiny model on the CPU: checks the script
    python experiments/gpu_smoke/smoke.py --cpu --devices 1 2   # and gloo DDP on 2 processes
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_nmt.data.toy import ToyCorpus

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEED = 1234  # the runs' seed, which also draws the toy test split written for nmt-evaluate


def train_command(run_dir: Path, devices: int, cpu: bool, steps: int) -> list[str]:
    """`python train.py ...` as a user types it, plus the probe callback."""
    if cpu:
        hardware = ["model=tiny", "trainer=cpu" if devices == 1 else "trainer=ddp_cpu"]
    else:  # 4096-token batches padded to multiples of 8, as tensor cores like
        hardware = ["model=base", "trainer=gpu", "data.max_tokens=4096"]
        hardware.append("data.pad_to_multiple_of=8")
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "experiment=toy",
        *hardware,
        f"trainer.devices={devices}",
        f"trainer.max_steps={steps}",
        "trainer.max_epochs=-1",
        f"trainer.val_check_interval={steps}",  # one validation, at the last step
        "trainer.check_val_every_n_epoch=null",
        "logger=csv",
        f"seed={SEED}",
        f"hydra.run.dir={run_dir}",
        f"paths.cache_dir={run_dir.parent / 'cache'}",
        "+callbacks.smoke_probe._target_=experiments.gpu_smoke.probe.SmokeProbe",
        f"+callbacks.smoke_probe.path={run_dir / 'probe.json'}",
    ]


def write_test_set(out: Path) -> tuple[Path, Path]:
    """The toy test split the runs' data module holds out, as nmt-evaluate's --src and --ref."""
    pairs = ToyCorpus(seed=SEED).read("test", "en", "de")
    src, ref = out / "test.en", out / "test.de"
    src.write_text("".join(f"{en}\n" for en, _ in pairs))
    ref.write_text("".join(f"{de}\n" for _, de in pairs))
    return src, ref


def run(command: list[str], log: Path) -> float:
    """Runs a command with its output in `log`; returns its wall time, fails with the log's tail."""
    start = time.perf_counter()
    with open(log, "w") as f:
        result = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if result.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n" + "\n".join(tail))
    return time.perf_counter() - start


def smoke(out: Path, devices: int, cpu: bool, steps: int) -> dict:
    """Train, validate and evaluate once; the probe's measurements plus the evaluation's."""
    run_dir = out / f"devices{devices}"
    run_dir.mkdir(parents=True, exist_ok=True)
    train_seconds = run(train_command(run_dir, devices, cpu, steps), run_dir / "train.log")
    src, ref = write_test_set(out)
    device = "cpu" if cpu else "cuda"
    evaluate = [sys.executable, "-m", "transformer_nmt.cli.evaluate"]
    evaluate += [str(run_dir / "checkpoints" / "last.ckpt"), "--src", str(src), "--ref", str(ref)]
    evaluate += ["--device", device, "--output-dir", str(run_dir / "evaluation")]
    evaluate_seconds = run(evaluate, run_dir / "evaluate.log")
    report = json.loads((run_dir / "evaluation" / "report.json").read_text())
    probe = json.loads((run_dir / "probe.json").read_text())
    return {
        **probe,
        "test_bleu": report["BLEU"]["score"],
        "eval_device": device,
        "train_seconds": train_seconds,
        "evaluate_seconds": evaluate_seconds,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| devices | precision | tokens/s | peak memory | val BLEU | syncs/step | "
        "nmt-evaluate BLEU | train s | evaluate s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bleu = "n/a" if r["val_bleu"] is None else f"{r['val_bleu']:.2f}"
        lines.append(
            f"| {r['devices']} | {r['precision']} | {r['tokens_per_sec']:,.0f} "
            f"| {r['peak_memory_gb']:.2f} GB {r['memory']} | {bleu} | {r['syncs_per_step']:.1f} "
            f"| {r['test_bleu']:.2f} ({r['eval_device']}) | {r['train_seconds']:.0f} "
            f"| {r['evaluate_seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cpu", action="store_true", help="tiny model on the CPU, no GPU needed")
    parser.add_argument(
        "--devices",
        type=int,
        nargs="+",
        help="device counts to run (default: 1, and 2 where two GPUs exist; 1 with --cpu)",
    )
    parser.add_argument("--steps", type=int, default=50, help="training steps per run (50)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "outputs" / "gpu_smoke", help="runs and logs go here"
    )
    args = parser.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --cpu to check the script on this machine")
    if args.devices is None:
        gpus = 0 if args.cpu else torch.cuda.device_count()
        args.devices = [1, 2] if gpus >= 2 else [1]
    rows = []
    for devices in args.devices:
        print(f"{devices} device(s): training {args.steps} steps, then nmt-evaluate...", flush=True)
        rows.append(smoke(args.out, devices, args.cpu, args.steps))
    print(table(rows))
    print(f"runs, logs and probe.json files: {args.out}")


if __name__ == "__main__":
    main()
