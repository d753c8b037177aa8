#!/usr/bin/env python3
"""delayproxy.py: a TCP proxy of the tests' own that makes a loopback
server look far away: every byte waits RTT/2 on its way in each direction,
and a new connection's first bytes wait one more round trip more (the
handshake a real link costs), as over a link with RTT round trips.  For
the benchmarks (tests/bench/bench_repo_rtt.py).

    with DelayProxy(upstream_port, rtt=0.020) as p:
        p.url   # http://127.0.0.1:PORT, the upstream seen RTT away

Run as a script (python3 delayproxy.py UPSTREAM_PORT RTT_MS [HOST]) it prints
its port on a line and proxies until killed; DelayProxy starts it so, in
its own process, so that the server it fronts (often in the same Python
process) does not slow it.  Order is kept per direction; a side that
closes closes the other after the same delay.
"""
import asyncio
import os
import subprocess
import sys

class _Side(asyncio.Protocol):
    """One end of a proxied connection: what it receives goes to the
    other end's transport half a round trip later (never before the
    handshake's round trip is over), in order."""

    def __init__(self, half, start):
        self.half, self.start, self.last = half, start, 0.0
        self.peer = None        # the other _Side, once connected
        self.transport = None
        self.held = []          # (what, data) due before the peer was up

    def connection_made(self, transport):
        self.transport = transport

    def _later(self, what, data=None):
        loop = asyncio.get_running_loop()
        # strictly later than the last: timers due at the same moment
        # may run in any order
        due = max(loop.time(), self.start) + self.half
        self.last = due = max(due, self.last + 1e-6)
        loop.call_at(due, self._deliver, what, data)

    def _deliver(self, what, data):
        if self.peer is None or self.peer.transport is None:
            self.held.append((what, data))
            return
        t = self.peer.transport
        if t.is_closing():
            return
        if what == "data":
            t.write(data)
        elif t.can_write_eof():
            t.write_eof()
        else:
            t.close()

    def flush(self):
        held, self.held = self.held, []
        for what, data in held:
            self._deliver(what, data)

    def data_received(self, data):
        self._later("data", data)

    def eof_received(self):
        self._later("eof")
        return True             # half-close: the answer may still come

    def connection_lost(self, exc):
        loop = asyncio.get_running_loop()
        # the other side closes once what is on its way has arrived
        loop.call_at(max(self.last, loop.time()) + self.half + 1e-6,
                     self._close_peer)

    def _close_peer(self):
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


async def _serve(host, upstream, half):
    loop = asyncio.get_running_loop()

    def accepted():
        # the handshake: one round trip before the first byte goes on
        down = _Side(half, loop.time() + 2 * half)

        async def connect():
            try:
                _, up = await loop.create_connection(
                    lambda: _Side(half, down.start), host, upstream)
            except OSError:
                down.transport.close()
                return
            down.peer, up.peer = up, down
            down.flush()

        loop.create_task(connect())
        return down

    server = await loop.create_server(accepted, "127.0.0.1", 0,
                                      backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class DelayProxy:
    """The proxy in its own process: .port, .url; stop() ends it."""

    def __init__(self, upstream_port, rtt, host="127.0.0.1"):
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(upstream_port),
             str(rtt * 1000), host], stdout=subprocess.PIPE)
        self.port = int(self.p.stdout.readline())
        self.url = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.p.kill()
        self.p.wait()
        self.p.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1",
                       int(sys.argv[1]), float(sys.argv[2]) / 2000))
