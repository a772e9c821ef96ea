"""All configuration of codemem in one pydantic-settings model.

Environment variables use the ``CODEMEM_`` prefix; the plain names users already know from the
seeds (``QDRANT_URL``, ``QDRANT_HOST``, ``NEO4J_URI``, ``VOYAGE_API_KEY``, ...) are accepted as
aliases. Defaults give the embedded mode: state under ``<project>/.codemem/``, no server.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EXTENSIONS: tuple[str, ...] = (
    ".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts",
    ".java", ".go", ".rs", ".cs",
    ".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++",
)


def _alias(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class Settings(BaseSettings):
    """codemem settings; every field can be set from the environment.

    Attributes:
        project_root: The repository being indexed and served.
        state_dir: Where embedded stores, caches and locks live (default ``<project>/.codemem``).
        global_dir: Where the ``global`` memory scope's ledger lives, shared by every project of
            this user (default ``~/.codemem/global``; ``CODEMEM_GLOBAL_DIR``).
        enterprise_scope: Turns the ``enterprise`` memory scope on (off by default;
            ``CODEMEM_ENTERPRISE_SCOPE=1``, also read from Claude Code's managed settings,
            ``resources.memory.enterprise``).
        enterprise_dir: The organisation's shared directory of the enterprise scope's ledger
            (``CLAUDE_MEMORY_ENTERPRISE_PATH`` or ``CODEMEM_ENTERPRISE_DIR``; else the managed settings' env).
        managed_settings: Claude Code's managed settings file read for those two (default: the
            platform's, e.g. ``/etc/claude-code/managed-settings.json``).
        extensions: File extensions that are indexed.
        max_file_bytes: Files larger than this are skipped (with the reason reported).
        qdrant_url / qdrant_host / qdrant_port / qdrant_api_key: Qdrant server; unset means
            embedded qdrant-edge under the state dir.
        qdrant_shard_number / qdrant_replication_factor: Shards and replicas of each collection
            codemem creates on a Qdrant server (distributed mode, ``docs/scaling.md``); unset
            leaves Qdrant's defaults. Existing collections keep theirs. Ignored when embedded.
        neo4j_uri / neo4j_user / neo4j_password: Neo4j server; unset means embedded FalkorDB.
        database_url: PostgreSQL for the state server mode shares (``postgresql://user:password@host/db``,
            the ``server`` extra): the project's memory ledger and the embedding cache
            (``docs/scaling.md``); unset keeps them in SQLite under the state dir.
        project_id: Names this project's state in shared servers (its memory ledger's PostgreSQL
            schema): replicas and workers of one project set the same value (``CODEMEM_PROJECT_ID``);
            unset: the project directory's name and a digest of its resolved path.
        voyage_api_key: Enables voyage-code-3; unset means the local model.
        embedding_model: Local model name (only all-MiniLM-L6-v2 ships in a package).
        embedding_model_path: Directory or .zip with the local model's model.safetensors,
            tokenizer.json and config.json; unset means the installed model package.
        embed_runtime: Local model runtime: ``auto`` (onnxruntime when installed, else numpy),
            ``onnx`` or ``numpy``.
        embed_threads: Threads for the local model (1 is measured best under query load).
        embed_precision: Local model weights: ``fp32`` (the published weights), ``int8``
            (matrix multiplications quantized per channel, onnx runtime: ~2x the rate, code search
            MRR within 1%, memory search MRR 1.4% lower: ``bench/embed_rate.py``, docs/benchmarks.md)
            or ``auto`` (int8 on the onnx runtime, else fp32). A change re-embeds the index.
        duplicate_threshold: Default similarity for duplicate detection.
        parse_timeout_s: Per-file parser time limit.
        index_memory_mb: Memory budget of an index run, in MB (0: half the machine's memory, or of
            the container's limit). Each parse worker is held to a share of it (the budget over
            the workers plus two, at least 128 MB): a file whose parse needs more is skipped with
            the reason and the run goes on. The stores' own memory is not bounded by it.
        api_token: Bearer token the HTTP API requires (mandatory when bound beyond loopback).
        allowed_hosts: Host header values the HTTP server answers besides the loopback names and the
            address ``codemem serve --host`` binds (DNS-rebinding protection, ``query_server.request_guard``):
            ``name`` (any port), ``name:port`` or ``name:*``.
        allowed_origins: Origin header values (web pages) accepted besides the pages of the allowed hosts,
            e.g. ``https://tools.example.com``; ``scheme://name:*`` allows any port.
        max_request_bytes: Largest HTTP request body, refused with 413 before it is read (default 2 MiB).
        fusion: How code search fuses dense and sparse candidates: ``minmax`` (normalized-score
            convex combination, measured best) or ``rrf`` (reciprocal rank fusion in Qdrant).
        dense_weight: Weight of the dense list in ``minmax`` fusion.
        search_candidates: Candidates taken from each list before fusion.
        memory_conflict_threshold: Cosine similarity at which memory_add reports an existing
            memory of the same type as a possible duplicate.
        memory_dedup_threshold: Cosine similarity at which normalization merges two memories.
        memory_recency_half_life_days: Age at which recency halves a memory's ranking boost.
        memory_access_weight: Largest share by which access frequency (REQ-MEM-FN-024: log-scaled
            access count, decaying with the time since the last access) raises a memory's search
            score: 0.03 lifts the most used memory at most 3% above an equally relevant unused
            one, so it orders near-ties but never lifts a memory over one it trails by more than
            ~3% (1 - 1/1.03); 0 ignores access. Larger weights cost held-out queries quality
            (``python -m bench.memory --ranking``).
        doc_globs: Gitignore-style globs of the documents ingested as requirements, designs
            (ADRs) and searchable doc chunks.
        requirement_id_patterns: Regular expressions of requirement ids (the first group, or
            the whole match, is the id); the default matches REQ-XXX-NNN.
        component_depth: Directory depth that makes a component (1: ``agents/``, 2:
            ``src/agents/``); packages deeper than that belong to their ancestor.
        pattern_min_implementations: A base class or interface with at least this many
            implementations becomes a code_pattern memory (a Template).
        heap_trim_interval_s: How often the process that owns the stores gives the heap's free
            memory back to the system after a burst of work (glibc ``malloc_trim``); 0 disables.
        graph_query_timeout_s: Server-side time limit of a ``graph_query`` (client Cypher). While
            one runs, memory writes leave their graph nodes to the background sync (FalkorDB's
            writes wait for running reads), so this also bounds how late they appear there.
        dagster_record_wait_s: How long ``codemem index``, its index done, waits for the process
            that records its Dagster run; a recording still going on then finishes in the
            background (the report names the run; the Dagster UI shows it once written). Under
            2 s, a recorder still importing Dagster is not waited for at all.
    """

    model_config = SettingsConfigDict(env_prefix="CODEMEM_", extra="ignore", populate_by_name=True)

    project_root: Path = Field(default_factory=Path.cwd)
    state_dir: Path | None = None
    global_dir: Path | None = None
    enterprise_scope: bool = False
    enterprise_dir: Path | None = Field(
        default=None, validation_alias=_alias("CODEMEM_ENTERPRISE_DIR", "CLAUDE_MEMORY_ENTERPRISE_PATH")
    )
    managed_settings: Path | None = None
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    max_file_bytes: int = 1_000_000
    qdrant_url: str | None = Field(default=None, validation_alias=_alias("CODEMEM_QDRANT_URL", "QDRANT_URL"))
    qdrant_host: str | None = Field(default=None, validation_alias=_alias("CODEMEM_QDRANT_HOST", "QDRANT_HOST"))
    qdrant_port: int = Field(default=6333, validation_alias=_alias("CODEMEM_QDRANT_PORT", "QDRANT_PORT"))
    qdrant_api_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("CODEMEM_QDRANT_API_KEY", "QDRANT_API_KEY")
    )
    qdrant_shard_number: int | None = Field(default=None, ge=1)
    qdrant_replication_factor: int | None = Field(default=None, ge=1)
    neo4j_uri: str | None = Field(default=None, validation_alias=_alias("CODEMEM_NEO4J_URI", "NEO4J_URI"))
    neo4j_user: str = Field(default="neo4j", validation_alias=_alias("CODEMEM_NEO4J_USER", "NEO4J_USER"))
    neo4j_password: SecretStr | None = Field(
        default=None, validation_alias=_alias("CODEMEM_NEO4J_PASSWORD", "NEO4J_PASSWORD")
    )
    database_url: SecretStr | None = None
    project_id: str | None = Field(default=None, min_length=1, max_length=200)
    voyage_api_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("CODEMEM_VOYAGE_API_KEY", "VOYAGE_API_KEY")
    )
    voyage_base_url: str | None = Field(
        default=None, validation_alias=_alias("CODEMEM_VOYAGE_BASE_URL", "VOYAGE_BASE_URL")
    )
    voyage_model: str = "voyage-code-3"
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_model_path: Path | None = None
    embed_runtime: str = "auto"
    embed_threads: int = 1
    embed_precision: str = "fp32"
    embed_batch_size: int = 32
    embedding_cache_max_entries: int = 500_000
    embedding_cache_ttl_days: int = 30
    duplicate_threshold: float = Field(
        default=0.85, validation_alias=_alias("CODEMEM_DUPLICATE_THRESHOLD", "DUPLICATE_THRESHOLD")
    )
    parse_timeout_s: float = 10.0
    index_memory_mb: int = Field(default=0, ge=0)
    api_token: SecretStr | None = Field(
        default=None, validation_alias=_alias("CODEMEM_API_TOKEN", "MEMORY_SERVICE_API_KEY")
    )
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    fusion: Literal["minmax", "rrf"] = "minmax"
    dense_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    search_candidates: int = Field(default=100, ge=10, le=1000)
    dense_embeddings: bool = True
    memory_conflict_threshold: float = Field(default=0.85, ge=0.5, le=1.0)
    memory_dedup_threshold: float = Field(default=0.95, ge=0.8, le=1.0)
    memory_recency_half_life_days: float = Field(default=90.0, gt=0)
    memory_access_weight: float = Field(default=0.03, ge=0.0, le=0.25)
    doc_globs: tuple[str, ...] = (
        "docs/**/*.md", "docs/**/*.rst", "docs/**/*.txt", "doc/**/*.md", "doc/**/*.rst",
        "adr/**/*.md", "**/adr/**/*.md", "**/decisions/**/*.md", "*.md", "*.rst",
        "requirements*.md", "**/requirements*.md", "REQUIREMENTS*",
    )
    requirement_id_patterns: tuple[str, ...] = (r"\bREQ-[A-Z0-9]+(?:-[A-Z0-9]+)*-\d{3,}\b",)
    component_depth: int = Field(default=1, ge=1, le=4)
    pattern_min_implementations: int = Field(default=3, ge=2)
    heap_trim_interval_s: float = Field(default=10.0, ge=0)
    graph_query_timeout_s: float = Field(default=10.0, gt=0, le=300)
    dagster_record_wait_s: float = Field(default=0.1, ge=0)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if not re.fullmatch(r"[^\s/@]+", entry.strip()):
                raise ValueError(
                    f"{entry!r} is not a host name — CODEMEM_ALLOWED_HOSTS takes names such as codemem.internal "
                    "or codemem.internal:8765, not URLs"
                )
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if not re.fullmatch(r"https?://[^\s/@]+/?", entry.strip()):
                raise ValueError(
                    f"{entry!r} is not an origin — CODEMEM_ALLOWED_ORIGINS takes scheme://host[:port], "
                    "e.g. https://tools.example.com"
                )
        return value

    def resolved_root(self) -> Path:
        """The project root, absolute with symlinks resolved."""
        return self.project_root.expanduser().resolve()

    def resolved_state_dir(self) -> Path:
        """The state directory (``<project>/.codemem`` unless configured)."""
        if self.state_dir is not None:
            return self.state_dir.expanduser().resolve()
        return self.resolved_root() / ".codemem"

    def resolved_global_dir(self) -> Path:
        """The directory of the global memory scope (``~/.codemem/global`` unless configured)."""
        if self.global_dir is not None:
            return self.global_dir.expanduser().resolve()
        return Path.home() / ".codemem" / "global"

    def shared_database_url(self) -> str:
        """``CODEMEM_DATABASE_URL`` (server mode's shared state), or "" when unset or blank."""
        return self.database_url.get_secret_value().strip() if self.database_url is not None else ""

    @property
    def shared_stores(self) -> bool:
        """True when every store is shared by the processes that use it (PostgreSQL, a Qdrant
        server and Neo4j): no process owns the project, each reads and writes directly."""
        return bool(self.shared_database_url()) and self.server_mode_vectors and self.server_mode_graph

    @property
    def server_mode_vectors(self) -> bool:
        """True when a Qdrant server is configured."""
        return bool(self.qdrant_url or self.qdrant_host)

    @property
    def server_mode_graph(self) -> bool:
        """True when a Neo4j server is configured."""
        return bool(self.neo4j_uri)
