"""find_duplicates on labelled pairs of the duplicate benchmark, through the real service.

Clones (renamed, reordered, restyled) must be reported at the default threshold; hard negatives
(same shape, opposite behaviour: sum of positives vs negatives, lock vs unlock, a swapped
comparator, min vs max, an off-by-one range) must not. ``python -m bench.duplicate_accuracy``
measures the whole set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.duplicate_accuracy import Pair, load_pairs
from resources.schemas.tools import FindDuplicatesInput, IndexInput
from tests.conftest import write_files

CLONES = ("python-01", "rust-03", "go-06", "python-11")
HARD_NEGATIVES = ("python-15", "python-16", "typescript-16", "go-13", "java-16")


@pytest.fixture(scope="module")
def pairs() -> dict[str, Pair]:
    wanted = set(CLONES + HARD_NEGATIVES)
    return {p.id: p for p in load_pairs() if p.id in wanted}


@pytest.fixture
def service(tmp_path: Path, service_factory, pairs: dict[str, Pair]):
    root = tmp_path / "project"
    write_files(root, {p.path: p.source_a() for p in pairs.values()})
    svc = service_factory(root)
    svc.index(IndexInput(embed=True))
    return svc


def test_clones_reported_and_hard_negatives_not(service, pairs: dict[str, Pair]) -> None:
    for pair_id in CLONES:
        pair = pairs[pair_id]
        result = service.find_duplicates(FindDuplicatesInput(code=pair.code_b, language=pair.language))
        assert result.threshold == 0.85
        found = [d for d in result.duplicates if d.file_path == pair.path]
        assert found, f"{pair_id} ({pair.category}) not reported: {result.duplicates}"
        assert found[0].similarity >= 0.85
    for pair_id in HARD_NEGATIVES:
        pair = pairs[pair_id]
        result = service.find_duplicates(FindDuplicatesInput(code=pair.code_b, language=pair.language))
        assert not [d for d in result.duplicates if d.file_path == pair.path], f"{pair_id} reported: {pair.note}"


def test_renamed_copy_outranks_its_opposite(service, pairs: dict[str, Pair]) -> None:
    # sum_negative's renamed copy: a clone of the new code, while the indexed sum_positive is
    # only a variant of it; the clone comes first and near-identical.
    pair = pairs["python-15"]
    copy = pair.code_b.replace("sum_negative", "total_of_negatives").replace("value", "item")
    write_files(Path(service.settings.resolved_root()), {"pairs/python/copy.py": pair.code_b})
    service.index(IndexInput(embed=True))
    result = service.find_duplicates(FindDuplicatesInput(code=copy, language="python", threshold=0.7))
    assert result.duplicates[0].file_path == "pairs/python/copy.py"
    assert result.duplicates[0].similarity >= 0.95
    assert "near-identical" in result.duplicates[0].recommendation
    assert all(d.similarity < 0.85 for d in result.duplicates if d.file_path == pair.path)
