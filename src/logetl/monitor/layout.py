"""What the embedded sink of every run needs to know about the monitor's store, without SQLAlchemy: the
layout's version and how the store file is kept private. Importing SQLAlchemy costs a run ~0.2 s, so
``logetl.monitor.store`` (the store itself) stays off the run path unless the store must be made."""
from __future__ import annotations

import os
import stat

#: the layout's version (SQLite keeps it as ``PRAGMA user_version``, which the embedded sink checks)
SCHEMA_VERSION = 3


def private_file(path: str) -> None:
    """Makes ``path`` (a SQLite store: key hashes, sessions, every run) readable by its owner only: created
    0600, and an existing file (or its -wal/-shm) with group or other bits is tightened to 0600."""
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    for p in (path, path + "-wal", path + "-shm"):
        try:
            if os.stat(p).st_mode & 0o077:
                os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)
        except OSError:
            pass
