"""graph_query refuses mutating Cypher in every spelling, and the graph is unchanged afterwards.

The guard (``resources.graph.read_only.assert_read_only``) gives the clear message; the backend's read-only
mode (FalkorDB ``GRAPH.RO_QUERY``, Neo4j read transactions) is the real guarantee. Every case here must
come back as a 400 with an ``error`` (refused as a write, or a Cypher error from the read-only backend),
never a 5xx, and the node/edge counts and a property checksum must not move.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.badinput.conftest import assert_clean_error

NBSP, EM_SPACE, LINE_SEP, ZWSP, IDEO_SPACE = "\u00a0", "\u2003", "\u2028", "\u200b", "\u3000"
WRITES = {
    # case variants
    "create-lower": "create (n:Pwned {x: 1}) return n",
    "create-mixed": "CrEaTe (n:Pwned) RETURN n",
    "merge-upper": "MERGE (n:Pwned {name: 'x'}) RETURN n",
    "set-mixed": "MATCH (n:Function) sEt n.name = 'pwned' RETURN n",
    "delete-detach": "MATCH (n) dEtAcH dElEtE n",
    "remove-label": "MATCH (n:Function) REMOVE n:Function",
    "remove-prop": "MATCH (n:Function) REMOVE n.name",
    "drop-index": "DROP INDEX ON :Function(name)",
    "create-index": "CREATE INDEX FOR (n:Function) ON (n.pwned)",
    # comments around and inside
    "block-comment-before": "/* read only, promise */ CREATE (n:Pwned)",
    "block-comment-between": "MATCH (n)/**/SET/**/n.name='pwned'",
    "line-comment-then-write": "// MATCH only\nCREATE (n:Pwned)",
    "comment-hides-newline": "MATCH (n) RETURN n // harmless\n; CREATE (m:Pwned)",
    "nested-comment-like": "MATCH (n) /* /* */ DELETE n",
    # unicode whitespace between tokens
    "nbsp": f"MATCH (n:Function){NBSP}SET{NBSP}n.name = 'pwned'",
    "em-space": f"CREATE{EM_SPACE}(n:Pwned)",
    "line-separator": f"MATCH (n){LINE_SEP}DETACH{LINE_SEP}DELETE n",
    "ideographic-space": f"MERGE{IDEO_SPACE}(n:Pwned)",
    "zero-width-space": f"MATCH (n:Function) SET{ZWSP} n.name = 'pwned'",
    "tabs-and-crlf": "MATCH (n)\r\n\t\tSET\r\n\tn.name = 'pwned'",
    # procedures
    "db-createLabel": "CALL db.createLabel('Pwned')",
    "db-createProperty": "CALL db.createProperty('pwned')",
    "db-idx-fulltext-create": "CALL db.idx.fulltext.createNodeIndex('Function', 'name')",
    "db-idx-fulltext-drop": "CALL db.idx.fulltext.drop('Function')",
    "dbms-createUser": "CALL dbms.security.createUser('eve', 'pw', false)",
    "dbms-killQuery": "CALL dbms.killQuery('query-1')",
    "apoc-create-node": "CALL apoc.create.node(['Pwned'], {x: 1}) YIELD node RETURN node",
    "apoc-merge": "CALL apoc.merge.node(['Pwned'], {x: 1})",
    "apoc-doIt": "CALL apoc.cypher.doIt('CREATE (n:Pwned) RETURN n', {}) YIELD value RETURN value",
    "apoc-runWrite": "CALL apoc.cypher.runWrite('CREATE (n:Pwned)', {})",
    "apoc-periodic": "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DELETE n', {})",
    "apoc-do-when": "CALL apoc.do.when(true, 'CREATE (n:Pwned)', '', {}) YIELD value RETURN value",
    "apoc-refactor": "MATCH (n:Function) CALL apoc.refactor.rename.label('Function', 'Pwned', [n]) RETURN 1",
    "backtick-procedure": "CALL `db`.`createLabel`('Pwned')",
    "spaced-procedure": "CALL db . createLabel ('Pwned')",
    "upper-procedure": "CALL DB.CREATELABEL('Pwned')",
    # clauses
    "load-csv": "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
    "load-csv-lower-headers": "load   csv with headers from 'https://example.com/x.csv' as row create (n:Pwned)",
    "foreach": "MATCH (n:Function) FOREACH (x IN [1] | SET n.name = 'pwned')",
    "foreach-lower-create": "foreach (x in range(1, 3) | create (:Pwned {i: x}))",
    "subquery-create": "CALL { CREATE (n:Pwned) RETURN n } RETURN n",
    "subquery-with-import": "MATCH (f:Function) CALL { WITH f SET f.name = 'pwned' } RETURN f",
    "union-write": "MATCH (n) RETURN n.name AS x UNION CREATE (m:Pwned) RETURN 'x' AS x",
    "second-statement": "MATCH (n) RETURN n; MATCH (m) DETACH DELETE m",
    "with-then-write": "MATCH (n:Function) WITH n LIMIT 1 DELETE n",
    "optional-match-merge": "OPTIONAL MATCH (n:Nope) MERGE (m:Pwned) RETURN m",
    "set-plus-equals": "MATCH (n:Function) SET n += {name: 'pwned'}",
    # keywords built from strings are data, never statements (allowed or refused, never executed)
    "concatenated-keyword": "RETURN 'CRE' + 'ATE (n:Pwned)' AS text",
    "keyword-in-param-value": {"cypher": "MATCH (n:Function {name: $name}) RETURN n.name AS name",
                               "parameters": {"name": "x'}) CREATE (m:Pwned) //"}},
    "write-in-param-key": {"cypher": "MATCH (n:Function) RETURN n.name AS name LIMIT 1",
                           "parameters": {"a=1 CREATE (m:Pwned) RETURN 1 //": 1}},
    "write-in-backtick-name": "MATCH (`CREATE (n:Pwned)`:Function) RETURN count(*) AS c",
    "admin-alter-user": "ALTER USER neo4j SET PASSWORD 'x'",
    "admin-grant": "GRANT ALL ON DATABASE * TO PUBLIC",
    "admin-stop-db": "STOP DATABASE neo4j",
    "create-database": "CREATE DATABASE pwned",
    "terminate": "TERMINATE TRANSACTIONS 'neo4j-transaction-1'",
}
DATA_ONLY = {"concatenated-keyword", "keyword-in-param-value", "write-in-param-key", "write-in-backtick-name"}


def _rows(http: TestClient, cypher: str) -> list[dict[str, Any]]:
    response = http.post("/tools/graph_query", json={"cypher": cypher, "limit": 1000})
    assert response.status_code == 200, response.text
    return response.json()["results"]


def _fingerprint(http: TestClient) -> tuple[Any, ...]:
    nodes = _rows(http, "MATCH (n) RETURN count(n) AS c")[0]["c"]
    edges = _rows(http, "MATCH ()-[r]->() RETURN count(r) AS c")[0]["c"]
    labels = sorted(str(r["l"]) for r in _rows(http, "MATCH (n) RETURN DISTINCT labels(n) AS l"))
    names = sorted(str(r["n"]) for r in _rows(http, "MATCH (n) RETURN n.name AS n"))
    return nodes, edges, tuple(labels), tuple(names)


@pytest.fixture(scope="module")
def before(http: TestClient) -> tuple[Any, ...]:
    fingerprint = _fingerprint(http)
    assert fingerprint[0] > 0 and fingerprint[1] > 0, fingerprint
    return fingerprint


@pytest.mark.parametrize("case", list(WRITES), ids=list(WRITES))
def test_mutating_cypher_is_refused_and_the_graph_unchanged(http: TestClient, before: tuple[Any, ...], case: str) -> None:
    arguments = WRITES[case] if isinstance(WRITES[case], dict) else {"cypher": WRITES[case]}
    response = http.post("/tools/graph_query", json=arguments)
    body = assert_clean_error(response.status_code, response.text)
    if case not in DATA_ONLY:
        assert response.status_code == 400, f"{case} was run: {response.text[:500]}"
        assert isinstance(body.get("error"), str) and body["error"], body
    assert _fingerprint(http) == before, f"{case} changed the graph"
    assert "Pwned" not in str(_rows(http, "MATCH (n) RETURN DISTINCT labels(n) AS l"))


def test_plain_reads_still_work(http: TestClient, before: tuple[Any, ...]) -> None:
    rows = _rows(http, "MATCH (n:Function) WHERE n.name <> 'CREATE' RETURN n.name AS name ORDER BY name // DELETE")
    assert [r["name"] for r in rows] == sorted(r["name"] for r in rows) and rows
    assert _rows(http, "RETURN 'MERGE' + ' ' + 'SET' AS text") == [{"text": "MERGE SET"}]
    assert _fingerprint(http) == before
