"""What the ingest benchmarks share: a loopback aiohttp server in its own process, and the
reference that parses every answer in full (as without the parse memo)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from multiprocessing.queues import Queue

from aiohttp import web

from gpu_health.evaluator.ingest.cards import CardExtraction, parse_cards
from gpu_health.evaluator.ingest.parse_memo import ParseMemo

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def run_server(port_queue: Queue[int], routes: dict[str, Handler]) -> None:
    """Serve ``routes`` (GET) on 127.0.0.1 at a free port, put the port in ``port_queue``,
    and run until the process is terminated."""

    async def main() -> None:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port_queue.put(int(runner.addresses[0][1]))
        await asyncio.Event().wait()

    asyncio.run(main())


class FullParse(ParseMemo):
    """Every answer parsed in full, as without the memo (the same run's reference for it)."""

    def parse(self, key: str, text: str, *, sample_limit: int | None = None,
              max_cards: int | None = None) -> CardExtraction:
        return parse_cards(text, sample_limit=sample_limit, max_cards=max_cards)
