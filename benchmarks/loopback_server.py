"""An OpenAI-compatible chat endpoint on loopback whose latency the benchmark sets, for the benchmarks that time
the toolkit's own processes against a model server (cluster.py, index_shards.py). It runs in a process of its own
(a ``multiprocessing.Process`` target), so its threads do not share the client's interpreter."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_chats(reply, latency: float, ports, counts=None) -> None:
    """Answer each POSTed chat with ``reply(body)`` (the response's JSON) after ``latency`` seconds, counting the
    answers in ``counts`` (a ``multiprocessing.Value``) when given; puts the port on ``ports``, then serves."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            raw = json.dumps(reply(body)).encode()
            if counts is not None:
                with counts.get_lock():
                    counts.value += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):  # quiet: thousands of requests
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ports.put(server.server_address[1])
    server.serve_forever()
