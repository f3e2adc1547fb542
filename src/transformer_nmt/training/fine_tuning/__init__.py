"""Fine-tuning: a run that starts from another model (`init_from`), its vocabulary and position."""
