"""Server-mode deployment files, checked without a Docker engine.

* ``docker-compose.yml`` against the official Compose specification schema
  (``deploy/compose-spec.json``: compose-spec/compose-spec ``schema/compose-spec.json`` at commit
  00655e2222608fa6eaecdf12ac5195889ca2244a, vendored unchanged), before and after ``${VAR}``
  interpolation, and against the deployment requirements (REQ-MEM-DEP-001..004,
  REQ-MEM-SEC-001..003, REQ-MEM-SCAL-004): loopback-only ports, health checks, restart policy,
  named volumes, memory limits, hardening, no secret in a file, every variable documented.
* ``Dockerfile`` / ``.dockerignore``: non-root user, no build tools in the final stage.
* ``deploy/dagster/*.yaml``: Dagster's own schemas, Postgres storage, the workspace pointing at
  the code server that docker-compose.yml runs.
* ``docker compose config`` itself (Compose v2, which needs no engine for it): the docker CLI's
  plugin, or the one ``scripts/install-compose.sh`` installs from Debian into ``.tools/``.
  Skipped with the reason when neither is there, a failure when CODEMEM_REQUIRE_COMPOSE=1 (CI).
* The Qdrant sharding settings reach ``create_collection`` (distributed mode, docs/scaling.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from unittest import mock

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"
DAGSTER_DIR = ROOT / "deploy" / "dagster"

CODEMEM_SERVICES = {"query-server", "dagster-code", "dagster-webserver", "dagster-daemon"}
REQUIRED_SERVICES = {"qdrant", "neo4j", "postgres", *CODEMEM_SERVICES}
# REQ-MEM-DEP-002 names, and where each must be mounted.
REQUIRED_VOLUMES = {
    "memory-qdrant-data": ("qdrant", "/qdrant/storage"),
    "memory-neo4j-data": ("neo4j", "/data"),
    "memory-service-cache": ("query-server", "/var/lib/codemem"),
}
# REQ-MEM-SCAL-004: (absolute minimum, recommended) per service, in bytes.
GIB = 1024**3
MEMORY_FLOORS = {"query-server": (1 * GIB, 2 * GIB), "qdrant": (2 * GIB, 4 * GIB), "neo4j": (1 * GIB, 2 * GIB)}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|(^|_)AUTH($|_)")
VAR_REF = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)((?::?[-?])([^}]*))?\}")
ENV_LINE = re.compile(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$")


# ------------------------------------------------------------------------------------ helpers


def _compose_raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _env_example() -> dict[str, tuple[bool, str]]:
    """NAME -> (active, value): active lines are values, '# NAME=' lines optional defaults."""
    entries: dict[str, tuple[bool, str]] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = ENV_LINE.match(line.strip())
        if match:
            entries[match.group(2)] = (match.group(1) is None, match.group(3))
    return entries


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}, $$."""
    if isinstance(value, dict):
        return {key: _interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, op_and_arg, arg = match.group(1), match.group(2) or "", match.group(3) or ""
        current = env.get(name)
        unset_or_empty = not current
        if op_and_arg.startswith(":-"):
            return arg if unset_or_empty else current
        if op_and_arg.startswith("-"):
            return arg if current is None else current
        if op_and_arg.startswith(":?"):
            if unset_or_empty:
                raise KeyError(f"{name}: {arg}")
            return current
        if op_and_arg.startswith("?"):
            if current is None:
                raise KeyError(f"{name}: {arg}")
            return current
        return current or ""

    return VAR_REF.sub(substitute, value).replace("$$", "$")


def _filled_env(project_path: Path) -> dict[str, str]:
    """.env.example with every required value filled in (what a user's .env looks like)."""
    env = {name: value for name, (active, value) in _env_example().items() if active}
    for name, value in env.items():
        if not value:
            env[name] = str(project_path) if name == "PROJECT_PATH" else f"dummy-{name.lower()}-0123456789"
    return env


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """docker-compose.yml as Compose sees it with a filled-in .env."""
    return _interpolate(_compose_raw(), _filled_env(ROOT))


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((ROOT / "deploy" / "compose-spec.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _parse_bytes(size: str | int) -> int:
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)b?", str(size).strip().lower())
    assert match, f"unreadable size {size!r}"
    return int(float(match.group(1)) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2)])


def _memory_limit(service: dict[str, Any]) -> str | None:
    limits = ((service.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    return limits.get("memory") or service.get("mem_limit")


def _volume_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume entry, short or long syntax."""
    mounts = []
    for entry in service.get("volumes", []):
        if isinstance(entry, str):
            parts = entry.split(":")
            mounts.append((parts[0], parts[1] if len(parts) > 1 else parts[0]))
        else:
            mounts.append((entry.get("source", ""), entry["target"]))
    return mounts


def _dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Instructions (keyword, arguments) per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(
        line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")
    ))
    stages: list[list[tuple[str, str]]] = [[]]
    for line in text.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), args.strip()))
    return stages


# ---------------------------------------------------------------------- compose specification


def test_compose_file_matches_the_compose_specification(schema_validator, compose) -> None:
    for label, document in (("as written", _compose_raw()), ("interpolated", compose)):
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in schema_validator.iter_errors(document)]
        assert not errors, f"docker-compose.yml ({label}) breaks the Compose specification:\n" + "\n".join(errors)


def test_the_vendored_schema_rejects_what_compose_rejects(schema_validator) -> None:
    """Guards against a schema that accepts anything (a truncated or emptied vendored file)."""
    bad = {"services": {"a": {"image": "x", "healthcheck": {"tset": ["CMD", "true"]}}}}
    assert list(schema_validator.iter_errors(bad))
    bad = {"services": {"a": {"image": "x", "depends_on": {"b": {"condition": "service_ready"}}}}}
    assert list(schema_validator.iter_errors(bad))
    assert not list(schema_validator.iter_errors({"services": {"a": {"image": "x"}}}))


def test_every_required_service_is_defined(compose) -> None:
    assert REQUIRED_SERVICES <= set(compose["services"]), REQUIRED_SERVICES - set(compose["services"])
    assert compose["services"]["qdrant"]["image"].startswith("qdrant/qdrant:v")
    assert re.fullmatch(r"neo4j:5\.\d+\.\d+-community", compose["services"]["neo4j"]["image"])
    for name, service in compose["services"].items():
        image = service.get("image", "")
        assert ":" in image and not image.endswith((":latest", ":")), f"{name}: pin the image version ({image!r})"


def test_published_ports_bind_loopback_only(compose) -> None:
    for name, service in compose["services"].items():
        assert service.get("network_mode") != "host", f"{name}: host networking publishes every port"
        for port in service.get("ports", []):
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port} must set host_ip 127.0.0.1"
                continue
            spec = str(port).split("/")[0]
            assert spec.startswith("127.0.0.1:") and spec.count(":") == 2, (
                f"{name}: port {port!r} must read 127.0.0.1:HOST:CONTAINER (a bare port binds every interface)"
            )
    assert "127.0.0.1:8765:8765" in compose["services"]["query-proxy"]["ports"]
    assert not compose["services"]["query-server"].get("ports"), "replicas publish no port of their own: the proxy does"


def test_every_service_has_a_healthcheck_and_restarts_unless_stopped(compose) -> None:
    for name, service in compose["services"].items():
        assert service.get("restart") == "unless-stopped", f"{name}: restart must be unless-stopped"
        check = service.get("healthcheck") or {}
        assert not check.get("disable"), f"{name}: health check disabled"
        test = check.get("test")
        assert test and (isinstance(test, str) or test[0] in {"CMD", "CMD-SHELL"}), f"{name}: no health check"
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert condition["condition"] == "service_healthy", f"{name} waits for {dependency} to be healthy"


def test_named_volumes_persist_the_stores(compose) -> None:
    declared = compose.get("volumes") or {}
    for volume, (service, target) in REQUIRED_VOLUMES.items():
        assert volume in declared, f"volume {volume} missing"
        assert (declared[volume] or {}).get("name") == volume, f"{volume}: set name: {volume} (no project prefix)"
        assert (volume, target) in _volume_mounts(compose["services"][service]), f"{service} must mount {volume} at {target}"
    used = set()
    for name, service in compose["services"].items():
        for source, _target in _volume_mounts(service):
            if source.startswith((".", "/")):
                assert (ROOT / source).exists() or Path(source).exists(), f"{name}: bind source {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == set(declared), f"declared but unused volumes: {set(declared) - used}"


def test_memory_limits_meet_the_requirements(compose) -> None:
    for name, service in compose["services"].items():
        limit = _memory_limit(service)
        assert limit, f"{name}: no memory limit (deploy.resources.limits.memory or mem_limit)"
        _parse_bytes(limit)
    for name, (_minimum, recommended) in MEMORY_FLOORS.items():
        assert _parse_bytes(_memory_limit(compose["services"][name])) >= recommended, f"{name}: below the recommended limit"
    # and each is configurable (REQ-MEM-SCAL-004)
    for name, service in _compose_raw()["services"].items():
        assert "${" in str(_memory_limit(service)), f"{name}: make the memory limit a variable"


def test_containers_are_hardened(compose) -> None:
    for name, service in compose["services"].items():
        assert service.get("cap_drop") == ["ALL"], f"{name}: cap_drop: [ALL]"
        assert "no-new-privileges:true" in service.get("security_opt", []), f"{name}: no-new-privileges"
        assert not service.get("privileged"), f"{name}: privileged"
        assert not service.get("cap_add"), f"{name}: adds capabilities"
        user = str(service.get("user", ""))
        assert user.split(":")[0] not in {"root", "0"}, f"{name}: runs as root"
    for name in CODEMEM_SERVICES:
        assert compose["services"][name].get("read_only") is True, f"{name}: read-only root filesystem"
    # third-party images run as their own non-root users
    assert compose["services"]["qdrant"]["image"].endswith("-unprivileged")
    assert compose["services"]["neo4j"].get("user") and compose["services"]["postgres"].get("user")


def test_no_secret_has_a_literal_value(compose) -> None:
    for name, service in _compose_raw()["services"].items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) if "=" in item else (item, None) for item in environment)
        for key, value in environment.items():
            if not SECRET_NAME.search(key) or value is None:
                continue
            refs = VAR_REF.findall(str(value))
            assert refs, f"{name}: {key} must come from the environment, not a literal"
            for _var, op_and_arg, arg in refs:
                assert not (op_and_arg.startswith(("-", ":-")) and arg), f"{name}: {key} defaults to a literal"
        checks = json.dumps(service.get("healthcheck", {}))
        assert not any(SECRET_NAME.search(var) for var, *_ in VAR_REF.findall(checks)), (
            f"{name}: a secret in the health check command shows in `docker inspect`"
        )
    for var, (_active, value) in _env_example().items():
        if SECRET_NAME.search(var):
            assert value == "", f".env.example: {var} must be empty"
    for stage in _dockerfile_stages():
        for keyword, args in stage:
            if keyword in {"ENV", "ARG"}:
                assert not SECRET_NAME.search(args), f"Dockerfile: no secret in {keyword} {args}"


def test_every_compose_variable_is_documented() -> None:
    documented = set(_env_example())
    used = {match.group(1) for match in VAR_REF.finditer(COMPOSE.read_text(encoding="utf-8"))}
    assert used, "no ${VAR} found: the pattern is broken"
    assert used <= documented, f"document in .env.example: {sorted(used - documented)}"


def test_required_variables_agree_between_compose_and_env_example(tmp_path: Path) -> None:
    """What .env.example marks REQUIRED (an active empty line) is what compose refuses to start without."""
    required_in_example = {name for name, (active, value) in _env_example().items() if active and value == ""}
    required_in_compose = {
        m.group(1) for m in VAR_REF.finditer(COMPOSE.read_text(encoding="utf-8")) if (m.group(2) or "").startswith(":?")
    }
    assert required_in_example == required_in_compose
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    for name in required_in_example:
        assert re.search(rf"# REQUIRED\..*\n(#.*\n)*{name}=\n", text), f"mark {name} REQUIRED in .env.example"
    env = _filled_env(tmp_path)
    _interpolate(_compose_raw(), env)  # complete: no error
    for name in required_in_compose:
        with pytest.raises(KeyError, match=name):
            _interpolate(_compose_raw(), {**env, name: ""})


def test_every_setting_is_documented_in_env_example() -> None:
    from pydantic import AliasChoices

    from resources.settings import Settings

    documented = set(_env_example())
    prefix = Settings.model_config.get("env_prefix", "")
    missing = []
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names = list(alias.choices) if isinstance(alias, AliasChoices) else [prefix + field_name.upper()]
        if not documented & set(names):
            missing.append(" / ".join(str(n) for n in names))
    assert not missing, f"document in .env.example: {missing}"
    assert {"QDRANT_HOST", "NEO4J_URI", "NEO4J_PASSWORD", "VOYAGE_API_KEY", "DUPLICATE_THRESHOLD"} <= documented
    # the seed's name of the API key is mentioned (codemem reads it as an alias of CODEMEM_API_TOKEN)
    assert "MEMORY_SERVICE_API_KEY" in ENV_EXAMPLE.read_text(encoding="utf-8")


def test_codemem_containers_use_the_servers_and_their_own_state_volumes(compose) -> None:
    """Every store is a server (PostgreSQL, Qdrant, Neo4j: ``Settings.shared_stores``), so no
    process owns the project: the query servers and the Dagster code server share no volume and no
    network namespace (issue 23)."""
    from resources.settings import Settings

    mounts = {}
    for name in ("query-server", "dagster-code"):
        env = compose["services"][name]["environment"]
        assert env["CODEMEM_QDRANT_URL"] == "http://qdrant:6333"
        assert env["CODEMEM_NEO4J_URI"] == "bolt://neo4j:7687"
        assert env["CODEMEM_DATABASE_URL"].startswith("postgresql://") and env["CODEMEM_PROJECT_ID"]
        assert Settings(qdrant_url=env["CODEMEM_QDRANT_URL"], neo4j_uri=env["CODEMEM_NEO4J_URI"],
                        database_url=env["CODEMEM_DATABASE_URL"]).shared_stores
        assert env["CODEMEM_STATE_DIR"] == "/var/lib/codemem"
        assert env["CODEMEM_GLOBAL_DIR"].startswith("/var/lib/codemem/")  # not under the read-only $HOME
        assert "network_mode" not in compose["services"][name]
        mounts[name] = {source for source, _ in _volume_mounts(compose["services"][name]) if not source.startswith((".", "/"))}
    assert ("memory-service-cache", "/var/lib/codemem") in _volume_mounts(compose["services"]["query-server"])
    assert ("memory-worker-state", "/var/lib/codemem") in _volume_mounts(compose["services"]["dagster-code"])
    assert not mounts["query-server"] & mounts["dagster-code"], "no shared state volume"
    command = compose["services"]["query-server"]["command"]
    assert command[:2] == ["codemem", "serve"] and command[command.index("--host") + 1] == "0.0.0.0"
    assert "CODEMEM_API_TOKEN" in compose["services"]["query-server"]["environment"]


# ----------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_builds_a_non_root_image_without_build_tools() -> None:
    stages = _dockerfile_stages()
    final = stages[-1]
    args = dict(arg.split("=", 1) for keyword, arg in stages[0] if keyword == "ARG" and "=" in arg)
    base = final[0][1].split(" AS ")[0].strip()
    base = args.get(base.strip("${}"), base)
    assert base.startswith("python:3.12-slim"), base
    users = [arg for keyword, arg in final if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}, "the final stage must end on a non-root USER"
    final_text = " ".join(arg for _keyword, arg in final)
    for tool in ("build-essential", "gcc", "g++", "make ", "cmake"):
        assert tool not in final_text, f"{tool} left in the runtime image"
    assert any(keyword == "HEALTHCHECK" and "/health" in arg for keyword, arg in final)
    build_text = " ".join(arg for stage in stages[:-1] for _keyword, arg in stage)
    assert "COPY pyproject.toml" in " ".join(f"{k} {a}" for stage in stages for k, a in stage)
    assert 'pip install ".[server]"' in build_text, "install codemem from its own pyproject with the server extra"
    assert any(keyword == "COPY" and arg.startswith("--from=") for keyword, arg in final)


def test_dockerignore_keeps_secrets_and_state_out_of_the_build_context() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()}
    assert {".env", ".venv", ".git", ".codemem"} <= ignored
    for needed in ("pyproject.toml", "README.md", "pipelines", "query_server", "resources"):
        assert needed not in ignored


def test_server_extra_pins_dagster_postgres_in_lockstep_with_dagster() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    server = project["optional-dependencies"]["server"]
    spec = next(s for s in server if s.startswith("dagster-postgres"))
    dagster = next(s for s in project["dependencies"] if re.match(r"dagster>=", s))
    # Dagster libraries are versioned 0.(minor+16) against dagster 1.minor (dagster 1.13 <-> 0.29).
    dagster_minor = int(re.search(r">=1\.(\d+)", dagster).group(1))
    assert int(re.search(r">=0\.(\d+)", spec).group(1)) == dagster_minor + 16, (spec, dagster)


# --------------------------------------------------------------------------------------- Dagster


def test_dagster_instance_uses_postgres_and_the_run_queue(tmp_path: Path, compose) -> None:
    config = yaml.safe_load((DAGSTER_DIR / "dagster.yaml").read_text(encoding="utf-8"))
    postgres = config["storage"]["postgres"]["postgres_db"]
    referenced = {value["env"] for value in postgres.values() if isinstance(value, dict)}
    assert {"DAGSTER_POSTGRES_USER", "DAGSTER_POSTGRES_PASSWORD", "DAGSTER_POSTGRES_DB"} <= referenced
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    for name in ("dagster-code", "dagster-webserver", "dagster-daemon"):
        service = compose["services"][name]
        assert referenced <= set(service["environment"]), f"{name} lacks {referenced - set(service['environment'])}"
        assert ("./deploy/dagster/dagster.yaml", f"{service['environment']['DAGSTER_HOME']}/dagster.yaml") in _volume_mounts(service)

    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(DAGSTER_DIR / "dagster.yaml", tmp_path / "dagster.yaml")
    validated, _instance_class = dagster_instance_config(str(tmp_path))  # raises on a schema error
    assert validated["storage"]["postgres"]


def test_dagster_workspace_points_to_the_code_server(compose) -> None:
    workspace = yaml.safe_load((DAGSTER_DIR / "workspace.yaml").read_text(encoding="utf-8"))
    (entry,) = workspace["load_from"]
    grpc = entry["grpc_server"]
    code = compose["services"]["dagster-code"]
    command = code["command"]
    assert command[:3] == ["dagster", "code-server", "start"]
    assert grpc["port"] == int(command[command.index("-p") + 1])
    assert grpc["location_name"] == command[command.index("--location-name") + 1]
    # the host name under which the code server is reachable: its own, or the service whose
    # network namespace it shares
    network_mode = code.get("network_mode", "")
    expected_host = network_mode.split(":", 1)[1] if network_mode.startswith("service:") else "dagster-code"
    assert grpc["host"] == expected_host
    module = command[command.index("-m") + 1]
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["dagster"]
    assert module == tool["module_name"]
    for name in ("dagster-webserver", "dagster-daemon"):
        service = compose["services"][name]
        assert ("./deploy/dagster/workspace.yaml", "/opt/dagster/workspace.yaml") in _volume_mounts(service)
        assert "/opt/dagster/workspace.yaml" in service["command"]

    from dagster._core.workspace.config_schema import ensure_workspace_config

    ensure_workspace_config(workspace, str(DAGSTER_DIR / "workspace.yaml"))  # raises on a schema error


def test_dagster_postgres_names_the_psycopg2_driver() -> None:
    """dagster-postgres installs psycopg2; SQLAlchemy >= 2.1 maps a bare postgresql:// URL to
    psycopg 3 (seen here: ModuleNotFoundError: No module named 'psycopg')."""
    config = yaml.safe_load((DAGSTER_DIR / "dagster.yaml").read_text(encoding="utf-8"))
    assert config["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    helm = yaml.safe_load((DAGSTER_DIR / "helm-values.yaml").read_text(encoding="utf-8"))
    assert helm["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"


def test_helm_values_mirror_the_compose_layout(compose) -> None:
    """The Kubernetes example keeps what docker-compose.yml relies on: the code location's module,
    the query server next to the code server (one pod), one queued run at a time, runs in that
    pod, no secret in the file."""
    helm = yaml.safe_load((DAGSTER_DIR / "helm-values.yaml").read_text(encoding="utf-8"))
    (deployment,) = helm["dagster-user-deployments"]["deployments"]
    args = deployment["codeServerArgs"]
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["dagster"]
    assert args[args.index("-m") + 1] == tool["module_name"]
    (sidecar,) = deployment["sidecarContainers"]
    serve = compose["services"]["query-server"]["command"]
    assert sidecar["command"][:2] == serve[:2] == ["codemem", "serve"]
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} == {m["mountPath"] for m in deployment["volumeMounts"]}
    coordinator = helm["dagsterDaemon"]["runCoordinator"]
    dagster_yaml = yaml.safe_load((DAGSTER_DIR / "dagster.yaml").read_text(encoding="utf-8"))
    assert coordinator["type"] == dagster_yaml["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert coordinator["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] == dagster_yaml["run_coordinator"]["config"]["max_concurrent_runs"]
    launcher = helm["runLauncher"]["config"]["customRunLauncher"]
    assert (launcher["module"], launcher["class"]) == (dagster_yaml["run_launcher"]["module"], dagster_yaml["run_launcher"]["class"])
    assert "postgresqlPassword" not in helm["postgresql"] and helm["generatePostgresqlPasswordSecret"] is False
    for container in (deployment, sidecar):
        assert not any(SECRET_NAME.search(e["name"]) and "value" in e for e in container["env"]), "secrets come from envSecrets"
        assert container["securityContext"]["runAsNonRoot"] is True


# ------------------------------------------------------------------------ docker compose config


PROJECT_COMPOSE_PLUGIN = ROOT / ".tools" / "docker" / "cli-plugins" / "docker-compose"


def _compose_command() -> tuple[list[str], dict[str, str]]:
    """How to run Compose v2 here: the docker CLI's own plugin, else the one that
    scripts/install-compose.sh puts in .tools/ (through the docker CLI when there is one)."""
    env = dict(os.environ)
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"], env
    if PROJECT_COMPOSE_PLUGIN.is_file():
        if docker:
            env["DOCKER_CONFIG"] = str(PROJECT_COMPOSE_PLUGIN.parents[1])
            return [docker, "compose"], env
        return [str(PROJECT_COMPOSE_PLUGIN)], env
    reason = (
        "the Compose v2 CLI is not installed here: run scripts/install-compose.sh "
        "(scripts/test.sh does; it failed or could not reach the Debian mirror)"
    )
    if os.environ.get("CODEMEM_REQUIRE_COMPOSE") == "1":
        pytest.fail(reason + "; CODEMEM_REQUIRE_COMPOSE=1 (CI) makes this a failure")
    pytest.skip(reason)


def _compose_config(compose_file: Path, env_file: Path) -> subprocess.CompletedProcess[str]:
    command, env = _compose_command()
    return subprocess.run(
        [*command, "--project-directory", str(ROOT), "--env-file", str(env_file), "-f", str(compose_file),
         "config", "--quiet"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    env_file = tmp_path / "test.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in _filled_env(tmp_path).items()), encoding="utf-8")
    done = _compose_config(COMPOSE, env_file)
    assert done.returncode == 0, f"docker compose config rejects docker-compose.yml:\n{done.stderr}"


def test_docker_compose_config_rejects_what_breaks_the_file(tmp_path: Path) -> None:
    """The same command fails on a misspelt key and on a missing required variable, so the
    check above is Compose validating the file, not a command that accepts anything."""
    env_file = tmp_path / "test.env"
    filled = _filled_env(tmp_path)
    env_file.write_text("".join(f"{k}={v}\n" for k, v in filled.items()), encoding="utf-8")
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text(encoding="utf-8").replace("healthcheck:", "healthchek:", 1), encoding="utf-8")
    done = _compose_config(broken, env_file)
    assert done.returncode != 0 and "healthchek" in done.stderr, done.stderr
    required = next(name for name, (active, value) in _env_example().items() if active and not value and name != "PROJECT_PATH")
    env_file.write_text("".join(f"{k}={v}\n" for k, v in filled.items() if k != required), encoding="utf-8")
    done = _compose_config(COMPOSE, env_file)
    assert done.returncode != 0 and required in done.stderr, done.stderr


# ---------------------------------------------------------------- Qdrant distributed (sharding)


def _spy_store(**kwargs: Any):
    """A ServerVectorStore whose client is qdrant-client's local mode, wrapped to record calls
    (local mode accepts the sharding arguments and ignores them); nothing touches the network."""
    from qdrant_client import QdrantClient

    from resources.vectors.server import ServerVectorStore

    spy = mock.Mock(wraps=QdrantClient(":memory:"))
    with mock.patch("qdrant_client.QdrantClient", return_value=spy):
        return ServerVectorStore("http://qdrant.invalid:6333", None, 6333, None, **kwargs)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_new_collections_get_the_configured_shards_and_replicas() -> None:
    store = _spy_store(shard_number=3, replication_factor=2)
    store.ensure_collection("code_sharded", 384)
    kwargs = store._client.create_collection.call_args.kwargs
    assert (kwargs["shard_number"], kwargs["replication_factor"]) == (3, 2)
    store.ensure_collection("code_sharded", 384)  # an existing collection is left as it is
    assert store._client.create_collection.call_count == 1


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_without_sharding_settings_qdrant_keeps_its_defaults() -> None:
    store = _spy_store()
    store.ensure_collection("code_plain", 384)
    kwargs = store._client.create_collection.call_args.kwargs
    assert kwargs["shard_number"] is None and kwargs["replication_factor"] is None


def test_sharding_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from resources.settings import Settings
    from resources.vectors.factory import create_vector_store
    from resources.vectors.server import ServerVectorStore

    monkeypatch.setenv("CODEMEM_QDRANT_SHARD_NUMBER", "4")
    monkeypatch.setenv("CODEMEM_QDRANT_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("QDRANT_URL", "http://qdrant.invalid:6333")
    with mock.patch("qdrant_client.QdrantClient") as client:
        store = create_vector_store(Settings(project_root=tmp_path))
    try:
        assert isinstance(store, ServerVectorStore)
        assert client.call_args.kwargs["url"] == "http://qdrant.invalid:6333"
        assert (store.shard_number, store.replication_factor) == (4, 2)
    finally:
        store.close()
    monkeypatch.setenv("CODEMEM_QDRANT_SHARD_NUMBER", "0")
    with pytest.raises(ValueError):
        Settings(project_root=tmp_path)


def test_query_server_replicas_sit_behind_the_proxy(compose) -> None:
    """``deploy.replicas`` is a variable, each replica exposes its port to the proxy only, and the
    proxy's configuration names that service and port, streams responses and re-reads Docker's DNS."""
    raw = _compose_raw()["services"]["query-server"]
    assert raw["deploy"]["replicas"] == "${QUERY_SERVER_REPLICAS:-1}"
    server = compose["services"]["query-server"]
    port = server["command"][server["command"].index("--port") + 1]
    assert [str(p) for p in server["expose"]] == [port]
    proxy = compose["services"]["query-proxy"]
    assert proxy["read_only"] is True and proxy["depends_on"]["query-server"]["condition"] == "service_healthy"
    (config_source,) = [source for source, target in _volume_mounts(proxy) if target == "/etc/nginx/nginx.conf"]
    config = (ROOT / config_source).read_text(encoding="utf-8")
    assert f"http://query-server:{port}" in config and "resolver 127.0.0.11" in config
    assert "proxy_buffering off" in config and "listen 8765" in config
    assert "non_idempotent" not in config, "a POST that reached a replica must not be sent to another"
    assert "/proxy-health" in " ".join(proxy["healthcheck"]["test"]) and "location = /proxy-health" in config
