"""`module.compile=auto`: the device's default, decided once the trainer knows the device."""

import lightning as L
import pytest

from helpers.checkpoint_files import SENTENCES
from helpers.hydra_compose import compose_train
from transformer_nmt.data.tokenizer import PAD_ID, BPETokenizer
from transformer_nmt.model import Transformer
from transformer_nmt.training.plan import device_defaults
from transformer_nmt.training.plan.run_plan import check_config
from transformer_nmt.training.step.module import TranslationModule


def test_an_unknown_device_takes_the_cpu_value():
    assert device_defaults.device_default("compile", "mps") is False


@pytest.mark.parametrize("cpu_value", [False, True])
def test_auto_compiles_where_the_device_default_says_so(monkeypatch, cpu_value):
    monkeypatch.setitem(device_defaults.DEFAULTS, "compile", {"cpu": cpu_value, "cuda": False})
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    model = Transformer(tokenizer.vocab_size, PAD_ID, N=1, d_model=16, d_ff=32, h=2)
    module = TranslationModule(model, tokenizer, compile="auto")
    assert model._compiled_call_impl is None  # undecided until the device is known
    module.trainer = L.Trainer(accelerator="cpu", devices=1, logger=False)
    module.configure_model()
    assert (model._compiled_call_impl is not None) == cpu_value  # compiled lazily, at first call


def test_auto_is_no_ddp_refusal(tmp_path):
    cfg = compose_train(tmp_path, ["trainer=ddp_cpu", "trainer.devices=2", "module.compile=auto"])
    check_config(cfg)  # module.compile=true would be refused here
