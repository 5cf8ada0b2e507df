#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""s3-fault-proxy: an HTTP proxy on loopback between dstage and the S3 server
of the tests, that injects the faults object stores show.

  s3-fault-proxy.py UPSTREAM_PORT PORTFILE MODE EVERY [MAX]

MODE for the GETs that carry a body (listings and objects):
  503    answer 503 SlowDown instead of forwarding
  cut    send the headers and half of the body, then close the connection
  short  send half of the body with a Content-Length that says so (a
         complete-looking but truncated answer: only lengths can tell)
  region answer every request as S3 does for a bucket of another region
         (301 PermanentRedirect, x-amz-bucket-region: eu-west-1)
  none   forward everything
Hostile modes (a store that never ends), for the requests whose
"METHOD PATH?QUERY" matches the regular expression $S3_PROXY_MATCH (default:
every GET):
  looptoken  listings: the first page as the server gives it, but truncated
             with the continuation token "same-token"; every later page is
             empty, truncated, with that same token again
  loopkeys   listings: the server's page again and again, truncated, each
             time with a new continuation token
  trickle    the answer's headers, then its body 2 bytes every 0.25 s
  slow       the body at a steady $S3_PROXY_RATE bytes/s (default 262144)
  hold       accept the request and answer nothing for 10 minutes
EVERY: the fault hits every EVERY-th such GET (1: all of them); MAX: at most
that many faults (0 or absent: no limit).  Every other request is forwarded
as it is.  With $S3_PROXY_LOG_ALL set, every request is logged on stderr
("request METHOD PATH").

With S3_PROXY_SECRET set, the proxy also checks every request's AWS
Signature V4 (Authorization header) as AWS does, from the request it
received, with that secret: a mismatch is answered 403
SignatureDoesNotMatch (s3rver itself checks only the access key id).  The port the proxy listens on is written to PORTFILE; each fault
is counted on stderr ("fault N").
"""
import hashlib
import hmac
import http.client
import os
import re
import time
import urllib.parse
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
count = {"gets": 0, "faults": 0, "tokens": 0}
HOSTILE = ("looptoken", "loopkeys", "trickle", "slow", "hold")
MATCH = re.compile(os.environ.get("S3_PROXY_MATCH") or "^GET ")
RATE = int(os.environ.get("S3_PROXY_RATE") or 262144)

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
       "upgrade"}


SECRET = os.environ.get("S3_PROXY_SECRET")


def enc(v):
    return urllib.parse.quote(v, safe="-_.~")


def sigv4_ok(method, path, headers, body):
    """Recompute the request's SigV4 signature; True when it matches."""
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    f = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    ak, date, region, service, term = f["Credential"].split("/")
    signed = f["SignedHeaders"].split(";")
    u = urllib.parse.urlsplit(path)
    q = []
    for part in u.query.split("&") if u.query else []:
        k, _, v = part.partition("=")
        q.append((enc(urllib.parse.unquote(k)), enc(urllib.parse.unquote(v))))
    canon_q = "&".join("%s=%s" % kv for kv in sorted(q))
    low = {}
    for k, v in headers.items():
        low.setdefault(k.lower(), []).append(" ".join(v.strip().split()))
    canon_h = "".join("%s:%s\n" % (h, ",".join(low.get(h, [""]))) for h in signed)
    payload = headers.get("x-amz-content-sha256") or hashlib.sha256(body or b"").hexdigest()
    creq = "\n".join([method, u.path or "/", canon_q, canon_h, ";".join(signed), payload])
    scope = "/".join([date, region, service, term])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + SECRET).encode()
    for m in (date, region, service, term):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if want != f["Signature"]:
        sys.stderr.write("sigv4 mismatch %s %s\n%s\n" % (method, path, creq))
        return False
    return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def fault_now(self):
        if MODE in HOSTILE:
            if not MATCH.search("%s %s" % (self.command, self.path)):
                return False
        elif MODE == "none" or self.command != "GET":
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
        if os.environ.get("S3_PROXY_LOG_ALL"):
            sys.stderr.write("request %s %s\n" % (self.command, self.path))
            sys.stderr.flush()
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if SECRET is not None and not sigv4_ok(self.command, self.path, self.headers, body):
            doc = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch'
                   b'</Code><Message>The request signature we calculated does not match the '
                   b'signature you provided.</Message></Error>')
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)
            return
        if MODE == "region":
            doc = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PermanentRedirect</Code>'
                   b'<Message>The bucket you are attempting to access must be addressed using '
                   b'the specified endpoint.</Message></Error>')
            self.send_response(301)
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)
            return
        fault = self.fault_now()
        if fault and MODE == "hold":
            time.sleep(600)
            self.close_connection = True
            return
        path = self.path
        if fault and MODE in ("looptoken", "loopkeys") and "list-type=2" in path:
            u = urllib.parse.urlsplit(path)
            q = [kv for kv in u.query.split("&") if not kv.startswith("continuation-token=")]
            again = len(q) != len(u.query.split("&"))
            path = urllib.parse.urlunsplit(("", "", u.path, "&".join(q), ""))
        elif fault and MODE in ("looptoken", "loopkeys"):
            fault = False
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
        c.request(self.command, path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        c.close()
        if fault and MODE in ("looptoken", "loopkeys") and r.status == 200:
            with lock:
                count["tokens"] += 1
                tok = "same-token" if MODE == "looptoken" else "token-%d" % count["tokens"]
            if MODE == "looptoken" and again:
                data = re.sub(rb"<Contents>.*?</Contents>", b"", data, flags=re.S)
            data = re.sub(rb"<IsTruncated>[a-z]*</IsTruncated>", b"", data)
            data = re.sub(rb"<NextContinuationToken>.*?</NextContinuationToken>", b"", data)
            data = data.replace(b"</ListBucketResult>", b"<IsTruncated>true</IsTruncated>"
                                b"<NextContinuationToken>" + tok.encode() +
                                b"</NextContinuationToken></ListBucketResult>")
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
        if fault and MODE in ("trickle", "slow") and self.command != "HEAD":
            step, pause = (2, 0.25) if MODE == "trickle" else (max(1, RATE // 20), 0.05)
            try:
                for i in range(0, len(data), step):
                    self.wfile.write(data[i:i + step])
                    self.wfile.flush()
                    time.sleep(pause)
            except OSError:
                self.close_connection = True
            return
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


s = Server(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % s.server_address[1])
os.rename(PORTFILE + ".tmp", PORTFILE)
s.serve_forever()
