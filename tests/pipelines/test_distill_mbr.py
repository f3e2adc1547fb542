"""Distillation with an MBR teacher: the student's targets are what `nmt-translate --mbr` gives,
and other MBR settings key another translation stage."""

import json
from pathlib import Path

import pytest

from helpers.checkpoint_files import write_checkpoint
from helpers.hydra_compose import ROOT
from helpers.quick_toy_run import quick_toy_run
from transformer_nmt.cli import pipeline
from transformer_nmt.cli.translate import main as translate_main
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.data.toy import ToyCorpus
from transformer_nmt.decoding.mbr import MBR
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.pipelines.stages import DONE
from transformer_nmt.pipelines.translation import Decoding, translate_stage

pytestmark = pytest.mark.slow  # trains a student

MBR_ARGS = ["--mbr", "3", "--mbr-candidates", "both", "--epsilon", "0.02", "--seed", "4"]
SEARCH_ARGS = ["--beam-size", "2", "--max-len-b", "4", "--max-tokens", "4096"]


def only(work: Path, stage: str) -> Path:
    (found,) = work.glob(f"{stage}-*")
    return found


@pytest.mark.usefixtures("one_thread")
def test_the_mbr_teachers_output_is_nmt_translate_mbrs_and_its_settings_key_the_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture
):
    pairs = ToyCorpus(num_train=300, num_val=0, num_test=0, seed=1234).read("train", "en", "de")
    tokenizer = BPETokenizer.train([s for pair in pairs for s in pair], 400, 1)
    teacher = write_checkpoint(tmp_path / "teacher.ckpt", tokenizer, seed=3)
    work = tmp_path / "work"
    student = [
        *quick_toy_run(2),
        f"paths.root_dir={ROOT}",
        f"paths.cache_dir={tmp_path}/cache",
        "data.corpus.num_train=12",
        "logger=none",
    ]
    argv = ["distill", "--work", str(work), "--teacher", str(teacher), *MBR_ARGS, *SEARCH_ARGS]
    pipeline.main([*argv, *student])
    capsys.readouterr()
    distilled = only(work, "distill")
    source = only(work, "source") / "train.en"
    translate_main([str(teacher), str(source), *MBR_ARGS, *SEARCH_ARGS])
    assert (distilled / "output.txt").read_text() == capsys.readouterr().out
    record = json.loads((distilled / DONE).read_text())["decoding"]["mbr"]
    assert record == {
        "sampling": {
            "n": 3, "temperature": 1.0, "top_k": None, "top_p": 1.0, "seed": 4, "epsilon": 0.02
        },
        "candidates": "both",
        "utility": "chrf",
    }  # fmt: skip

    # The stage as the pipeline keys it: the same settings reuse it, other MBR settings do not.
    members = [[teacher]]
    same = Decoding(beam_size=2, max_len_b=4, mbr=MBR(Sampling(n=3, seed=4, epsilon=0.02), "both"))
    assert translate_stage(work, "distill", members, source, same) == (
        distilled / "output.txt",
        False,
    )
    other = Decoding(beam_size=2, max_len_b=4, mbr=MBR(Sampling(n=3, seed=5, epsilon=0.02), "both"))
    output, ran = translate_stage(work, "distill", members, source, other)
    assert ran and output.parent != distilled and len(list(work.glob("distill-*"))) == 2


def test_mbr_options_without_mbr_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture):
    argv = ["distill", "--work", str(tmp_path / "w"), "--teacher", "t.ckpt", "--epsilon", "0.1"]
    with pytest.raises(SystemExit):
        pipeline.main(argv)
    assert "--epsilon shape the teacher's MBR decoding: add --mbr N" in capsys.readouterr().err
    with pytest.raises(ValueError, match="samples or decodes with MBR"):
        Decoding(sampling=Sampling(), mbr=MBR())
