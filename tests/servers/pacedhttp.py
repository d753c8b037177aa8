#!/usr/bin/env python3
"""pacedhttp.py ROOT PORT RATE [BUSY [STATS]]: a static file server on
127.0.0.1 whose every connection sends at most RATE bytes per second, as
object stores cap a connection.  With BUSY (> 0), every BUSY-th GET is
answered 503 Slow Down, as S3 does when asked too fast; with STATS, the
most requests it has answered at once is kept in that file.  For test_prefetch.py and the benchmarks
(tests/bench/bench_remote.py, bench_prefetch.py).

The cap is the kernel's: SO_MAX_PACING_RATE on each accepted socket (TCP
paces itself, no qdisc needed), and the bytes go with sendfile(), so the
server costs almost no CPU.  nginx's limit_rate cannot stand in: it lets
the first second's worth of every request through unthrottled, so a
4 MiB range request is not capped at all.  GET with one Range
(bytes=A-B or A-), ETag and Last-Modified from the file's mtime and size,
416 past the end, 404; HTTP/1.1 keep-alive.
"""
import email.utils
import os
import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SO_MAX_PACING_RATE = 47


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."
    rate = 100 * 1000 * 1000

    def log_message(self, *a):
        pass

    busy = 0
    stats = None
    lock = threading.Lock()
    count = [0, 0, 0]           # GETs, answering now, most at once

    def do_GET(self):
        with self.lock:
            self.count[0] += 1
            n = self.count[0]
            self.count[1] += 1
            if self.count[1] > self.count[2]:
                self.count[2] = self.count[1]
                if self.stats:
                    with open(self.stats, "w") as f:
                        f.write("%d\n" % self.count[2])
        try:
            if self.busy and n % self.busy == 0:
                self.send_response(503, "Slow Down")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.get()
        finally:
            with self.lock:
                self.count[1] -= 1

    def get(self):
        self.connection.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE,
                                   self.rate)
        path = os.path.normpath(os.path.join(
            self.root, self.path.split("?")[0].lstrip("/")))
        if not path.startswith(self.root) or not os.path.isfile(path):
            self.send_error(404)
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            size = st.st_size
            first, last, code = 0, size - 1, 200
            m = re.fullmatch(r"bytes=(\d+)-(\d*)",
                             self.headers.get("Range", ""))
            if m:
                first = int(m.group(1))
                last = min(int(m.group(2)), size - 1) if m.group(2) \
                    else size - 1
                if first >= size or first > last:
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                code = 206
            self.send_response(code)
            if code == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" %
                                 (first, last, size))
            self.send_header("Content-Length", str(last - first + 1))
            self.send_header("ETag", '"%x-%x"' % (int(st.st_mtime), size))
            self.send_header("Last-Modified", email.utils.formatdate(
                st.st_mtime, usegmt=True))
            self.end_headers()
            self.wfile.flush()
            off, left = first, last - first + 1
            while left:
                try:
                    n = os.sendfile(self.connection.fileno(), fd, off,
                                    left)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client went away
                    return
                if n <= 0:
                    break
                off += n
                left -= n
        finally:
            os.close(fd)


def main():
    Handler.root = os.path.abspath(sys.argv[1])
    Handler.rate = int(sys.argv[3])
    Handler.busy = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    Handler.stats = sys.argv[5] if len(sys.argv) > 5 else None
    class Server(ThreadingHTTPServer):
        # a CDN takes a burst of connections at once: with the default
        # backlog of 5, the 6th of 8 simultaneous connects is dropped and
        # its SYN sent again a second later
        request_queue_size = 512

    srv = Server(("127.0.0.1", int(sys.argv[2])), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
