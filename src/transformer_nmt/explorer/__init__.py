"""A self-contained HTML page for looking inside a model, sentence by sentence."""

from transformer_nmt.explorer.page import explorer_html, run_validations, write_page
from transformer_nmt.explorer.sentence import explore_sentence

__all__ = ["explore_sentence", "explorer_html", "run_validations", "write_page"]
