#!/usr/bin/python3
"""s3-fault-proxy: an HTTP proxy on loopback between dstage and the S3 server
of the tests, that injects the faults object stores show.

  s3-fault-proxy.py UPSTREAM_PORT PORTFILE MODE EVERY [MAX]

MODE for the GETs that carry a body (listings and objects):
  503    answer 503 SlowDown instead of forwarding
  cut    send the headers and half of the body, then close the connection
  short  send half of the body with a Content-Length that says so (a
         complete-looking but truncated answer: only lengths can tell)
  none   forward everything
EVERY: the fault hits every EVERY-th such GET (1: all of them); MAX: at most
that many faults (0 or absent: no limit).  Every other request is forwarded
as it is.  The port the proxy listens on is written to PORTFILE; each fault
is counted on stderr ("fault N").
"""
import http.client
import http.server
import socketserver
import sys
import threading

UP = int(sys.argv[1])
PORTFILE = sys.argv[2]
MODE = sys.argv[3]
EVERY = int(sys.argv[4])
MAX = int(sys.argv[5]) if len(sys.argv) > 5 else 0

lock = threading.Lock()
count = {"gets": 0, "faults": 0}

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
       "upgrade"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def fault_now(self):
        if MODE == "none" or self.command != "GET":
            return False
        with lock:
            count["gets"] += 1
            if count["gets"] % EVERY:
                return False
            if MAX and count["faults"] >= MAX:
                return False
            count["faults"] += 1
            sys.stderr.write("fault %d %s %s\n" % (count["faults"], MODE, self.path))
            sys.stderr.flush()
            return True

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        fault = self.fault_now()
        if fault and MODE == "503":
            doc = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                   b'<Message>Please reduce your request rate.</Message></Error>')
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)
            return
        c = http.client.HTTPConnection("127.0.0.1", UP, timeout=60)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        c.request(self.command, self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        c.close()
        cut = fault and len(data) >= 2
        if cut and MODE == "short":
            data = data[: len(data) // 2]
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() in HOP or k.lower() == "content-length":
                continue
            self.send_header(k, v)
        if cut and MODE == "cut":
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


s = Server(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % s.server_address[1])
import os  # noqa: E402

os.rename(PORTFILE + ".tmp", PORTFILE)
s.serve_forever()
