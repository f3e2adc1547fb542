"""Test-only callbacks, loaded into `python train.py` subprocesses through PYTHONPATH=tests, the
environment those subprocesses run in, and a tiny module with the batches to train it in-process
on one or several ranks."""

import os
from pathlib import Path

import lightning as L
import torch

from helpers.hydra_compose import ROOT
from transformer_nmt.data.batching import collate
from transformer_nmt.data.tokenizer import EOS_ID, PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer
from transformer_nmt.training.step.module import TranslationModule


def ddp_env() -> dict[str, str]:
    """The environment of a `train.py` subprocess that re-launches itself once per rank."""
    # This checkout's code and test helpers, before whatever copy of the package is installed.
    path = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    )
    # One thread per rank: two ranks share the two cores of a CI runner.
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def weights_callback(dirpath: Path) -> list[str]:
    """Overrides that make every rank of a `train.py` run save its final weights under dirpath."""
    return [
        "+callbacks.weights._target_=helpers.ddp.SaveWeightsPerRank",
        f"+callbacks.weights.dirpath={dirpath}",
    ]


class SaveWeightsPerRank(L.Callback):
    """Writes every rank's final weights to `<dirpath>/rank<global rank>.pt`.

    Lightning saves checkpoints on rank zero only, so this is how a test sees the other ranks.
    The weights are those after fit: listed after a `WeightEMA`, the average it swaps in.
    """

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        torch.save(pl_module.state_dict(), self.dirpath / f"rank{trainer.global_rank}.pt")


def assert_same_weights(dirpath: Path) -> dict[str, torch.Tensor]:
    """Ranks 0 and 1 of `SaveWeightsPerRank` hold the same weights bit for bit; returns rank 0's."""
    rank0, rank1 = (torch.load(dirpath / f"rank{r}.pt") for r in (0, 1))
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        torch.testing.assert_close(rank0[name], rank1[name], rtol=0, atol=0, msg=name)
    return rank0


class SaveGradients(L.Callback):
    """Writes the gradients each rank hands the optimizer (after DDP's all-reduce) to a file."""

    def __init__(self, dirpath: str) -> None:
        self.dirpath = Path(dirpath)

    def on_before_optimizer_step(
        self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        grads = {name: p.grad.clone() for name, p in pl_module.named_parameters()}
        torch.save(grads, self.dirpath / f"rank{trainer.global_rank}.pt")


class BatchesPerRank:
    """A training loader that serves the batches `batches[rank]` to each rank, in order."""

    def __init__(self, batches: list[list[dict]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches[0])

    def __iter__(self):
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        yield from self.batches[rank]


def tiny_module(**module_args) -> TranslationModule:
    torch.manual_seed(0)
    model = Transformer(vocab_size=48, pad_id=PAD_ID, N=1, d_model=16, d_ff=32, h=2, dropout=0.0)
    tokenizer = BPETokenizer.train(["ein zwei drei"], vocab_size=280, min_frequency=1)
    return TranslationModule(model, tokenizer, **module_args)


def sentences(*target_lengths: list[int]) -> list[list[dict]]:
    """Random sentence pairs, one list per list of target lengths (sources 2 tokens shorter)."""
    g = torch.Generator().manual_seed(0)
    words = lambda n: torch.randint(4, 48, (n,), generator=g).tolist()  # noqa: E731
    return [
        [{"src": words(n - 2) + [EOS_ID], "tgt": words(n)} for n in ns] for ns in target_lengths
    ]


def batch(*groups: list[dict]) -> dict:
    """One padded batch of every sentence pair in `groups`."""
    return collate([pair for group in groups for pair in group], PAD_ID)
