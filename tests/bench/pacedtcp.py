"""pacedtcp.py UPSTREAM_PORT RATE: a TCP relay on 127.0.0.1 in front of a
server whose answers to each connection go at most RATE bytes per
second, as an object store caps a connection (for a server that cannot
pace itself: the tests' Swift).  The cap is the kernel's,
SO_MAX_PACING_RATE on each accepted socket, as tests/servers/pacedhttp.py does;
bytes are relayed unchanged (a signed request's Host names the relay,
which the client signed).  For
the benchmarks (bench_runai.py), as a process of its own (start(): a
relay in the benchmark's process would wait for the GIL that a reader
faulting in pages of a mount holds, while the mount waits for it).  It
prints its port on its first line."""
import socket
import subprocess
import sys
import threading

SO_MAX_PACING_RATE = 47


class Relay:
    def __init__(self, upstream_port, rate):
        self.up, self.rate = upstream_port, rate
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.open = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, self.rate)
            try:
                u = socket.create_connection(("127.0.0.1", self.up))
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.open += [c, u]
            threading.Thread(target=self._pump, args=(c, u),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c),
                             daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        try:
            while True:
                n = src.recv_into(buf)
                if not n:
                    break
                dst.sendall(view[:n])
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.sock.close()
        with self.lock:
            for s in self.open:
                s.close()
            self.open = []


def start(upstream_port, rate):
    """A relay process: (Popen, url)."""
    p = subprocess.Popen([sys.executable, __file__, str(upstream_port),
                          str(rate)], stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline())
    return p, "http://127.0.0.1:%d" % port


if __name__ == "__main__":
    r = Relay(int(sys.argv[1]), int(sys.argv[2]))
    print(r.port, flush=True)
    threading.Event().wait()
