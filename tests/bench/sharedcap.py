"""sharedcap.py UPSTREAM_HOST UPSTREAM_PORT RATE: a TCP relay on 127.0.0.1 whose
answers, all connections together, go at most RATE bytes per second: an
origin whose egress is shared and capped (a popular release on the Hub,
a bucket in another region), which a cap per connection (nginx's
limit_rate, tests/bench/pacedtcp.py) does not model: N nodes there get N
times the bandwidth.  Requests go up unchanged; answers come down in
chunks of at most 64 KiB, each waiting its turn of the one budget.  For
bench_mirror.py, as a process of its own (start()); it prints its port on
its first line."""
import socket
import subprocess
import sys
import threading
import time


class Budget:
    """RATE bytes a second for everyone: take(n) waits until n fit."""

    def __init__(self, rate):
        self.rate, self.next, self.lock = rate, time.monotonic(), \
            threading.Lock()

    def take(self, n):
        with self.lock:
            now = time.monotonic()
            self.next = max(self.next, now) + n / self.rate
            wait = self.next - n / self.rate - now
        if wait > 0:
            time.sleep(wait)


def pipe(src, dst, budget):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if budget:
                budget.take(len(b))
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(host, up, rate):
    budget = Budget(rate)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(256)
    print(ls.getsockname()[1], flush=True)
    while True:
        c, _ = ls.accept()
        try:
            u = socket.create_connection((host, up))
        except OSError:
            c.close()
            continue
        threading.Thread(target=pipe, args=(c, u, None),
                         daemon=True).start()
        threading.Thread(target=pipe, args=(u, c, budget),
                         daemon=True).start()


def start(host, up, rate):
    """The relay as a process: (Popen, port)."""
    p = subprocess.Popen([sys.executable, __file__, host, str(up),
                          str(rate)],
                         stdout=subprocess.PIPE)
    return p, int(p.stdout.readline())


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
