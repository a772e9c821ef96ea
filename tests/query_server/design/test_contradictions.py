"""validate_fix finds contradictions, not only topics (issue 20, item 1): each kind of
contradiction (changed value, negated modality, forbidden name, removed step) against real ADR
text, a conforming twin that stays aligned, and an unrelated fix that stays aligned; the statement
reader on plain sentences; and the whole tool on an indexed project."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from query_server.design.contradictions import contradictions
from query_server.design.statements import statements_of, values_in

ADRS = {
    "0002-exit-codes.md": """# 2. Exit codes

## Status

Accepted

## Context

Wrappers branch on the exit status.

## Decision

relctl uses a fixed, documented set of exit statuses:

* `0` when the command did what was asked.
* `1` when the operation failed: the release API refused the request, an upload
  failed, or a pre-flight check did not pass.
* `2` on usage errors: an unknown option, a missing argument, an invalid value. The
  CLI must exit with code 2 on usage errors, never 1.

Commands never call `sys.exit()` themselves. They raise `UsageError` or
`OperationFailed` and `relctl.main.run` maps the exception to the status above.

## Consequences

Wrappers can tell a typo from a failed operation.
""",
    "0004-timeouts-and-retries.md": """# 4. Timeouts and retries for release API calls

## Status

Accepted

## Context

A call hung for forty minutes.

## Decision

All calls to the release API go through `relctl.api.ApiClient`. The `requests`
library is not used.

* Every request has a timeout: 5 seconds to connect and 30 seconds to read.
* GET requests are retried at most 3 times, with exponential backoff of 1, 2 and 4
  seconds.
* POST, PUT, PATCH and DELETE requests are never retried automatically; the
  command fails with status 1.

## Consequences

A dead API costs a user at most about a minute and a half.
""",
    "0005-credentials.md": """# 5. Configuration file and credentials

## Status

Accepted

## Context

Two API tokens leaked.

## Decision

Configuration lives in `config.toml`, parsed with `tomllib`. argparse, docopt and typer
are not used anywhere in the package. The API token is read from the `RELCTL_TOKEN`
environment variable or from the OS keyring. The token is never written to the
configuration file or to any other file by relctl.

## Consequences

Sharing a configuration file no longer shares a credential.
""",
    "0008-sign-artifacts.md": """# 8. Verify and sign release artifacts

## Status

Accepted

## Context

A truncated wheel was published.

## Decision

`relctl publish` checks every artifact before uploading anything:

1. It computes the SHA-256 digest of each file and compares it with the
   `SHA256SUMS` manifest produced by the build.
2. It signs each artifact with the team's Sigstore identity (keyless signing via
   `sigstore sign`).

## Consequences

Publishing takes a few seconds longer per artifact.
""",
}

HEADER = "--- a/relctl/main.py\n+++ b/relctl/main.py\n@@ -47,3 +47,3 @@\n"
DROPPED = HEADER + '-    sums = read_sums(dist / "SHA256SUMS")\n-    verify(sums)\n     output.progress("publishing")\n'
KEPT = HEADER + '-    sums = read_sums(dist / "SHA256SUMS")\n+    sums = read_sums(dist / "SHA256SUMS", threads=8)\n     verify(sums)\n'
CASES = [  # (kind, violation (description, diff), conforming twin, expected ADR)
    ("changed_value", ("Bump the API client's read timeout to 10 minutes so large promotions finish.", None),
     ("Route the listing call through ApiClient so it gets the standard 5 s connect / 30 s read timeout.", None), "0004"),
    ("changed_value", ("Bad flags now make relctl return 1 like every other failure; changed the usage-error branch.", None),
     ("An unknown --env value is now rejected by click.Choice, so relctl reports a usage error and returns status 2.", None), "0002"),
    ("negated_modality", ("Make ApiClient.post retry on 503 as well, so a deployment survives a short API restart.", None),
     ("When POST /deployments gets a 503, fail right away with status 1 and say the deploy can be rerun.", None), "0004"),
    ("negated_modality", ("`relctl login` now saves the API token under [auth] in config.toml.", None),
     ("`relctl login` now stores the API token in the OS keyring.", None), "0005"),
    ("forbidden_name", ("Rewrote the new `relctl doctor` subcommand with typer.", "--- /dev/null\n+++ b/relctl/doctor.py\n@@ -0,0 +1 @@\n+import typer\n"),
     ("Added the `relctl doctor` subcommand as a click command on the main group.", None), "0005"),
    ("forbidden_name", ("Artifact downloads now use requests.get(url, stream=True).", None),
     ("Artifact downloads now stream through ApiClient's httpx client; GET requests keep their retries.", None), "0004"),
    ("removed_step", ("Publishing was slow, so the checksum pass is gone.", DROPPED),
     ("Publishing was slow; the digests are now computed in a thread pool and compared with SHA256SUMS before any upload.", KEPT), "0008"),
    ("removed_step", ("Skip the sigstore signing step for nightly builds so the job finishes faster.", None),
     ("Give the nightly job the id-token permission so nightly builds are signed like the others.", None), "0008"),
]
UNRELATED = ["Fix the typo \"enviroment\" in the help text of `relctl promote`.",
             "Document how to install shell completion for bash and zsh in the README."]


def _rows() -> list[SimpleNamespace]:
    """The ADRs as design memories carry them (the decision section, the title)."""
    rows = []
    for name, text in ADRS.items():
        decision = text.split("## Decision\n", 1)[1].split("\n## ", 1)[0]
        rows.append(SimpleNamespace(id=name[:4], memory_type="design", content=text,
                                    metadata={"decision": decision, "title": name[:4], "source_document": f"docs/adr/{name}"}))
    return rows


STATEMENTS = [s for row in _rows() for s in statements_of(row)]


@pytest.mark.parametrize(("kind", "violation", "conforming", "adr"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_kind_is_found_and_its_twin_stays_aligned(kind: str, violation: tuple, conforming: tuple, adr: str) -> None:
    found = contradictions(STATEMENTS, *violation)
    assert any(c.kind == kind and c.statement.source == adr for c in found), [(c.kind, c.statement.source, c.differs) for c in found]
    hit = next(c for c in found if c.kind == kind)
    assert hit.differs and "\n" not in hit.statement.sentence  # it says what differs and quotes one clean line
    assert contradictions(STATEMENTS, *conforming) == []


@pytest.mark.parametrize("description", UNRELATED)
def test_an_unrelated_fix_contradicts_nothing(description: str) -> None:
    assert contradictions(STATEMENTS, description, None) == []


def test_statements_read_modality_values_and_names() -> None:
    by_text = {s.sentence: s for s in STATEMENTS}
    exit_code = by_text["The CLI must exit with code 2 on usage errors, never 1."]
    assert [(v.number, v.quantity) for v in exit_code.values] == [(2.0, "exit")]
    assert [(v.number, v.quantity) for v in exit_code.forbidden_values] == [(1.0, "exit")]
    retries = next(s for s in STATEMENTS if s.sentence.startswith("GET requests are retried"))
    assert retries.modality == "fact" and [(v.number, v.quantity, v.bound) for v in retries.values][:2] == [(3.0, "count", "max"), (1.0, "time", "eq")]
    never = by_text["The token is never written to the configuration file or to any other file by relctl."]
    assert never.modality == "never" and never.action == {"writ"} and "token" in never.specific  # the subject is what is protected, not required
    assert {"argparse", "docopt", "typer"} <= set(next(s for s in STATEMENTS if s.sentence.startswith("argparse")).forbidden_names)
    assert [(v.number, v.quantity) for v in values_in("a 15-second pause, up to 10 minutes, three times")] == [
        (15.0, "time"), (600.0, "time"), (3.0, "count")]


def test_validate_fix_quotes_the_statement_and_says_what_differs(project: Path, service_factory) -> None:
    """The whole tool on an indexed project: the conflict quotes the ADR sentence on one line,
    says what differs, caps the score, and the conforming twin and an unrelated fix stay aligned."""
    from resources.schemas.design import ValidateFixInput
    from resources.schemas.tools import IndexInput

    (project / "docs" / "adr").mkdir(parents=True)
    for name, text in ADRS.items():
        (project / "docs" / "adr" / name).write_text(text)
    (project / "relctl").mkdir()
    (project / "relctl" / "main.py").write_text("def run():\n    return 0\n")
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    bad = svc.design.validate_fix(ValidateFixInput(fix_description="Let GET calls try up to 10 times with a fixed 15-second pause."))
    assert bad.verdict == "conflicts" and bad.overall_alignment_score < 0.5
    conflict = bad.conflicts[0]
    assert conflict.source_document == "docs/adr/0004-timeouts-and-retries.md" and conflict.kind == "changed_value"
    assert "\n" not in conflict.statement and "3 times" in conflict.differs and "10 times" in conflict.differs
    assert all(s.verdict != "conflicts" for s in bad.related_designs)  # a conflict is listed once
    good = svc.design.validate_fix(ValidateFixInput(fix_description="`relctl status` now uses ApiClient.get, which retries reads three times with 1/2/4 second backoff."))
    assert good.verdict == "aligned" and good.overall_alignment_score > bad.overall_alignment_score
    for description in UNRELATED:
        assert svc.design.validate_fix(ValidateFixInput(fix_description=description)).verdict == "aligned"


def _statements(text: str) -> list:
    from query_server.design.statements import sentences, statement_of

    row = SimpleNamespace(id="m1", memory_type="design", metadata={"title": "ADR", "source_document": "docs/adr/0001.md"})
    return [s for s in (statement_of(row, "ADR", sentence, lead_in) for sentence, lead_in in sentences(text)) if s]


def test_diff_changing_a_stated_number_is_a_changed_value_and_a_move_within_the_bound_is_not() -> None:
    """A diff line that only changes a number the design states (Go durations, shifts, versions in
    identifiers) contradicts it; the same change in the allowed direction does not."""
    statements = _statements(
        "Every metadata store call has a deadline of 2 s.\n\nTLS 1.2 is the minimum version on the public listener.\n\n"
        "Parts are 8 MiB to 512 MiB."
    )

    def diff(old: str, new: str) -> str:
        return f"--- a/x.go\n+++ b/x.go\n@@ -1,1 +1,1 @@\n-{old}\n+{new}\n"

    found = contradictions(statements, "Compaction makes lookups slow.", diff("MetadataCallTimeout = 2 * time.Second", "MetadataCallTimeout = 60 * time.Second"))
    assert [c.kind for c in found] == ["changed_value"] and "2 to 60" in found[0].differs
    assert contradictions(statements, "Legacy appliance.", diff("MinVersion: tls.VersionTLS12,", "MinVersion: tls.VersionTLS10,"))
    assert not contradictions(statements, "Only modern clients remain.", diff("MinVersion: tls.VersionTLS12,", "MinVersion: tls.VersionTLS13,"))
    assert contradictions(statements, "IoT uploaders.", diff("MinPartSize = 8 << 20 // 8 MiB parts", "MinPartSize = 1 << 20 // 1 MiB parts"))


def test_bounds_rates_tables_and_banned_lists_are_read() -> None:
    """'No more than 5 attempts' is a bound, not a prohibition; a table row is a statement with its
    rate; the items of a banning list are forbidden names; names in parentheses before 'is never
    used' are forbidden."""
    from query_server.design.statements import values_in

    attempts = _statements("No more than 5 attempts in total per notification.")[0]
    assert attempts.modality != "never" and attempts.values[0].bound == "max"
    table = _statements("We limit every route.\n\n| Route | Limit |\n|---|---|\n| `POST /v1/sync/push` | 120 requests per minute |\n")
    row = next(s for s in table if s.values)
    assert row.values[0].quantity == "count/s" and "push" in row.subject
    assert contradictions(table, "Raised the push throttle to 1000 calls a minute per device.", None)
    banned = _statements("The following are not allowed in the gateway:\n\n* the `unsafe` package;\n* `crypto/md5`, for any purpose.\n")
    assert {n for s in banned for n in s.forbidden_names} == {"unsafe", "crypto/md5"}
    assert contradictions(banned, "ETags now come from md5 of the body.", "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-\th := sha256.New()\n+\th := md5.New()\n")
    clock = _statements("The device's wall-clock time (`clientUpdatedAt`, `Date` headers) is never used to order changes.")[0]
    assert "clientUpdatedAt" in clock.forbidden_names
    assert values_in("at least every 30 days")[0].bound == "max" and values_in("TLS 1.2 is the minimum")[0].bound == "min"


def test_a_step_removed_in_words_or_from_code_in_another_spelling_is_found() -> None:
    """'skip the zod parse' takes away 'every push is validated' (checking verbs are one);
    'a task without a subject' is a condition, not a removed step; a removed
    ``db.notificationFailures.insert`` takes away the `notification_failures` the design requires;
    'turned scrubbing off' is a removal."""
    statements = _statements(
        "Every push is validated against the batch schema before any change is applied.\n\n"
        "A failed notification is always recorded in `notification_failures`.\n\n"
        "The scrubber re-reads every stored object at least every 30 days on every node."
    )
    found = contradictions(statements, "Old app versions now skip the zod parse and their changes are applied as they arrive.", None)
    assert [c.kind for c in found] == ["removed_step"]
    assert not contradictions(statements, "Reject a push without a batch schema version before any change is applied.", None)
    removed = "--- a/n.ts\n+++ b/n.ts\n@@ -1,2 +1,1 @@\n-  await db.notificationFailures.insert({ id });\n   log.warn('failed');\n"
    assert [c.kind for c in contradictions(statements, "The table grew too fast; we only warn now.", removed)] == ["removed_step"]
    assert [c.kind for c in contradictions(statements, "Turned the object scrubber off on every cold node.", None)] == ["removed_step"]


def test_half_the_evidence_of_a_contradiction_is_tension_not_a_conflict() -> None:
    """Taking away something on a required sentence's topic, or doing a prohibited action on a
    sentence's topic, without the rest of a contradiction, is tension (it ranks the fix lower);
    a fix that touches neither has none."""
    from query_server.design.contradictions import read_fix, tension

    statements = _statements("The scrubber must re-read every stored object at least every 30 days.\n\nRequest bodies are never logged.")
    assert tension(statements, read_fix("Turned scrubbing off for the cold tier.", None)) == 1.0
    assert tension(statements, read_fix("The handler now logs the request id at debug level.", None)) == 1.0
    assert tension(statements, read_fix("Fixed the typo in the README.", None)) == 0.0


def test_a_value_is_matched_by_the_words_around_it_not_by_its_kind() -> None:
    """In a long sentence, a value's topic is the words around it; 'timeout' or 'limit' says what
    kind of value it is, not whose: another component's timeout is not a changed value."""
    statements = _statements(
        "A write answers after the vectors and leaves its graph node to the outbox, which the background thread projects "
        "within seconds after the read (`CODEMEM_GRAPH_QUERY_TIMEOUT_S`, default 10 s, bounds `graph_query`)."
    )
    assert not contradictions(statements, "Bumped the hook timeout to 10 minutes.", None)
    assert [c.kind for c in contradictions(statements, "Raised the graph query timeout to 10 minutes.", None)] == ["changed_value"]
