import copy
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.plugins.precision import MixedPrecision

from helpers.ddp import BatchesPerRank, batch, sentences, tiny_module
from transformer_nmt.training.step.module import TranslationModule


def configured_adam(**trainer_args) -> tuple[TranslationModule, torch.optim.Optimizer, object]:
    module = tiny_module(warmup_steps=4)  # rates large enough to move the weights
    module.trainer = L.Trainer(accelerator="cpu", max_steps=10, logger=False, **trainer_args)
    configured = module.configure_optimizers()
    return module, configured["optimizer"], configured["lr_scheduler"]["scheduler"]


def test_the_papers_adam_runs_fused_and_updates_as_the_tensor_loop_does():
    module, fused, scheduler = configured_adam()
    assert fused.defaults["fused"] is True
    assert fused.defaults["betas"] == (0.9, 0.98) and fused.defaults["eps"] == 1e-9

    reference_model = copy.deepcopy(module.model)
    reference = torch.optim.Adam(
        reference_model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, foreach=False
    )
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        lr = fused.param_groups[0]["lr"]
        reference.param_groups[0]["lr"] = lr
        for p, q in zip(module.model.parameters(), reference_model.parameters(), strict=True):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        fused.step()
        reference.step()
        scheduler.step()
    for p, q in zip(module.model.parameters(), reference_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
    assert any(
        not torch.equal(p, q)
        for p, q in zip(module.model.parameters(), tiny_module().model.parameters(), strict=True)
    ), "the steps must have moved the weights"


def fit(
    steps: int, ckpt_path: Path | None = None, fp16: bool = False, clip: float | None = None
) -> L.Trainer:
    """`tiny_module()` trained to `steps` updates on a CPU; fp16 with a loss scaler if asked."""
    plugins = [MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu"))] if fp16 else []
    trainer = L.Trainer(
        accelerator="cpu", max_steps=steps, plugins=plugins, gradient_clip_val=clip, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        use_distributed_sampler=False,
    )  # fmt: skip
    pairs = batch(*sentences([3, 5, 6]))
    trainer.fit(tiny_module(warmup_steps=4), BatchesPerRank([[pairs] * 4]), ckpt_path=ckpt_path)
    return trainer


@pytest.mark.parametrize("clip, fused", [(None, True), (1.0, False)])
def test_fp16_loss_scaling_with_clipping_trains_with_the_tensor_loop(clip, fused):
    # The fused step unscales fp16 gradients itself, and Lightning then refuses to clip them.
    trainer = fit(2, fp16=True, clip=clip)
    assert trainer.global_step == 2
    assert bool(trainer.optimizers[0].defaults["fused"]) is fused


@pytest.mark.parametrize("saved_fused", [False, True])
def test_a_resumed_run_makes_its_own_fusing_choice(tmp_path, saved_fused):
    path = tmp_path / "last.ckpt"
    fp16_clipping = {"fp16": True, "clip": 1.0}  # the one setting that keeps the tensor loop
    fit(2, **({} if saved_fused else fp16_clipping)).save_checkpoint(path)
    resumed = fit(3, path, **(fp16_clipping if saved_fused else {}))
    assert resumed.global_step == 3
    assert bool(resumed.optimizers[0].param_groups[0]["fused"]) is not saved_fused
