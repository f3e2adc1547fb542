"""The validation's off-target rate: counts summed over batches as one call over all outputs."""

import logging

import pytest

from transformer_nmt.data.languages import Languages
from transformer_nmt.evaluation.off_target import off_target_rate
from transformer_nmt.training.step.off_target import OffTargetRate, direction_off_target

SAID = {
    "de": "Ein Mann steht auf der Straße und wartet auf den Bus.",
    "en": "A man is standing on the street and waiting for the bus.",
    "fr": "Un homme se tient dans la rue et attend le bus.",
}


def test_batches_and_merged_ranks_count_as_one_call_over_all_outputs():
    outputs = [SAID["fr"], SAID["en"], "", SAID["fr"], SAID["de"], "1 2"]
    languages = list(SAID)
    one, other = OffTargetRate("fr", languages), OffTargetRate("fr", languages)
    one.update(outputs[:2])
    one.update(outputs[2:3])
    other.update(outputs[3:])  # another rank's: merged as the all-reduce sums them
    one.merge_state(other)
    assert one.compute().item() == pytest.approx(off_target_rate(outputs, "fr", languages))
    assert one.compute().item() == pytest.approx(2 / 4)


def test_one_metric_a_direction_into_its_target():
    metrics = direction_off_target(Languages.from_config(["de", "en", "fr"], ["de-fr", "fr-en"]))
    assert {name: m.target for name, m in metrics.items()} == {"de-fr": "fr", "fr-en": "en"}


def test_languages_identification_does_not_know_are_not_measured_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert direction_off_target(Languages.from_config(["xx", "en"])) is None
    assert "val/off_target is not measured: language identification knows no xx, en" in caplog.text
