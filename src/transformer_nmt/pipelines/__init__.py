"""Back-translation and sequence-level distillation as chains of cached, resumable stages."""
