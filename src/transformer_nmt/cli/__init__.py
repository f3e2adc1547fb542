"""The nmt-* commands: `translate`, `evaluate`, `average`, `plot_attention`, the decoding and
device options they share (`search_args`), and `evaluate --data`'s config reading
(`data_config`)."""
