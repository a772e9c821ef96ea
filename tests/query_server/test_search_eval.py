"""`codemem eval`: queries from the project's docstrings, hidden from a stripped copy's index.

Metrics on hand-made rankings, docstring stripping per language, the numpy BM25 against bm25s,
and the real run (real indexer, local model, in-process code_search) on a generated project:
figures in [0, 1], no query text in the indexed copy, the project's own .codemem untouched,
and exit status 2 when there is too little documentation to evaluate.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipelines.eval_corpus import (
    BM25,
    Function,
    GoldMatcher,
    Query,
    code_tokenize,
    evaluate,
    first_gold_rank,
    mine_project,
    parsed_functions,
    query_text,
    sample_queries,
    strip_doc_comments,
    strip_docstrings,
)
from pipelines.parsing import parse_source
from query_server import cli
from query_server.cli import common
from query_server.search_eval import NotEnoughDocumented, evaluate_project
from resources.settings import DEFAULT_EXTENSIONS, Settings
from tests.conftest import write_files

TOPICS = [
    ("parse_duration", "Parse a human duration string like 5m into seconds."),
    ("render_invoice", "Render the invoice totals as an HTML table."),
    ("hash_password", "Hash a password with a random salt using scrypt."),
    ("resize_thumbnail", "Shrink an image to a thumbnail keeping the aspect ratio."),
    ("send_webhook", "Post the event payload to every registered webhook endpoint."),
    ("retry_backoff", "Compute the exponential backoff delay before the next retry."),
    ("slugify_title", "Turn an article title into a lowercase url slug."),
    ("merge_configs", "Merge layered configuration dictionaries with later files winning."),
    ("count_words", "Count how often each word occurs in a text document."),
    ("validate_email", "Check that an email address has a plausible mailbox and domain."),
    ("rotate_logs", "Rotate the application log files once they exceed the size limit."),
    ("elapsed_label", "Format elapsed milliseconds as a short readable label."),
]
IGNORED_DOC = "Compute the secret checksum of the ignored vendor blob."


def _function(name: str, doc: str) -> str:
    words = name.split("_")
    return (
        f"def {name}(value, options=None):\n"
        f'    """{doc}"""\n'
        f"    {words[0]}_result = {{'{words[-1]}': value, 'options': options}}\n"
        f"    return {words[0]}_result\n\n\n"
    )


def documented_project(root: Path) -> Path:
    """15 documented functions (Python and JavaScript), an ignored file, and an existing .codemem."""
    half = len(TOPICS) // 2
    write_files(root, {
        "app/tools.py": '"""Tools of the app module."""\n\n' + "".join(_function(n, d) for n, d in TOPICS[:half]),
        "app/more.py": "".join(_function(n, d) for n, d in TOPICS[half:])
        + 'class Cart:\n    """A shopping cart."""\n\n    def total_price(self, items):\n'
        '        """Sum the prices of the items in the cart including tax."""\n'
        "        return sum(i.price for i in items) * 1.2\n",
        "web/client.js": "/**\n * Fetch the user profile from the REST API.\n */\n"
        "export async function fetchProfile(id) {\n  return fetch(`/users/${id}`);\n}\n\n"
        "/** Debounce a callback so it fires once per quiet period. */\n"
        "function debounce(fn, ms) {\n  let t;\n  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };\n}\n",
        "vendor_blob/secret.py": f'def checksum(data):\n    """{IGNORED_DOC}"""\n    return 0\n',
        ".gitignore": "vendor_blob/\n",
        ".codemem/sentinel.txt": "the project's own index lives here\n",
    })
    return root


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.rglob("*")) if p.is_file()}


# -- metrics on hand-made rankings -------------------------------------------------------------

def test_first_gold_rank_and_metrics_by_hand() -> None:
    assert first_gold_rank([5, 3, 9], [9]) == 3
    assert first_gold_rank([None, 2], [2, 7]) == 2
    assert first_gold_rank(list(range(20)), [15]) is None  # beyond the cutoff of 10
    assert first_gold_rank(list(range(20)), [15], cutoff=20) == 16
    rankings = [[1, 2, 3], [4, 5, 6], [None, 8, 7], [10, 11], []]
    golds = [[1], [6], [7, 8], [99], [1]]
    m = evaluate(rankings, golds)
    assert m.n == 5
    assert m.r1 == pytest.approx(1 / 5)
    assert m.r10 == pytest.approx(3 / 5)
    assert m.mrr == pytest.approx((1 + 1 / 3 + 1 / 2) / 5)
    assert m.as_dict() == {"mrr": round(m.mrr, 4), "r1": 0.2, "r10": 0.6, "queries": 5}
    assert m.as_dict(digits=None)["mrr"] == m.mrr
    assert evaluate([], []).as_dict() == {"mrr": 0.0, "r1": 0.0, "r10": 0.0, "queries": 0}
    perfect = evaluate([[3]], [[3]])
    assert (perfect.mrr, perfect.r1, perfect.r10) == (1.0, 1.0, 1.0)


def test_gold_matcher_by_line_then_unique_name() -> None:
    fns = [
        Function(0, "a.py", "f", "f", def_line=3, first_line=2, end_line=4, text="", docstring=None),
        Function(1, "a.py", "m", "C.m", def_line=8, first_line=8, end_line=9, text="", docstring=None),
        Function(2, "a.py", "g", "g", def_line=11, first_line=11, end_line=12, text="", docstring=None),
        Function(3, "a.py", "g", "g", def_line=14, first_line=14, end_line=15, text="", docstring=None),
    ]
    matcher = GoldMatcher(fns)
    assert matcher.match("a.py", 2) == 0 and matcher.match("a.py", 3) == 0  # decorator or def line
    assert matcher.match("a.py", 40, "pkg.C.m") == 1  # by a name unique in the file
    assert matcher.match("a.py", 40, "g") is None  # `g` is defined twice: line only
    assert matcher.match("a.py", 14, "g") == 3
    assert matcher.match("a.py", 8, "C", kind="class") is None
    assert matcher.match("b.py", 2) is None


def test_sample_queries_is_fixed_and_keeps_order() -> None:
    queries = [Query(f"query number {i}", [i]) for i in range(50)]
    first, again = sample_queries(queries, 10), sample_queries(queries, 10)
    assert [q.text for q in first] == [q.text for q in again]
    assert len(first) == 10 and [q.gold for q in first] == sorted(q.gold for q in first)
    assert sample_queries(queries, 100) == queries
    assert [q.gold for q in sample_queries(queries, 10, seed=1)] != [q.gold for q in first]


def test_query_text_needs_three_words_and_takes_the_first_paragraph() -> None:
    assert query_text("Too short.") is None
    assert query_text("Parse the thing\n   across lines.\n\nDetails.") == "Parse the thing across lines."
    assert query_text("Parse the thing\nacross lines.", mode="line") == "Parse the thing"


# -- stripping ------------------------------------------------------------------------------

def test_python_docstrings_are_stripped_keeping_lines() -> None:
    source = '"""Module doc."""\nclass A:\n    """Class doc\n    two lines."""\n    def f(self):\n        """Only statement."""\n\n    def g(self): """Shares a line."""\n'
    out = strip_docstrings(source)
    assert "doc" not in out and "statement" not in out and "Shares" not in out
    assert out.count("\n") == source.count("\n")
    assert out.splitlines()[4].strip() == "def f(self):" and out.splitlines()[5].strip() == "pass"
    compile(out, "x.py", "exec")


@pytest.mark.parametrize(
    ("path", "language", "source", "doc"),
    [
        ("a.js", "javascript", "const x = 1;\n\n/**\n * Load the user record.\n */\nfunction load(id) {\n  return id;\n}\n", "Load the user record."),
        ("a.go", "go", "package a\n\n// Start runs the server loop.\nfunc Start() error {\n\t// keep this comment\n\treturn nil\n}\n", "Start runs the server loop."),
        ("a.rs", "rust", "/// Makes a new circle shape.\n#[inline]\npub fn circle(r: f64) -> f64 {\n    r\n}\n", "Makes a new circle shape."),
        ("A.java", "java", "class A {\n  /** Returns the price in cents. */\n  int price() { return 1; }\n}\n", "Returns the price in cents."),
    ],
)
def test_doc_comments_are_stripped_with_the_parser(path: str, language: str, source: str, doc: str) -> None:
    out = strip_doc_comments(source, language, path)
    assert doc not in out and out.count("\n") == source.count("\n")
    before = [s for s in parse_source(path, source.encode(), language).symbols if s.kind in ("function", "method")]
    after = [s for s in parse_source(path, out.encode(), language).symbols if s.kind in ("function", "method")]
    assert [s.docstring for s in before] == [doc]
    assert [s.docstring for s in after] == [None]
    assert [s.start_line for s in after] == [s.start_line for s in before]
    if language == "go":
        assert "// keep this comment" in out  # only doc comments go
    fns = parsed_functions(path, source, out, language, 0)
    assert [f.docstring for f in fns] == [doc] and doc not in fns[0].text


# -- BM25 -----------------------------------------------------------------------------------

DOCS = [
    "def parse_url(url): return urllib.parse.urlsplit(url)",
    "class HTTPResponse: def read_body(self): return self.raw.read()",
    "def getUserName(user): return user.name",
    "def retry(fn, attempts=3): ...",
    "",
    "def parse_header(line): name, value = line.split(':', 1)",
] * 3


def test_bm25_ranks_the_matching_text_first() -> None:
    bm25 = BM25(DOCS[:6])
    assert code_tokenize("getHTTPResponse parse_url") == ["get", "http", "respons", "pars", "url"]
    assert bm25.rank("user name")[0] == 2
    assert bm25.rank("parse the url")[0] == 0
    assert bm25.rank("zzz qqq") == []
    assert all(i != 4 for i in bm25.rank("parse"))  # zero scores are not ranked


def test_bm25_gives_the_rankings_of_bm25s() -> None:
    bm25s = pytest.importorskip("bm25s")
    texts = DOCS + [f"def helper_{i}(x): return x * {i} + parse(x)" for i in range(30)]
    ours = BM25(texts)
    theirs = bm25s.BM25()
    theirs.index([code_tokenize(t) or ["<empty>"] for t in texts], show_progress=False)
    for query in ["parse url", "read the body of a response", "user name name", "helper parse", "retry attempts"]:
        tokens = [t for t in code_tokenize(query) if t in theirs.vocab_dict]
        docs, scores = theirs.retrieve([tokens], k=10, show_progress=False)
        expected = [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        assert ours.rank(query, 10) == expected, query


# -- the real run -----------------------------------------------------------------------------

def test_mining_respects_gitignore_and_skips_state(tmp_path: Path) -> None:
    root = documented_project(tmp_path / "proj")
    mined = mine_project(root, extensions=DEFAULT_EXTENSIONS, max_file_bytes=1_000_000)
    assert sorted(mined.stripped) == ["app/more.py", "app/tools.py", "web/client.js"]
    assert mined.documented == 15 and len(mined.queries) == 15
    assert IGNORED_DOC not in {q.text for q in mined.queries}


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One evaluation of the documented project, its copy and index kept for inspection."""
    base = tmp_path_factory.mktemp("eval")
    root = documented_project(base / "proj")
    before = snapshot(root)
    report = evaluate_project(Settings(project_root=root), work_dir=base, keep=True)
    assert snapshot(root) == before, "evaluation touched the project"
    return root, report


def test_report_figures(kept_run: tuple[Path, dict]) -> None:
    _, report = kept_run
    assert report["files"] == 3 and report["documented_functions"] == 15
    assert report["queries"] == report["queries_available"] == 15
    for method in ("codemem", "bm25"):
        figures = report[method]
        assert figures["queries"] == 15
        assert all(0.0 <= figures[k] <= 1.0 for k in ("r1", "r10", "mrr"))
        assert figures["r1"] <= figures["mrr"] <= figures["r10"]
    assert report["bm25"]["r10"] > 0 and report["codemem"]["r10"] > 0
    assert report["mrr_ratio"] == pytest.approx(report["codemem"]["mrr"] / report["bm25"]["mrr"])
    info = report["codemem_info"]
    assert info["search_modes"] == ["hybrid"] and info["gold_indexed"] == "15/15" and info["failed_files"] == 0


def test_docstrings_are_hidden_from_the_indexed_copy(kept_run: tuple[Path, dict], service_factory) -> None:
    from pipelines.indexer import CODE_COLLECTION

    root, report = kept_run
    work = Path(report["work_dir"])
    copy = work / root.name
    mined = mine_project(root, extensions=DEFAULT_EXTENSIONS, max_file_bytes=1_000_000)
    queries = [q.text for q in mined.queries] + ["Tools of the app module.", "A shopping cart."]
    for path in copy.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not any(q in text for q in queries), path
    assert not (copy / "vendor_blob").exists()
    svc = service_factory(copy, state_dir=work / "state")
    points = svc.vectors.retrieve(CODE_COLLECTION, [s.id for s in svc.manifest.all_symbols()])
    assert len(points) >= 15
    for point in points:
        assert not point.payload.get("docstring"), point.payload
        for value in point.payload.values():
            if isinstance(value, str):
                flat = " ".join(value.split())
                assert not any(q in flat for q in queries), value


def test_cli_json_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    root = documented_project(tmp_path / "proj")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(common, "out", Console(width=200))
    own_state = snapshot(root / ".codemem")

    result = CliRunner().invoke(cli.main, ["eval", "--project", str(root), "--json", "--max-queries", "6"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["queries"] == 6 and report["queries_available"] == 15 and report["max_queries"] == 6
    assert all(0.0 <= report[m][k] <= 1.0 for m in ("codemem", "bm25") for k in ("r1", "r10", "mrr"))
    assert report["work_dir"] is None and list(temp.iterdir()) == [], "the temporary copy was left behind"
    assert snapshot(root / ".codemem") == own_state, "the project's own .codemem was touched"

    table = CliRunner().invoke(cli.main, ["eval", "--project", str(root), "--max-queries", "3"])
    assert table.exit_code == 0, table.output
    for expected in ("codemem", "BM25", "R@1", "R@10", "MRR@10", "codemem MRR / BM25 MRR", "3 of 15 queries"):
        assert expected in table.stdout, table.stdout
    assert snapshot(root / ".codemem") == own_state


def test_too_few_documented_functions_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "small"
    write_files(root, {
        "m.py": "".join(_function(n, d) for n, d in TOPICS[:9])
        + 'def short(x):\n    """Two words."""\n    return x\n\ndef bare(x):\n    return x\n',
    })
    result = CliRunner().invoke(cli.main, ["eval", "--project", str(root)])
    assert result.exit_code == 2
    assert "not enough documented functions to evaluate (found 9; need 10)" in result.output
    assert not (root / ".codemem").exists()
    with pytest.raises(NotEnoughDocumented) as caught:
        evaluate_project(Settings(project_root=tmp_path / "small"))
    assert caught.value.found == 9
