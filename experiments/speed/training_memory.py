"""Peak memory of fp32 training, each peer in a fresh process (the allocator of this one).

`measure_memory` starts this module as a child: `python -m experiments.speed.training_memory
PEER SIZE BATCHES_FILE --threads N` trains on the saved batches and prints a JSON line.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from experiments.common.peers import SIZES, build
from experiments.common.training import make_optimizer, train_step

ROOT = Path(__file__).resolve().parents[2]


def peak_rss_gb() -> float:
    """This process's peak resident memory since it started, VmHWM.

    Not getrusage's ru_maxrss: Linux carries that across fork and exec, so a child would start
    at its parent's peak.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def train_and_report(peer: str, size: str, batches_file: str) -> None:
    """Train peer at size on the saved batches; print the peak RSS before building it and after."""
    batches = torch.load(batches_file)
    before = peak_rss_gb()
    impl = build(peer, SIZES[size])
    impl.model.train()
    optimizer = make_optimizer(impl.model)
    for batch in batches:
        train_step(impl, optimizer, batch, "fp32")
    print(json.dumps({"before": before, "peak": peak_rss_gb()}))


def measure_memory(peer: str, size: str, batches: list[dict], threads: int) -> dict[str, float]:
    """Peak RSS in GB of fp32 training on `batches` in a fresh process: "before" and "peak"."""
    with tempfile.TemporaryDirectory() as tmp:
        batches_file = str(Path(tmp) / "batches.pt")
        torch.save(batches, batches_file)
        command = [sys.executable, "-m", __spec__.name, peer, size, batches_file]
        command += ["--threads", str(threads)]
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer")
    parser.add_argument("size")
    parser.add_argument("batches_file")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train_and_report(args.peer, args.size, args.batches_file)


if __name__ == "__main__":
    main()
