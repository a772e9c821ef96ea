"""Screenshots of ``codemem ui`` in headless Chromium: ``python -m bench.ui_screenshot [--out DIR]``.

Copies ``tests/fixtures/repos/python`` to a temporary project, runs one ``codemem index`` (one
Dagster run over the pending buckets), starts ``codemem ui`` on a free loopback port, edits one
file and waits for ``file_change_sensor``'s run (skip with ``--no-edit``), then drives a headless
Chromium over the DevTools protocol through the pages a person would look at and saves a PNG of
each under ``bench/results/ui/`` (gitignored). Needs a Chromium (``apt-get install chromium``)
and the ``websockets`` package. A tool for looking at the UI, not a test.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "ui"
CODEMEM = [sys.executable, "-c", "from query_server.cli import main; main(prog_name='codemem')"]
EDITED = "client/session.py"


def pages(bucket: str, sensor_run: str | None) -> list[tuple[str, str, str]]:
    """(file name, path, text that shows the page has its data)."""
    listed = [
        ("01-global-lineage", "/asset-groups", "code_index"),
        ("02-group-lineage", "/locations/codemem/asset-groups/code_index", "embedded_symbols"),
        ("02b-design-lineage", "/locations/codemem/asset-groups/design", "design_links"),
        ("03-catalog", "/assets", "graph_loaded"),
        ("04-graph_loaded-partitions", f"/assets/graph_loaded?view=partitions&partition={bucket}", "indexed_versions"),
        ("05-graph_loaded-checks", "/assets/graph_loaded?view=checks", "bucket_matches_disk"),
        ("06-normalized_graph-checks", "/assets/normalized_graph?view=checks", "stores_agree"),
        ("07-graph_loaded-overview", "/assets/graph_loaded", "indexed_versions"),
        ("08-sensor", "/locations/codemem/sensors/file_change_sensor", "file_change_sensor"),
        ("09-runs", "/runs", "codemem index"),
    ]
    if sensor_run:
        listed.append(("10-sensor-run", f"/runs/{sensor_run}", "RUN_SUCCESS"))
    return listed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str, timeout: float = 2) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read()


def wait_until(what: str, condition: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"no {what} after {timeout_s} s")


def graphql(port: int, query: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())["data"]


def sensor_run_done(port: int) -> tuple[str, str] | None:
    """(run id, status) of a finished run that file_change_sensor requested."""
    runs = graphql(port, "{ runsOrError(limit: 20) { ... on Runs { results { runId status tags { key value } } } } }")
    for run in runs["runsOrError"]["results"]:
        tags = {t["key"]: t["value"] for t in run["tags"]}
        if tags.get("codemem/trigger") == "file_change_sensor" and run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            return run["runId"], run["status"]
    return None


class DevTools:
    """The few DevTools protocol calls this needs, over one page target."""

    def __init__(self, debug_port: int) -> None:
        from websockets.sync.client import connect

        targets = wait_until("DevTools page target", lambda: [
            t for t in json.loads(get(f"http://127.0.0.1:{debug_port}/json/list")) if t["type"] == "page"
        ], 30)
        self._ws = connect(targets[0]["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024).__enter__()
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=60))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True).get("result", {}).get("value")

    def close(self) -> None:
        self._ws.__exit__(None, None, None)


DISMISS = """(() => {  // Dagster's first-visit dialogs ("Join the Dagster community" and the like)
  for (const b of document.querySelectorAll('button')) {
    if (['Skip', 'Dismiss', 'Got it'].includes(b.innerText.trim())) { b.click(); return true; }
  }
  return false;
})()"""


def shoot(tools: DevTools, base: str, out: Path, listed: list[tuple[str, str, str]], size: tuple[int, int]) -> list[Path]:
    tools.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1, mobile=False)
    saved = []
    for name, path, marker in listed:
        tools.call("Page.navigate", url=base + path)
        try:
            wait_until(f"{marker!r} on {path}", lambda m=marker: tools.evaluate(f"document.body && document.body.innerText.includes({json.dumps(m)})"), 45)
        except TimeoutError as exc:
            print(f"  {name}: {exc} (saved as it is)")
        tools.evaluate(DISMISS)
        time.sleep(2.5)  # layout, graph animation, live data
        tools.evaluate(DISMISS)
        png = out / f"{name}.png"
        png.write_bytes(base64.b64decode(tools.call("Page.captureScreenshot", format="png")["data"]))
        saved.append(png)
        print(f"  {png}  ({base}{path})")
    return saved


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if process.poll() is None:
        process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-edit", action="store_true", help="do not edit a file (no sensor run in the screenshots)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome"))
    parser.add_argument("--size", default="1600,1000", help="window size W,H")
    args = parser.parse_args(argv)
    if not args.chromium:
        print("no Chromium found: apt-get install chromium (or pass --chromium PATH)", file=sys.stderr)
        return 2
    from pipelines.buckets import bucket_of

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="codemem-ui-") as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(REPO / "tests" / "fixtures" / "repos" / "python", root)
        print(f"indexing {root} …")
        subprocess.run([*CODEMEM, "index", str(root), "--no-embed"], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = free_port()
        log = (Path(tmp) / "ui.log").open("wb")
        ui = subprocess.Popen([*CODEMEM, "ui", "--project", str(root), "--port", str(port)], cwd=REPO, env=env,
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        chrome: subprocess.Popen[bytes] | None = None
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until("codemem ui", lambda: get(base + "/server_info"), 90)
            print(f"codemem ui on {base}")
            sensor_run = None
            if not args.no_edit:
                session = root / EDITED
                session.write_text(session.read_text() + "\n\ndef added_while_the_ui_runs():\n    return 42\n")
                print(f"edited {EDITED}; waiting for file_change_sensor's run …")
                sensor_run, status = wait_until("sensor run", lambda: sensor_run_done(port), 240)
                print(f"  sensor run {sensor_run}: {status}")
            debug_port = free_port()
            chrome = subprocess.Popen(
                [args.chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--no-first-run", f"--user-data-dir={Path(tmp) / 'chrome'}", f"--window-size={args.size}",
                 f"--remote-debugging-port={debug_port}", "about:blank"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
            tools = DevTools(debug_port)
            try:
                width, height = (int(x) for x in args.size.split(","))
                shoot(tools, base, args.out, pages(bucket_of(EDITED), sensor_run), (width, height))
            finally:
                tools.close()
        finally:
            if chrome is not None:
                stop_group(chrome, timeout=10)
            stop_group(ui)
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
