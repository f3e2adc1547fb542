"""The nmt-* commands: `translate`, `evaluate`, `average`, `plot_attention`, and the decoding
options they share (`search_args`)."""
