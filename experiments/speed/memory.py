"""Peak memory and speed of `experiment=multi30k_de_en` training per allocator setting .

Trains for the same wall time in one fresh process per setting, one after another (`--repeats`
cycles through them again), and prints peak RSS (GNU `time -v` where /usr/bin/time exists, else
the process's VmHWM read every second), the median of `train/tokens_per_sec`, and the last and
largest `train/rss_gb` from the run's CSV log. The settings:

- `tunables`: train.py's GLIBC_TUNABLES (freed memory stays in the process), no trimming;
- `tunables + malloc_trim`: the same, and the `malloc_trim` callback after every validation;
- `trim_threshold 256 MiB`: mmap_max=0 as train.py, but free() returns the heap's top to the
  system once 256 MiB of it is free; no callback.

    nice -n 10 python -m experiments.speed.memory --minutes 60

Arguments after `--` are added to every run's overrides, e.g. a smoke run that validates often:
`--minutes 1 -- trainer.val_check_interval=10 trainer.limit_val_batches=2`. The tokenizer must be
in the cache already (one earlier run of the experiment), or the first run also trains it.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_nmt.runtime.allocator import FAST_MALLOC

ROOT = Path(__file__).resolve().parents[2]

GNU_TIME = Path("/usr/bin/time")
NO_TRIM = ["~callbacks.malloc_trim"]
BOUNDED = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=268435456"
SETTINGS = {
    "tunables": (FAST_MALLOC, NO_TRIM),
    "tunables + malloc_trim": (FAST_MALLOC, []),
    "trim_threshold 256 MiB": (BOUNDED, NO_TRIM),
}


def max_time(minutes: float) -> str:
    """Lightning's DD:HH:MM:SS."""
    seconds = round(minutes * 60)
    return f"00:{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def vm_hwm_gb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kb / 2**20


def train(tunables: str, overrides: list[str], run_dir: Path, args: argparse.Namespace) -> float:
    """Run the experiment in a fresh process; its peak RSS in GiB."""
    command = [
        sys.executable, str(ROOT / "train.py"), "experiment=multi30k_de_en", "logger=csv",
        f"trainer.max_time={max_time(args.minutes)}", f"hydra.run.dir={run_dir}",
        *overrides, *args.overrides,
    ]  # fmt: skip
    if args.data_dir:
        command.append(f"paths.data_dir={args.data_dir}")
    report = run_dir / "time-v.txt"
    if GNU_TIME.exists():
        command = [str(GNU_TIME), "-v", "-o", str(report), *command]
    run_dir.mkdir(parents=True)
    with open(run_dir / "output.txt", "w") as output:
        process = subprocess.Popen(
            command, env={**os.environ, "GLIBC_TUNABLES": tunables}, stdout=output, stderr=output
        )
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, vm_hwm_gb(process.pid) or 0.0)  # without GNU time: the fallback
            time.sleep(1)
    if process.returncode:
        raise RuntimeError(f"training failed, see {run_dir / 'output.txt'}")
    if not GNU_TIME.exists():
        return peak
    for line in report.read_text().splitlines():
        if "Maximum resident set size" in line:
            return int(line.split()[-1]) / 2**20  # kB
    raise RuntimeError(f"no maximum resident set size in {report}")


def logged(run_dir: Path) -> dict[str, list[float]]:
    """Every value of each metric in the run's CSV log."""
    values: dict[str, list[float]] = {}
    for path in run_dir.glob("csv/version_*/metrics.csv"):
        with open(path) as file:
            for row in csv.DictReader(file):
                for name, value in row.items():
                    if value:
                        values.setdefault(name, []).append(float(value))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="training time a run")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over the settings")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated")
    parser.add_argument("--data-dir", help="paths.data_dir (default: the config's)")
    parser.add_argument("--out", help="run folders (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="after --: overrides for every run")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="memory-"))
    peak_source = "GNU time -v" if GNU_TIME.exists() else "VmHWM, polled every second"
    print(f"{args.minutes} minutes a run, overrides {args.overrides}; runs in {out}")
    print(f"load average at the start {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print(f"| setting | peak RSS GiB ({peak_source}) | train/rss_gb last / max | tokens/s median "
          "| steps | validations |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for repeat in range(args.repeats):
        for name in args.settings.split(","):
            tunables, overrides = SETTINGS[name]
            run_dir = out / f"{repeat}-{name.replace(' ', '_')}"
            peak = train(tunables, overrides, run_dir, args)
            metrics = logged(run_dir)
            rss = metrics.get("train/rss_gb", [float("nan")])
            speed = statistics.median(metrics.get("train/tokens_per_sec", [float("nan")]))
            steps = int(max(metrics.get("step", [0])))
            validations = len(metrics.get("val/bleu", []))
            print(f"| {name} | {peak:.2f} | {rss[-1]:.2f} / {max(rss):.2f} | {speed:,.0f} "
                  f"| {steps} | {validations} |", flush=True)  # fmt: skip
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
