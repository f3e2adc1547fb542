"""experiments/frontier/ab.py: two trees' workers translate the same chunks in turn."""

import subprocess
import sys
from pathlib import Path

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer

ROOT = Path(__file__).parents[2]


def test_one_tree_against_itself_gives_the_same_outputs_chunk_by_chunk(tmp_path):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    checkpoint = write_checkpoint(tmp_path / "model.ckpt", tokenizer)
    src = tmp_path / "src.txt"
    src.write_text("".join(f"{s}\n" for s in SENTENCES[:5]))
    command = [
        sys.executable, "-m", "experiments.frontier.ab", str(checkpoint), "--src", str(src),
        "--before", str(ROOT), "--after", str(ROOT), "--beam-size", "2", "--chunk", "2",
        "--rounds", "2", "--batch-size", "2",
    ]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert "(quartiles" in last and "6 chunks" in last and last.endswith("5 of 5 outputs the same")
