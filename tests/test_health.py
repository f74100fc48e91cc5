"""The probes a load balancer asks, and a replica that takes no traffic before it can serve."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from helpers import wait_for, write
from mcp_clients import CALC, LIVENESS, command, environment, http_server, probe


def test_the_probes_answer_without_a_token_and_name_no_tool(tmp_path: Path) -> None:
    plugins = write(tmp_path / "plugins" / "calc.py", CALC).parent
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"a" * 32: {"session": "alice"}}))
    tokens.chmod(0o600)
    with http_server(plugins, "--tokens", str(tokens)) as served:
        assert probe(served.url, "/healthz") == (200, '{"status": "alive"}')
        assert probe(served.url, "/readyz") == (200, '{"status": "ready"}')
        assert probe(served.url, "/readyz", "HEAD") == (200, "")
        assert probe(served.url, "/mcp")[0] == 401  # the rest still wants a token


def test_a_replica_refuses_connections_until_its_plugins_are_loaded(tmp_path: Path) -> None:
    """A balancer sends a refused connection elsewhere; one accepted by a replica still
    importing a slow plugin would wait for it."""
    importing = tmp_path / "importing"
    slow = f"import pathlib, time\n\npathlib.Path({str(importing)!r}).touch()\ntime.sleep(3)\n"
    plugins = write(tmp_path / "plugins" / "slow.py", slow).parent
    with socket.socket() as probe_port:  # a free port, for a fixed address
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command(plugins, "--http", f"127.0.0.1:{port}"),
                                   stdout=sink, stderr=subprocess.STDOUT, env=environment())  # fmt: skip
    try:
        wait_for(importing.exists, LIVENESS, what="the plugin's import to start")
        assert "serving MCP" not in log.read_text()
        try:  # the address is bound by now (plugins load after that)
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            accepted = True
        except ConnectionRefusedError:
            accepted = False
        assert not accepted, "a connection was accepted while the plugins were loading"
        wait_for(lambda: "serving MCP" in log.read_text(), LIVENESS, what="the server to start")
        assert probe(f"http://127.0.0.1:{port}/mcp", "/readyz") == (200, '{"status": "ready"}')
    finally:
        process.terminate()
        process.wait(LIVENESS)
