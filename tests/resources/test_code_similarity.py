"""Structural similarity for duplicate detection, on real code in several languages."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from resources.code_similarity import (
    CLONE_FLOOR,
    Candidate,
    code_tokens,
    code_without_comments,
    compare_code,
    duplicate_score,
    opposite_names,
    score_candidates,
)

SUM_POSITIVE = textwrap.dedent(
    '''
    def sum_positive(values):
        """Sum of the strictly positive numbers in values."""
        total = 0
        for value in values:
            if value > 0:  # zero is not positive
                total += value
        return total
    '''
)
SUM_NEGATIVE = SUM_POSITIVE.replace("sum_positive", "sum_negative").replace("value > 0", "value < 0")
RENAMED = textwrap.dedent(
    """
    def positive_total(numbers):
        acc = 0
        for n in numbers:
            if n > 0:
                acc += n
        return acc
    """
)
COMPREHENSION = textwrap.dedent(
    """
    def sum_positive(values):
        return sum(v for v in values if v > 0)
    """
)


def texts(code: str, language: str, name: str | None = None) -> list[str]:
    return [t.text for t in code_tokens(code, language, name)]


# -- tokens --------------------------------------------------------------------------------------

def test_tokens_abstract_locals_and_keep_apis_operators_literals() -> None:
    assert texts(SUM_POSITIVE, "python", "sum_positive") == [
        "def", "ID", "(", "ID", ")", ":", "ID", "=", "0", "for", "ID", "in", "ID", ":",
        "if", "ID", ">", "0", ":", "ID", "+=", "ID", "return", "ID",
    ]
    go = 'func Open(path string) (*os.File, error) {\n\treturn os.OpenFile(path, os.O_RDONLY, 0o644)\n}\n'
    assert texts(go, "go", "Open") == [
        "func", "ID", "(", "ID", "ID", ")", "(", "*", "ID", ".", "File", ",", "ID", ")", "{",
        "return", "ID", ".", "OpenFile", "(", "ID", ",", "ID", ".", "O_RDONLY", ",", "420", ")", "}",
    ]


def test_comments_and_docstrings_go_but_strings_stay_whole() -> None:
    python = 'def f(line):\n    """Skip # comments."""\n    return line.startswith("#")  # a comment\n'
    assert texts(python, "python", "f") == ["def", "ID", "(", "ID", ")", ":", "return", "ID", ".", "startswith", "(", '"#"', ")"]
    ts = 'function f(u: string) {\n  /* block */ return u.split("//"); // tail\n}\n'
    assert '"//"' in texts(ts, "typescript") and "block" not in texts(ts, "typescript")
    assert code_without_comments(python, "python") == 'def f(line):\n    return line.startswith("#")'


def test_interpolated_names_are_abstracted_in_strings() -> None:
    a = texts('def f(user, host):\n    return f"{user}@{host}"\n', "python", "f")
    b = texts('def g(name, domain):\n    return f"{name}@{domain}"\n', "python", "g")
    assert a == b and '"{ID}@{ID}"' in a


def test_own_state_members_are_local_but_other_members_are_apis() -> None:
    go_a = "func (s *Stack) Pop() int {\n\tv := s.items[len(s.items)-1]\n\ts.items = s.items[:len(s.items)-1]\n\treturn v\n}\n"
    go_b = go_a.replace("(s *Stack)", "(st *IntStack)").replace("s.items", "st.data")
    assert texts(go_a, "go", "Pop") == texts(go_b, "go", "Pop")
    python = "def close(self):\n    self.conn.close()\n"
    assert texts(python, "python", "close") == [
        "def", "ID", "(", "self", ")", ":", "self", ".", "ID", ".", "close", "(", ")"
    ]


def test_a_called_parameter_is_a_local_not_an_api() -> None:
    a = "function run(fn: () => void) {\n  fn();\n  fn();\n}\n"
    b = "function go(callback: () => void) {\n  callback();\n  callback();\n}\n"
    assert texts(a, "typescript", "run") == texts(b, "typescript", "go")
    assert "setTimeout" in texts("function f() {\n  setTimeout(f, 1);\n}\n", "typescript", "f")


def test_type_arguments_are_not_comparisons() -> None:
    java = "List<Map<String, Integer>> f(int a, int b) {\n  return a < b ? List.of() : null;\n}\n"
    tokens = code_tokens(java, "java", "f")
    assert [t.text for t in tokens if t.kind == "semantic" and t.text in ("<", ">")] == ["<"]
    rust = "fn f<'a>(x: &'a str) -> Vec<&'a str> {\n    vec![x]\n}\n"
    assert not [t for t in code_tokens(rust, "rust", "f") if t.kind == "semantic" and t.text in ("<", ">")]


# -- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("lock_file", "unlock_file", "lock/unlock"),
        ("MinInt", "MaxInt", "min/max"),
        ("sortFeedAscending", "sortFeedDescending", "ascending/descending"),
        ("markRead", "markUnread", "read/unread"),
        ("is_valid", "is_not_valid", "negated"),
        ("celsius_to_fahrenheit", "fahrenheit_to_celsius", "inverse conversion"),
        ("isActive", "isInactive", "active/inactive"),
    ],
)
def test_opposite_names(a: str, b: str, why: str) -> None:
    assert opposite_names(a, b) == why


@pytest.mark.parametrize(
    ("a", "b"),
    [("normalize_email", "canonical_address"), ("group_by_category", "names_by_category"), ("parse", "parse"),
     ("active_user_emails", "emails_of_active_users")],
)
def test_names_that_are_not_opposites(a: str, b: str) -> None:
    assert opposite_names(a, b) is None


# -- verdicts ------------------------------------------------------------------------------------

def test_renamed_copy_is_a_clone() -> None:
    comparison = compare_code(SUM_POSITIVE, RENAMED, "python", "sum_positive", "positive_total")
    assert comparison.verdict == "clone" and comparison.bag == 1.0 and comparison.edits == 0
    assert duplicate_score(0.6, comparison) >= CLONE_FLOOR


def test_reordered_statements_are_a_clone() -> None:
    a = textwrap.dedent(
        """
        func DefaultConfig() Config {
        \tvar cfg Config
        \tcfg.ListenAddr = ":8080"
        \tcfg.ReadTimeout = 5 * time.Second
        \tcfg.LogLevel = "info"
        \treturn cfg
        }
        """
    )
    b = a.replace('\tcfg.ListenAddr = ":8080"\n', "").replace('\treturn cfg', '\tcfg.ListenAddr = ":8080"\n\treturn cfg')
    comparison = compare_code(a, b, "go", "DefaultConfig", "DefaultConfig")
    assert comparison.verdict == "clone" and comparison.sequence is None and comparison.bag == 1.0


def test_flipped_comparison_is_a_variant_and_scores_under_the_threshold() -> None:
    comparison = compare_code(SUM_POSITIVE, SUM_NEGATIVE, "python", "sum_positive", "sum_negative")
    assert comparison.verdict == "variant"
    assert comparison.only_existing == [">"] and comparison.only_new == ["<"]
    assert comparison.opposite == "positive/negative"
    assert "> → <" in comparison.describe()
    assert duplicate_score(0.95, comparison) < 0.85


def test_changed_api_constant_is_a_variant() -> None:
    lock = "func LockFile(f *os.File) error {\n\treturn syscall.Flock(int(f.Fd()), syscall.LOCK_EX)\n}\n"
    unlock = lock.replace("LockFile", "UnlockFile").replace("LOCK_EX", "LOCK_UN")
    comparison = compare_code(lock, unlock, "go", "LockFile", "UnlockFile")
    assert comparison.verdict == "variant" and comparison.only_new == ["LOCK_UN"]


def test_swapped_comparator_arguments_are_a_variant() -> None:
    newest = "function sortFeed(posts: Post[]): Post[] {\n  return [...posts].sort((a, b) => b.time - a.time);\n}\n"
    oldest = newest.replace("sortFeed", "sortOldest").replace("b.time - a.time", "a.time - b.time")
    comparison = compare_code(newest, oldest, "typescript", "sortFeed", "sortOldest")
    assert comparison.edits == 0 and comparison.swapped >= 2 and comparison.verdict == "variant"


def test_shadowing_is_not_a_swap() -> None:
    a = "fn parse(text: &str) -> usize {\n    let text = text.trim();\n    text.len() + text.len()\n}\n"
    b = "fn measure(input: &str) -> usize {\n    let s = input.trim();\n    s.len() + s.len()\n}\n"
    comparison = compare_code(a, b, "rust", "parse", "measure")
    assert comparison.swapped == 0 and comparison.verdict == "clone"


def test_a_rewrite_is_left_to_the_embedding() -> None:
    comparison = compare_code(SUM_POSITIVE, COMPREHENSION, "python", "sum_positive", "sum_positive")
    assert comparison.verdict == "other" and comparison.opposite is None
    assert duplicate_score(0.91, comparison) == 0.91
    lock = textwrap.dedent(
        """
        def lock_file(handle, blocking=True):
            flags = fcntl.LOCK_EX
            if not blocking:
                flags |= fcntl.LOCK_NB
            fcntl.flock(handle.fileno(), flags)
            return True
        """
    )
    release = "def unlock_file(handle):\n    try:\n        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)\n    except OSError:\n        return False\n    return True\n"
    opposite = compare_code(lock, release, "python", "lock_file", "unlock_file")
    assert opposite.verdict == "other" and opposite.opposite == "lock/unlock"
    assert duplicate_score(0.91, opposite) < 0.8 and duplicate_score(0.91, opposite, use_names=False) == 0.91


def test_tiny_functions_get_no_structural_verdict() -> None:
    comparison = compare_code("def a(x):\n    return x\n", "def b(y):\n    return y\n", "python", "a", "b")
    assert comparison.verdict == "other"


# -- scoring candidates ----------------------------------------------------------------------

def test_score_candidates_with_the_real_model() -> None:
    from resources.embeddings.local import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder(threads=1)
    candidates = [
        Candidate(SUM_POSITIVE, "sum_positive", "python", 0.62),  # clone of RENAMED
        Candidate(SUM_NEGATIVE, "sum_negative", "python", 0.93),  # variant
        Candidate(COMPREHENSION, "sum_positive", "python", 0.70),  # rewrite: re-embedded
        Candidate(SUM_POSITIVE, "sum_positive", "java", 0.99),  # another language: cosine kept
        Candidate(SUM_POSITIVE, "sum_positive", "python", 0.20),  # below the floor: cosine kept
    ]
    scores = score_candidates(RENAMED, "positive_total", "python", candidates, embedder.embed_documents)
    (clone, c1), (variant, c2), (rewrite, c3), (other_language, c4), (noise, c5) = scores
    assert clone >= CLONE_FLOOR and c1.verdict == "clone"
    assert variant < 0.85 and c2.verdict == "variant"
    assert c3.verdict == "other" and rewrite != 0.70 and 0.0 < rewrite <= 1.0
    assert (other_language, c4) == (0.99, None) and (noise, c5) == (0.20, None)


def test_score_candidates_embeds_nothing_when_structure_decides() -> None:
    def no_embedding(texts: list[str]) -> np.ndarray:
        raise AssertionError(f"embedded {texts}")

    scores = score_candidates(
        RENAMED, "positive_total", "python",
        [Candidate(SUM_POSITIVE, "sum_positive", "python", 0.7), Candidate(SUM_NEGATIVE, "sum_negative", "python", 0.9)],
        no_embedding,
    )
    assert [c.verdict for _, c in scores] == ["clone", "variant"]


def test_only_the_candidates_compared_are_put_in_compared_form_and_an_embedding_error_reaches_the_caller() -> None:
    """``compared_code`` (find_duplicates: the canonical form) runs for the candidates compared by
    structure only; the re-embedding runs on a thread of its own, and what it raises is raised."""
    from resources.embeddings.base import EmbeddingError

    asked: list[str] = []

    def compared(candidate: Candidate) -> str:
        asked.append(candidate.name or "")
        return candidate.code

    def failing(texts: list[str]) -> np.ndarray:
        raise EmbeddingError("the model went away")

    candidates = [
        Candidate(COMPREHENSION, "rewrite", "python", 0.70),  # other: re-embedded
        Candidate(SUM_POSITIVE, "java", "java", 0.99),  # another language: not compared
        Candidate(SUM_POSITIVE, "noise", "python", 0.20),  # below the floor: not compared
        Candidate(SUM_NEGATIVE, "variant", "python", 0.90),
    ]
    with pytest.raises(EmbeddingError, match="went away"):
        score_candidates(RENAMED, "positive_total", "python", candidates, failing, compared_code=compared)
    assert sorted(asked) == ["rewrite", "variant"]


def test_cached_tokens_leave_the_collectors_walks() -> None:
    """A server caches the tokens of thousands of functions: once the collector has seen them
    they are plain tuples it no longer tracks (class instances would be walked by every full
    collection)."""
    import gc

    from resources.code_similarity import _code_tokens

    rows = _code_tokens("def f(items):\n    return [i * 2 for i in items if i > 0]\n", "python", "f")
    gc.collect()
    assert rows and not any(gc.is_tracked(row) for row in rows)
    gc.collect()  # the tuple of rows, once its rows are untracked
    assert not gc.is_tracked(rows)
    assert [t.text for t in code_tokens("def f(x):\n    return x.y\n", "python", "f")][-1] == "y"


# -- candidates that cannot reach the threshold ------------------------------------------------

READER = textwrap.dedent(
    """
    def read_config(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        return json.loads(text)
    """
)
READER_RENAMED = textwrap.dedent(
    """
    def load_settings(filename):
        with open(filename, encoding="utf-8") as f:
            content = f.read()
        return json.loads(content)
    """
)


def test_clone_evidence_is_the_names_and_string_words_a_clone_keeps_as_written() -> None:
    from pipelines.parsing.canonical import canonical_code
    from resources.code_similarity import clone_evidence, code_side

    assert set(clone_evidence(code_side(READER, "python", "read_config"), "python")) == {
        ("utf-8",), ("loads",), ("open",), ("read",)
    }
    # The canonical form writes a loop of push as filter/map: names the code as written lacks.
    loop = textwrap.dedent(
        """
        function positives(values: number[]): number[] {
          const out = [];
          for (const v of values) {
            if (v > 0) { out.push(v * 2); }
          }
          return out;
        }
        """
    )
    canonical = canonical_code(loop, "typescript").text
    assert ".filter(" in canonical and ".map(" in canonical
    evidence = clone_evidence(code_side(canonical, "typescript", "positives"), "typescript")
    assert ("filter",) not in evidence and ("map",) not in evidence
    assert ("<", ">") in evidence  # `v > 0` is written `0 < v`
    assert all(any(text in loop for text in entry) for entry in evidence)
    # Words of a string, not the string: a canonical statement's whitespace is one space. An
    # augmented assignment is evidence of its operator (`x = x + e` is written `x += e`).
    spaced = 'def title(name, count):\n    count = count + 1\n    return "Dear   " + name.strip() + ",  welcome"\n'
    canonical = canonical_code(spaced, "python").text
    assert "count += 1" in canonical
    evidence = set(clone_evidence(code_side(canonical, "python", "title"), "python"))
    assert {("Dear",), ("welcome",), ("strip",), ("+",)} <= evidence and ("+=",) not in evidence
    # the conditional expression's `?` is the canonical form's own
    ternary = "function sign(x) {\n  if (x < 0) {\n    return -1;\n  }\n  return 1;\n}\n"
    canonical = canonical_code(ternary, "javascript").text
    assert "?" in canonical and ("?",) not in clone_evidence(code_side(canonical, "javascript", "sign"), "javascript")


def test_every_function_of_real_code_holds_its_own_clone_evidence() -> None:
    """The premise of the pruning, on real code of every language the fixtures hold and three
    standard-library packages: each entry of a function's evidence occurs in its own code."""
    import sys
    from pathlib import Path

    from pipelines.parsing import parse_source
    from pipelines.parsing.canonical import canonical_code
    from pipelines.parsing.languages import language_for_path
    from resources.code_similarity import clone_evidence, code_side
    from resources.schemas.code import CALLABLE_KINDS

    stdlib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    files = sorted(Path(__file__).resolve().parents[1].joinpath("fixtures", "repos").rglob("*"))
    files += sorted(path for package in ("json", "email", "http") for path in (stdlib / package).glob("*.py"))
    checked, languages = 0, set()
    for path in files:
        language = language_for_path(str(path)) if path.is_file() else None
        if language is None:
            continue
        for symbol in parse_source(str(path), path.read_bytes(), language).symbols:
            if symbol.kind not in CALLABLE_KINDS or not symbol.code:
                continue
            canonical = canonical_code(symbol.code, language).text
            evidence = clone_evidence(code_side(canonical, language, symbol.name), language)
            missing = [entry for entry in evidence if not any(text in symbol.code for text in entry)]
            assert not missing, f"{path}:{symbol.start_line} {symbol.name}: {missing}"
            checked += 1
            languages.add(language)
    assert checked > 500 and {"python", "typescript", "java", "go"} <= languages


def test_a_candidate_that_cannot_reach_the_threshold_is_not_compared_and_the_answer_is_unchanged() -> None:
    """Under the threshold, past any re-embedding, and lacking a name of the new code as written:
    not a clone whatever its canonical form, so not put in canonical form (find_duplicates' cold
    cost is those forms). Every score from the threshold up is the one without pruning."""
    def character_counts(texts: list[str]) -> np.ndarray:  # a stand-in model: deterministic, not 1.0
        rows = np.zeros((len(texts), 128), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text:
                rows[row, ord(char) % 128] += 1
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    asked: list[str] = []

    def compared(candidate: Candidate) -> str:
        asked.append(candidate.name or "")
        return candidate.code

    def scored(candidates: list[Candidate], new: str = READER_RENAMED, **threshold: float) -> list:
        asked.clear()
        return score_candidates(new, "load_settings", "python", candidates, character_counts,
                                compared_code=compared, **threshold)

    clone = Candidate(READER, "read_config", "python", 0.40)  # a clone embedded low: has the names
    far = Candidate(SUM_POSITIVE, "far", "python", 0.45)  # lacks `loads`: cannot be a clone
    near = Candidate(SUM_POSITIVE, "near", "python", 0.65)  # may be the one re-embedded
    above = Candidate(SUM_NEGATIVE, "above", "python", 0.90)  # from the threshold up: its verdict decides
    for candidates, compared_names in (
        ([clone, far, near], ["near", "read_config"]),
        ([clone, far, near, above], ["above", "read_config"]),  # `above` is re-embedded: `near` cannot be
    ):
        pruned = scored(candidates, threshold=0.85)
        assert sorted(asked) == compared_names
        assert pruned[0][0] >= CLONE_FLOOR and pruned[0][1].verdict == "clone"
        assert pruned[1] == (0.45, None)
        full = scored(candidates)
        assert len(asked) == len(candidates)
        assert [p for p in pruned if p[0] >= 0.85] == [f for f in full if f[0] >= 0.85]
        assert all(p[0] < 0.85 for p, f in zip(pruned, full, strict=True) if f[0] < 0.85)
    # Operators are evidence too: RENAMED adds with `+=` and compares with `>`; READER does neither.
    scored([clone, far, near, above], new=RENAMED, threshold=0.85)
    assert sorted(asked) == ["above", "far", "near"]
    # Nothing to look for (no name, literal or operator): every candidate is compared, as before.
    swap = "def swap(pair):\n    first, second = pair\n    return second, first\n"
    scored([clone, far, near, above], new=swap, threshold=0.85)
    assert sorted(asked) == ["above", "far", "near", "read_config"]
