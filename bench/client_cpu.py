"""The load generator's own cost: CPU per request of load.Http against aiohttp's client.

Both send the same ``sendMsg`` requests (32 in flight, keep-alive) to one node; the figure is
the client process's CPU time per request. It is why the generator uses its own lean client:
on two cores, every microsecond it spends is taken from the server under test.

    python bench/client_cpu.py --requests 8000
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp

from common import API, print_table, stack, write_result
from load import Http

IN_FLIGHT = 32
FORM = {"topic": "client-cpu", "msg": "x", "delayMillis": "3600000"}


async def lean(base: str, count: int) -> None:
    http = Http(base)

    async def worker() -> None:
        for _ in range(count // IN_FLIGHT):
            await http.call("sendMsg", **FORM)

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    await http.close()


async def with_aiohttp(base: str, count: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def worker() -> None:
            for _ in range(count // IN_FLIGHT):
                async with session.post(base + API + "sendMsg", data=FORM) as response:
                    await response.json(content_type=None)

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    figures: dict[str, list[float]] = {"load.Http": [], "aiohttp": []}
    with stack() as s:
        for _ in range(args.rounds):
            for name, fn in (("load.Http", lean), ("aiohttp", with_aiohttp)):
                cpu0 = time.process_time()
                asyncio.run(fn(s.base, args.requests))
                figures[name].append(round((time.process_time() - cpu0) / args.requests * 1e6, 1))
    print_table("load generator CPU per request (us), each round",
                [(name, " / ".join(map(str, values))) for name, values in figures.items()])
    write_result("client_cpu", figures, {"requests": args.requests, "rounds": args.rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
