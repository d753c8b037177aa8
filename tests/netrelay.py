#!/usr/bin/env python3
"""netrelay.py LISTEN=UPSTREAM...: a plain TCP relay of the tests' own,
for nodes in network namespaces of their own (tests/netns.py).  Each
argument is HOST:PORT=UPHOST:UPPORT: connections to HOST:PORT (port 0:
any) are relayed to UPHOST:UPPORT, bytes as they come, each direction
half-closed as its side closes.  It prints the ports it listens on, on
one line, in the order given, then relays until killed.  Run in a node's
namespace it listens where the servers are in the host's (127.0.0.1:P),
so that the URLs the tests hand out are the same in both; run in the
host's it listens on the bridge's address and reaches the servers on
loopback.
"""
import asyncio
import sys


async def _pump(reader, writer):
    try:
        while True:
            data = await reader.read(1 << 20)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


def _handler(uphost, upport):
    async def handle(reader, writer):
        try:
            ur, uw = await asyncio.open_connection(uphost, upport)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pump(reader, uw), _pump(ur, writer))
        uw.close()
        writer.close()
    return handle


async def _main(pairs):
    servers, ports = [], []
    for arg in pairs:
        listen, up = arg.split("=")
        host, port = listen.rsplit(":", 1)
        uphost, upport = up.rsplit(":", 1)
        s = await asyncio.start_server(_handler(uphost, int(upport)), host,
                                       int(port), backlog=1024)
        servers.append(s)
        ports.append(str(s.sockets[0].getsockname()[1]))
    print(" ".join(ports), flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
