"""A callback that ends training between two micro-batches of an update, as Lightning's `Timer`
(`trainer.max_time`) can, without waiting for a clock."""

import lightning as L


class StopInsideUpdate(L.Callback):
    """Sets `trainer.should_stop` after batch `batch` (counted from 1 over the run) of this fit."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self._seen = 0

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        self._seen += 1
        if self._seen == self.batch:
            trainer.should_stop = True


def stop_inside_update(batch: int) -> list[str]:
    """Overrides that end a run's training after its batch `batch` (see above)."""
    return [
        "+callbacks.stop_inside._target_=helpers.stop_inside_update.StopInsideUpdate",
        f"+callbacks.stop_inside.batch={batch}",
    ]
