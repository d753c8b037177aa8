"""rawhttp.py: an HTTP server on a raw socket, for answers no real server
gives and http.server would tidy up: the test writes the status line and
every header line itself (two Content-Range headers, a Content-Length that
disagrees, an ETag on the first answer only, no validator at all).

RawServer(answer) listens on 127.0.0.1 (port .port); answer(method, path,
headers) returns (status, [header lines], body), where headers is a dict
of the request's headers (lower-case names).  Every request is logged in
.requests as (method, path, headers).  Each answer closes its connection.
"""
import os
import re
import socket
import threading


class RawServer:
    def __init__(self, answer):
        self.answer = answer
        self.requests = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def _serve(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,),
                             daemon=True).start()

    def _one(self, c):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                b = c.recv(65536)
                if not b:
                    return
                data += b
            lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split(
                "\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            with self.lock:
                self.requests.append((method, path, headers))
            status, hdrs, body = self.answer(method, path, headers)
            out = "HTTP/1.1 %s\r\n" % status
            out += "".join(h + "\r\n" for h in hdrs)
            out += "Connection: close\r\n\r\n"
            c.sendall(out.encode("latin-1") + body)
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.stopped = True
        self.sock.close()


def file_range(path, headers):
    """The bytes of path a request's Range asks for: (first, last, size,
    body), or the whole file (first None)."""
    size = os.path.getsize(path)
    m = re.match(r"bytes=(\d+)-(\d+)$", headers.get("range", ""))
    with open(path, "rb") as f:
        if not m:
            return None, None, size, f.read()
        first, last = int(m.group(1)), min(int(m.group(2)), size - 1)
        f.seek(first)
        return first, last, size, f.read(last - first + 1)
