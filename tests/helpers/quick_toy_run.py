"""Overrides for a `python train.py` of the toy task that runs in seconds and logs every step."""


def quick_toy_run(max_steps: int) -> list[str]:
    """Epochs of a few steps, validation on one batch, CSV metrics at every step, fp32."""
    return [
        "experiment=toy",
        "logger=csv",
        "data.corpus.num_train=300",
        "data.max_tokens=192",
        "trainer.max_epochs=-1",
        f"trainer.max_steps={max_steps}",
        "+trainer.limit_val_batches=1",
        "+trainer.num_sanity_val_steps=0",
        "+trainer.enable_progress_bar=false",
        "trainer.log_every_n_steps=1",
        # Not auto: its timing probe can choose bf16 for one run of a loaded CPU and fp32 for the
        # next.
        "trainer.precision=32-true",
        "module.max_len_b=5",
        "~callbacks.attention_maps",
        "~callbacks.translation_table",
    ]
