"""The nmt-* commands: `translate`, `evaluate`, `average`, `plot_attention`, the decoding and
device options they share (`search_args`), and config groups composed as training composes
them, which `evaluate --data` reads (`compose`)."""
