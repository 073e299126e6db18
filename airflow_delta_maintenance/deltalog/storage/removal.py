"""Deleting from a table's ``_delta_log``: the removal half of ``LogStore`` (which inherits it),
with its own guards — names checked not to escape the log, no deletion through a symbolic link,
staging directories only for whole trees, a deleted file's Hadoop checksum shadow with it — and
the batching of each store (threads of local unlinks, bulk requests on object stores)."""

from __future__ import annotations

import os
import shutil
import stat as stat_module
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidLogPathError, SymlinkInLogError
from .fsspec_files import AZURE, GCS, S3
from .local_files import drop_checksum_shadow, ignore_missing, unlink_batches
from .run_identity import STAGING_DIR

if TYPE_CHECKING:
    import fsspec

__all__ = ["DELETE_BATCH", "LogRemoval"]

# Files per deletion request (S3's DeleteObjects limit); also the step of cleanup's progress lines.
DELETE_BATCH = 1000


class LogRemoval:
    """The deleting methods of ``LogStore``; what they use of it is declared here."""

    is_local: bool
    log_dir: str

    if TYPE_CHECKING:

        @property
        def fs(self) -> fsspec.AbstractFileSystem: ...

        @property
        def backend(self) -> str: ...

        def path(self, name: str) -> str: ...

        def display(self, name: str) -> str: ...

        def _refuse_local_links(self, name: str, *, include_last: bool) -> None: ...

    def delete_tree(self, subdir: str) -> None:
        """Remove a private working directory under ``_delta_log`` (never a log file)."""
        if not subdir.startswith(STAGING_DIR + "/") or subdir.count("/") != 1:
            raise InvalidLogPathError(f"{subdir!r} is not a staging directory", path=subdir)
        path = self.path(subdir)
        if self.is_local:
            if os.path.islink(path):
                raise InvalidLogPathError(f"{self.display(subdir)} is a symbolic link; refusing to delete through it", path=subdir)
            shutil.rmtree(path, onerror=ignore_missing)  # never follows symbolic links inside
            return
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def refuse_links(self, names: Sequence[str], *, files: bool = True) -> None:
        """No-follow check (``lstat``) of names about to be deleted: ``SymlinkInLogError`` if any
        lies under a symbolic link (a directory such as ``_sidecars`` linked elsewhere) or, with
        ``files``, is one. Only local storage has links; elsewhere a no-op."""
        if not self.is_local:
            return
        for directory in sorted({n.rpartition("/")[0] for n in names if "/" in n}):
            self._refuse_local_links(directory, include_last=True)
        for name in names if files else ():
            try:
                if stat_module.S_ISLNK(os.lstat(f"{self.log_dir}/{name}").st_mode):
                    raise SymlinkInLogError(f"{self.display(name)} is a symbolic link; refusing to delete through it", path=name)
            except FileNotFoundError:
                pass

    def delete_many(self, names: Sequence[str], progress: Callable[[int], None] | None = None) -> None:
        """Delete files of ``_delta_log`` (gone already is fine), in batches of ``DELETE_BATCH``
        taken in the given order; ``progress`` hears the size of each batch once it is gone. The
        order *within* a batch is free (callers call once per kind, in their order): local unlinks
        run on a few threads (started once per call), S3 deletes go in bulk requests."""
        paths = [self.path(n) for n in names]  # validates every name before the first deletion
        batches = [paths[i : i + DELETE_BATCH] for i in range(0, len(paths), DELETE_BATCH)]
        if self.is_local:
            # unlink never follows a link in the last component: only the directories need checking
            self.refuse_links(names, files=False)
            unlink_batches(batches, progress)
            return
        for batch in batches:
            if self.backend in (S3, AZURE, GCS):  # bulk requests (DeleteObjects, Blob Batch, JSON batch)
                try:
                    self.fs.rm(batch)
                except FileNotFoundError:
                    pass
            else:
                for path in batch:
                    try:
                        self.fs.rm_file(path)
                    except FileNotFoundError:
                        pass
            if progress is not None:
                progress(len(batch))

    def delete(self, name: str) -> None:
        """Delete one file of ``_delta_log``; a file already gone is fine (re-runs converge)."""
        if self.is_local:
            if "/" in name:
                self._refuse_local_links(name, include_last=False)
            try:
                os.unlink(self.path(name))
            except FileNotFoundError:
                pass
            drop_checksum_shadow(self.path(name))
            return
        try:
            self.fs.rm_file(self.path(name))
        except FileNotFoundError:
            pass
