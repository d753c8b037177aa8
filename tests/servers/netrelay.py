#!/usr/bin/env python3
"""netrelay.py LISTEN=UPSTREAM...: a plain TCP relay of the tests' own,
for nodes in network namespaces of their own (tests/servers/netns.py).  Each
argument is HOST:PORT=UPHOST:UPPORT: connections to HOST:PORT (port 0:
any) are relayed to UPHOST:UPPORT, each direction by a thread that moves
the bytes with splice(2) through a pipe (they never enter Python), and
half-closed as its side closes.  It prints the ports it listens on, on
one line, in the order given, then relays until killed.  Run in a node's
namespace it listens where the servers are in the host's (127.0.0.1:P),
so that the URLs the tests hand out are the same in both; run in the
host's it listens on the bridge's address and reaches the servers on
loopback.
"""
import fcntl
import os
import socket
import sys
import threading

F_SETPIPE_SZ = 1031
CHUNK = 1 << 20


def _pump(src, dst):
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass
    try:
        while True:
            n = os.splice(src.fileno(), w, CHUNK)
            if not n:
                break
            while n:
                n -= os.splice(r, dst.fileno(), n)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        os.close(r)
        os.close(w)


def _conn(down, up_addr):
    try:
        up = socket.create_connection(up_addr)
    except OSError:
        down.close()
        return
    a = threading.Thread(target=_pump, args=(down, up), daemon=True)
    a.start()
    _pump(up, down)
    a.join()
    up.close()
    down.close()


def _serve(ls, up_addr):
    while True:
        c, _ = ls.accept()
        threading.Thread(target=_conn, args=(c, up_addr),
                         daemon=True).start()


def main(pairs):
    ports, servers = [], []
    for arg in pairs:
        listen, up = arg.split("=")
        host, port = listen.rsplit(":", 1)
        uphost, upport = up.rsplit(":", 1)
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, int(port)))
        ls.listen(1024)
        ports.append(str(ls.getsockname()[1]))
        servers.append((ls, (uphost, int(upport))))
    print(" ".join(ports), flush=True)
    th = [threading.Thread(target=_serve, args=s, daemon=True)
          for s in servers]
    for t in th:
        t.start()
    for t in th:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1:])
