"""Free the disk an uploaded split takes once its audit is done, keeping what review needs.

An uploaded archive is unpacked under ``HOME/splits/upload-*/split``; once the audit has
stored its results, only the test images the review UI shows (those with a match or a
within-split duplicate) are still read. Everything else there is deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from sqlalchemy import or_, select

from splitaudit.indexer.db.models import Audit, Match, SplitDuplicate, SplitItem
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)


def prune_upload(ws: Workspace, audit_id: int) -> int:
    """Delete the files of an uploaded split no review needs; returns how many bytes it freed.

    Only an audit of an upload (``params["origin"] == "upload"``) unpacked under the home's
    uploads folder is touched.
    """
    with ws.sessions() as s:
        audit = s.get_one(Audit, audit_id)
        params = dict(audit.params or {})
        roots = [str(r) for r in params.get("allowed_roots") or []]
        if params.get("origin") != "upload" or len(roots) != 1:
            return 0
        matched = select(Match.split_item_id).where(Match.audit_id == audit_id)
        dup = (
            select(SplitDuplicate.a_id)
            .where(SplitDuplicate.audit_id == audit_id)
            .union(select(SplitDuplicate.b_id).where(SplitDuplicate.audit_id == audit_id))
        )
        kept_locators = s.scalars(
            select(SplitItem.locator).where(
                SplitItem.split_id == audit.split_id,
                or_(SplitItem.id.in_(matched), SplitItem.id.in_(dup)),
            )
        ).all()
    root = Path(roots[0])
    uploads = os.path.realpath(ws.uploads_dir())
    if not os.path.realpath(root).startswith(uploads.rstrip(os.sep) + os.sep) or not root.is_dir():
        return 0  # never delete outside the home's uploads folder
    keep = {
        os.path.realpath(str(loc["path"]))
        for loc in kept_locators
        if isinstance(loc, dict) and loc.get("path")
    }
    freed = 0
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.realpath(path) in keep:
                continue
            try:
                size = os.lstat(path).st_size
                os.unlink(path)
                freed += size
            except OSError as exc:
                log.warning("could not remove %s: %s", path, exc)
        for name in dirs:
            with contextlib.suppress(OSError):  # only an empty folder goes
                os.rmdir(os.path.join(folder, name))
    log.info("audit %d: freed %d bytes of its uploaded split", audit_id, freed)
    return freed
