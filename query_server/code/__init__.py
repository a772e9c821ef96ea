"""The code tools by job — search, symbols and the graph, duplicates, index jobs, health and
status — each a ``CodeLookups`` over the stores ``query_server.service.CodeMemService`` opens."""
