"""The deployment files people run: `compose.yaml`, `Dockerfile.cpu`, `Dockerfile.gpu`, and
docs/deploy.md, whose compose file must be the repository's.

No image is built here (no daemon in CI). What is checked instead: `docker compose config -q`
where the compose CLI exists (it needs no daemon); else the file's structure, with the skip
saying so. Every instance's command is parsed by the real CLI and its `STACKROUTE_*`
environment by the real settings, so a renamed flag or setting fails here, not at
`docker compose up`. Each Dockerfile's import check names modules that exist."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
DOCKERFILES = (ROOT / "Dockerfile.cpu", ROOT / "Dockerfile.gpu")
# The secrets compose.yaml requires (`${NAME:?…}`): any values do for validation.
SECRETS = {"STACKROUTE_API_KEY": "k" * 24, "UPSTREAM_API_KEY": "u" * 24,
           "POSTGRES_PASSWORD": "p" * 24}
INSTANCES = ("stackroute-a", "stackroute-b")


def _interpolate(text: str, environ: dict[str, str]) -> str:
    """Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?error}` (enough for this file)."""
    def value(match: re.Match[str]) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3) or ""
        if name in environ:
            return environ[name]
        if op == ":?":
            raise AssertionError(f"compose.yaml needs {name}: {rest}")
        return rest if op == ":-" else ""

    return re.sub(r"\$\{([A-Z_][A-Z0-9_]*)(?:(:[-?])([^}]*))?\}", value, text)


def compose_file(environ: dict[str, str] = SECRETS) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(_interpolate(COMPOSE.read_text(), environ))
    return loaded


def test_the_docs_compose_file_is_the_repositorys() -> None:
    doc = DEPLOY_DOC.read_text()
    found = re.search(r"<!-- compose\.yaml: begin[^>]*-->\n```yaml\n(.*?)```\n"
                      r"<!-- compose\.yaml: end -->", doc, re.DOTALL)
    assert found is not None, "docs/deploy.md must include compose.yaml between its markers"
    assert found.group(1) == COMPOSE.read_text(), (
        "docs/deploy.md's compose block differs from compose.yaml: copy the file into it")


def test_docker_compose_validates_the_file() -> None:
    command = _compose_cli()
    if command is None:
        pytest.skip("no compose CLI here (`docker compose version` and `docker-compose "
                    "version` both failed): the structure checks below stand in for it")
    result = subprocess.run([*command, "-f", str(COMPOSE), "config", "-q"], cwd=ROOT,
                            env={"PATH": "/usr/bin:/bin:/usr/local/bin", **SECRETS},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_the_compose_file_refuses_to_start_without_its_secrets() -> None:
    for name in SECRETS:
        with pytest.raises(AssertionError, match=name):
            compose_file({k: v for k, v in SECRETS.items() if k != name})


def test_the_compose_file_is_postgres_an_upstream_and_two_instances() -> None:
    spec = compose_file()
    services = spec["services"]
    assert set(services) == {"postgres", "upstream", *INSTANCES}
    assert services["postgres"]["image"].startswith("postgres:")
    assert "healthcheck" in services["postgres"]
    for name in ("upstream", *INSTANCES):
        assert services[name]["build"]["dockerfile"] == "Dockerfile.cpu"
        assert (ROOT / services[name]["build"]["dockerfile"]).is_file()
    declared_volumes = set(spec.get("volumes", {}))
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is missing"
            else:
                assert source in declared_volumes, f"{name} uses undeclared volume {source}"
    ports = [p for name in INSTANCES for p in services[name]["ports"]]
    assert all(p.startswith("127.0.0.1:") for p in ports)  # published on loopback only
    assert len(set(ports)) == len(ports)


@pytest.mark.parametrize("name", ["upstream", *INSTANCES])
def test_each_services_command_and_environment_start_a_server(name: str) -> None:
    """The command is parsed by the real CLI, the environment by the real settings, and the
    result is a server that binds 0.0.0.0 with a key; the instances reach the upstream with
    the remote engine and share PostgreSQL."""
    import typer
    from stackroute.server.cli import app
    from stackroute.server.settings import ENV_PREFIX, ServerSettings

    service = compose_file()["services"][name]
    command = service["command"]
    group: Any = typer.main.get_command(app)
    assert command[0] == "serve" and "serve" in group.commands
    # click parses the flags as `stackroute serve …` would: an unknown one raises here
    flags = group.commands["serve"].make_context("serve", list(command[1:])).params
    environ = {k.removeprefix(ENV_PREFIX).lower(): _env_value(v)
               for k, v in service["environment"].items()
               if k.startswith(ENV_PREFIX) and k != "STACKROUTE_REMOTE_API_KEY"}
    unknown = set(environ) - set(ServerSettings.model_fields)
    assert not unknown, f"{name}: environment names no setting: {unknown}"
    settings = ServerSettings(**{**environ, "host": flags["host"], "port": flags["port"],
                                 "engine": flags["engine"] or "transformers",
                                 "base_url": flags["base_url"]})
    assert settings.host == "0.0.0.0" and settings.api_key is not None
    if name in INSTANCES:
        assert settings.engine == "remote" and settings.base_url == "http://upstream:8000/v1"
        assert settings.db.startswith("postgresql://stackroute:") and "@postgres:5432/" in \
            settings.db
        assert service["environment"]["STACKROUTE_REMOTE_API_KEY"] == SECRETS["UPSTREAM_API_KEY"]
        assert [str(c) for c in flags["catalog"]] == ["/catalogs/bank.catalog.json"]
        assert (ROOT / "examples" / "bank.catalog.json").is_file()


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_each_image_runs_any_subcommand_and_checks_real_modules(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    (entrypoint,) = re.findall(r"^ENTRYPOINT (.+)$", text, re.MULTILINE)
    assert json.loads(entrypoint) == ["stackroute"]
    (cmd,) = re.findall(r"^CMD (.+)$", text, re.MULTILINE)
    assert json.loads(cmd)[:1] == ["serve"]
    (check,) = re.findall(r'python -c "import ([^;"]+)', text)
    for module in (m.strip() for m in check.split(",")):
        if module.startswith("stackroute."):
            assert importlib.util.find_spec(module) is not None, f"{dockerfile.name}: {module}"


def test_the_cpu_image_installs_the_cpu_torch_and_the_extras() -> None:
    text = DOCKERFILES[0].read_text()
    assert "https://download.pytorch.org/whl/cpu" in text
    assert "'.[cpu,postgres,otel]'" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^cpu = \["torch==[0-9.]+"\]', pyproject, re.MULTILINE), \
        "the cpu extra pins torch: the image relies on that pin"


def _env_value(value: Any) -> Any:
    """A `STACKROUTE_*` value as the settings read it (lists are JSON in the environment)."""
    text = str(value)
    return json.loads(text) if text.startswith("[") else text


def _compose_cli() -> list[str] | None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], capture_output=True, text=True,
                               timeout=30, check=False)
        if probe.returncode == 0:
            return command
    return None
