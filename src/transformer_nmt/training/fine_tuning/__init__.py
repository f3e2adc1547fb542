"""Fine-tuning: a run that starts from another model (`init.from`), its vocabulary and position."""
