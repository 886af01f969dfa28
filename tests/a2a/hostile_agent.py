"""A hostile A2A agent for the tests: a raw JSON-RPC endpoint (no a2a-sdk request handler), so it can send
what a well-behaved server never would. ``--mode wrong-task-ids``: the stream's status updates name tasks
t0, t1, t2, then ``completed`` for task ``zzz`` (never a Task of its own).

    python tests/a2a/hostile_agent.py --port 9998 --mode wrong-task-ids
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import uvicorn
from a2a.types.a2a_pb2 import StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.a2a.a2a_test_server import card


def build_app(url: str, mode: str) -> Starlette:
    agent_card = MessageToDict(card(url))

    async def card_route(request: Request) -> JSONResponse:
        return JSONResponse(agent_card)

    async def rpc(request: Request) -> StreamingResponse:
        call = await request.json()

        async def events() -> AsyncIterator[bytes]:
            states = [("t0", "WORKING"), ("t1", "WORKING"), ("t2", "WORKING"), ("zzz", "COMPLETED")]
            for task_id, state in states:
                update = StreamResponse(
                    status_update=TaskStatusUpdateEvent(
                        task_id=task_id,
                        context_id="c0",
                        status=TaskStatus(state=TaskState.Value(f"TASK_STATE_{state}")),
                    )
                )
                body = {"jsonrpc": "2.0", "id": call.get("id"), "result": MessageToDict(update)}
                yield f"data: {json.dumps(body)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/.well-known/agent-card.json", card_route), Route("/", rpc, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=9998)
    parser.add_argument("--mode", choices=("wrong-task-ids",), default="wrong-task-ids")
    args = parser.parse_args()
    uvicorn.run(build_app(f"http://127.0.0.1:{args.port}/", args.mode), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
