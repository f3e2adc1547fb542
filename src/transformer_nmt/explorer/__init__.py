"""The attention and beam explorer: one self-contained HTML page per checkpoint or run.

`sentence.explore_sentence` gathers what the page shows of one sentence (every attention
weight, the beam search's steps); `page.write_page` inlines that data with the page's script and
style, so the file opens anywhere, offline.
"""

from transformer_nmt.explorer.page import explorer_html, write_page
from transformer_nmt.explorer.sentence import explore_sentence

__all__ = ["explore_sentence", "explorer_html", "write_page"]
