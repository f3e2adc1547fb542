"""Outputs told apart by language among the model's own, offline, as the off-target rate needs."""

import pytest

from transformer_nmt.evaluation.off_target import identify, off_target_rate

LANGUAGES = ["cs", "de", "en", "fr"]
SAID = {
    "de": "Ein Mann steht auf der Straße und wartet auf den Bus.",
    "en": "A man is standing on the street and waiting for the bus.",
    "fr": "Un homme se tient dans la rue et attend le bus.",
    "cs": "Muž stojí na ulici a čeká na autobus.",
}


def test_each_language_is_identified_as_itself():
    assert identify(SAID.values(), LANGUAGES) == list(SAID)


def test_the_rate_counts_outputs_in_another_language_and_skips_those_without_letters():
    outputs = [SAID["cs"], SAID["fr"], SAID["cs"], SAID["en"], "", "1 2 3"]
    assert identify(outputs[-2:], LANGUAGES) == [None, None]
    assert off_target_rate(outputs, "cs", LANGUAGES) == pytest.approx(2 / 4)
    assert off_target_rate([SAID["fr"]] * 3, "fr", LANGUAGES) == 0.0
    assert off_target_rate(["", "..."], "fr", LANGUAGES) == 0.0


def test_the_choice_is_closed_to_the_languages_given():
    # German text among languages without German: the closest one given, never "de".
    assert identify([SAID["de"]], ["en", "fr"])[0] in {"en", "fr"}


def test_a_language_the_identifier_does_not_know_is_refused_naming_it():
    with pytest.raises(ValueError, match="knows no xx: give ISO 639-1 codes"):
        identify(["text"], ["en", "xx"])
