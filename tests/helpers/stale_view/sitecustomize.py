"""Test-only, put on PYTHONPATH: DDP rank 1 has a stale view of the shared file system.

Python imports `sitecustomize` as it starts, before any rank decides anything: on rank 1 (as
Lightning's launcher or torchrun number it) the first `Path.is_file` of each `last.ckpt` misses
it, as a host whose cached view of the run folder predates the checkpoint would until the cache
is renewed; the next look sees it. A count, not a time: the test's outcome does not depend on
the pace of the machine.
"""

import os
import pathlib

if "1" in (os.environ.get("LOCAL_RANK"), os.environ.get("RANK")):
    _is_file = pathlib.Path.is_file
    _looked: set[str] = set()

    def _stale_is_file(self: pathlib.Path, *args, **kwargs) -> bool:
        if self.name == "last.ckpt" and str(self) not in _looked:
            _looked.add(str(self))
            return False
        return _is_file(self, *args, **kwargs)

    pathlib.Path.is_file = _stale_is_file
