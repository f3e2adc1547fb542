"""Training-step speed with glibc's default allocator versus the tuned one train.py sets.

Runs the same short training job in two fresh processes, one with GLIBC_TUNABLES unset and one
with train.py's setting, and prints wall time per step and the share of CPU time spent in the
kernel. Usage: python -m experiments.allocator.benchmark [--steps 20] [--preset small]
"""

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

from transformer_nmt.runtime.allocator import FAST_MALLOC

ROOT = Path(__file__).resolve().parents[2]

STEP = """
import sys, time, torch
from transformer_nmt.data.bitext import TextCorpus
from transformer_nmt.data.datamodule import TranslationDataModule
from transformer_nmt.training.step.loss import label_smoothed_nll
from transformer_nmt.model import Transformer
dm = TranslationDataModule(TextCorpus(sys.argv[1], {"train": "train", "val": "val"}), "de", "en",
                           max_tokens=4096, max_len=128, cache_dir=sys.argv[2])
tok = dm.load_tokenizer(); dm.setup("fit")
sizes = {"small": dict(N=3, d_model=256, d_ff=1024, h=4), "base": {}}[sys.argv[3]]
model = Transformer(tok.vocab_size, 0, **sizes)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
batches = iter(dm.train_dataloader())
for i in range(int(sys.argv[4]) + 2):
    if i == 2:
        start = time.perf_counter()  # after two warm-up steps
    b = next(batches)
    index = b["tgt_index"]  # the real target positions, as TranslationModule computes them
    target = b["tgt_out"].flatten().index_select(0, index)
    loss, _ = label_smoothed_nll(model(b["src"], b["tgt_in"], index), target, 0.1)
    (loss / index.numel()).backward(); opt.step(); opt.zero_grad()
print(f"{(time.perf_counter() - start) / int(sys.argv[4]):.3f}")
"""


def run(env: dict, args: argparse.Namespace) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", STEP, args.data, args.cache, args.preset, str(args.steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return float(out.split()[-1]), system / (user + system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--preset", choices=["small", "base"], default="small")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/multi30k"))
    parser.add_argument("--cache", default=str(ROOT / "cache"))
    args = parser.parse_args()
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    print(f"{args.preset} preset, Multi30k de-en batches of 4096 tokens, {args.steps} steps")
    print("| allocator | s/step | kernel share of CPU time |\n|---|---|---|")
    tuned = {**plain, "GLIBC_TUNABLES": FAST_MALLOC}
    for name, env in (("glibc default", plain), ("GLIBC_TUNABLES (train.py)", tuned)):
        seconds, kernel = run(env, args)
        print(f"| {name} | {seconds:.2f} | {kernel:.0%} |", flush=True)


if __name__ == "__main__":
    main()
