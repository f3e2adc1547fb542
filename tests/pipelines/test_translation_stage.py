"""A translation stage killed midway goes on after its last finished part, as if never stopped."""

from pathlib import Path

import pytest

from helpers.checkpoint_files import SENTENCES, write_checkpoint
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding.sampling import Sampling
from transformer_nmt.pipelines import translation
from transformer_nmt.pipelines.stages import DONE
from transformer_nmt.pipelines.translation import Decoding, translate_stage


class Killed(Exception):
    """Stands for the kill that stops a stage midway."""


@pytest.mark.usefixtures("one_thread")
def test_a_killed_stage_resumes_from_its_last_part_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    tokenizer = BPETokenizer.train(SENTENCES, vocab_size=280, min_frequency=1)
    members = [[write_checkpoint(tmp_path / "m.ckpt", tokenizer)]]
    source = tmp_path / "mono.txt"
    source.write_text("".join(f"{s}\n" for s in SENTENCES[:7]))
    decoding = Decoding(max_len_b=3, max_tokens=64, sampling=Sampling(seed=5))
    monkeypatch.setattr(translation, "PART_LINES", 2)
    whole, _ = translate_stage(tmp_path / "once", "t", members, source, decoding)

    read = []  # the lines each run translated
    stream = translation.Translator.stream

    def killed_after_five(translator, sentences, *args, **kwargs):
        for k, result in enumerate(stream(translator, sentences, *args, **kwargs)):
            if k + len(read) == 5:
                raise Killed
            yield result

    def counted(translator, sentences, *args, **kwargs):
        read.extend(sentences)
        return stream(translator, sentences, *args, **kwargs)

    work = tmp_path / "work"
    monkeypatch.setattr(translation.Translator, "stream", killed_after_five)
    with pytest.raises(Killed):
        translate_stage(work, "t", members, source, decoding)
    (stage,) = work.glob("t-*")
    assert sorted(p.name for p in (stage / translation.PARTS).iterdir()) == [
        "000000.txt",
        "000001.txt",
    ]  # lines 1-4 in whole parts; line 5 was not written
    (stage / translation.PARTS / ".000002.txt.0123.tmp").write_text("half a part")  # a kill's
    monkeypatch.setattr(translation.Translator, "stream", counted)
    output, ran = translate_stage(work, "t", members, source, decoding)
    assert ran and read == SENTENCES[4:7]  # only the lines after the finished parts
    assert output.read_text() == whole.read_text()  # each line seeded by its index in the file
    assert sorted(p.name for p in stage.iterdir()) == sorted([DONE, "output.txt"])
