"""The code graph: the GraphStore protocol, its Cypher, the embedded FalkorDB and Neo4j implementations."""
