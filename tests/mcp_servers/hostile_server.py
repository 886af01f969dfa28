"""A small MCP server over stdio that misbehaves on request: the faults real servers have shown.

It speaks JSON-RPC by hand (no SDK), so each fault is exactly what the flags say:

* ``--tools a_b_2,a.b,a_b``: the tool names it offers (each echoes its arguments);
* ``--noise``: writes lines that are not JSON-RPC on stdout (at start and before each answer);
* ``--orphan-on NAME``: a call to tool NAME starts a child that keeps stdout open, then the server exits
  (after writing ``orphan <pid>`` on stderr);
* ``--slow NAME``: a call to tool NAME is never answered (other requests still are);
* ``--big NAME``: tool NAME answers 336,000 characters.

Run it as ``python hostile_server.py [flags]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _noise(args: argparse.Namespace, text: str) -> None:
    if args.noise:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _answer(args: argparse.Namespace, name: str, arguments: dict[str, Any]) -> str:
    if name == args.orphan_on:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # inherits stdout
        sys.stderr.write(f"orphan {child.pid}\nserver exiting on purpose\n")
        sys.stderr.flush()
        os._exit(7)
    if name == args.big:
        return "".join(f"line {n:06d} of a big answer\n" for n in range(12_000))  # 300,000 characters
    return f"{name}: {json.dumps(arguments, sort_keys=True)}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", default="echo")
    parser.add_argument("--noise", action="store_true")
    parser.add_argument("--orphan-on")
    parser.add_argument("--slow")
    parser.add_argument("--big")
    args = parser.parse_args()
    names = [name for name in args.tools.split(",") if name]
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    _noise(args, "Starting hostile server v0 (this line is not JSON)")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        method, ident = request.get("method"), request["id"]
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": n, "description": f"Tool {n}.", "inputSchema": schema} for n in names]}
        elif method == "tools/call":
            params = request["params"]
            if params["name"] == args.slow:
                continue
            text = _answer(args, params["name"], params.get("arguments") or {})
            _noise(args, f"debug: answering {params['name']}")
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "ping":
            result = {}
        else:
            _send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        _send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
