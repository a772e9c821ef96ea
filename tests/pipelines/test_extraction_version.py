"""An index made by older extraction rules is parsed again on its next run (nothing dropped),
so declarations the parsers find now (issue 19: named types, records, constructors) reach an
existing index without a rebuild; the default Dagster path does not answer 'nothing changed'."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pipelines.index_stores import EXTRACTION_KEY, EXTRACTION_VERSION
from query_server.service import CodeMemService
from resources.schemas.tools import IndexInput
from resources.settings import Settings
from tests.conftest import write_files

FILES = {"pkg/types.go": "package pkg\n\ntype Labels map[string]string\n", "pkg/app.py": "def run():\n    return 1\n"}


def _service(root: Path) -> CodeMemService:
    return CodeMemService(Settings(project_root=root, dense_embeddings=False))


def test_an_index_from_older_extraction_rules_is_parsed_again_once(tmp_path: Path) -> None:
    write_files(tmp_path, FILES)
    hour_ago = time.time_ns() - 3600 * 10**9
    for path in FILES:  # files untouched for an hour: their stats would vouch for them, but not for new rules
        os.utime(tmp_path / path, ns=(hour_ago, hour_ago))
    service = _service(tmp_path)
    try:
        first = service.index(IndexInput(embed=False))
        assert first["files_indexed"] == 2
        assert service.ctx.manifest.get_meta(EXTRACTION_KEY) == EXTRACTION_VERSION
        ids = {s.id for s in service.ctx.manifest.all_symbols()}
        service.ctx.manifest.set_meta(EXTRACTION_KEY, "1")  # as an index made before today's rules

        again = service.index(IndexInput(embed=False))
        assert again["files_indexed"] == 2 and any("parsed again" in n for n in again["notes"])
        assert {s.id for s in service.ctx.manifest.all_symbols()} == ids  # same symbols, nothing lost
        assert service.ctx.manifest.get_meta(EXTRACTION_KEY) == EXTRACTION_VERSION

        third = service.index(IndexInput(embed=False))
        assert third["files_indexed"] == 0 and third["files_unchanged"] == 2
    finally:
        service.close()


def test_codemem_index_does_not_answer_nothing_changed_for_an_outdated_index(tmp_path: Path) -> None:
    from pipelines.dagster.run import _nothing_to_do

    write_files(tmp_path, FILES)
    service = _service(tmp_path)
    try:
        service.index(IndexInput(embed=False))
        assert _nothing_to_do(service.owned_stores(), force=False, embed=True) is not None
        service.ctx.manifest.set_meta(EXTRACTION_KEY, "1")
        assert _nothing_to_do(service.owned_stores(), force=False, embed=True) is None
    finally:
        service.close()
