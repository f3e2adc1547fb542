"""From a checkpoint to text, for a user who only translates: no Lightning, no Hydra."""
