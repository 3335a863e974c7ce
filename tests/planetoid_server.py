#!/usr/bin/env python3
"""A loopback HTTP server for the download tests: serves the files of one folder, well or badly.

    planetoid_server.py DIR MODE [REQUEST_LOG]

Binds a free port on 127.0.0.1 and prints "PORT\\n" on stdout once it listens. MODE:
  good      every file as it is
  corrupt   every file with its middle byte flipped (same length: only its digest tells)
  truncate  announces the whole length, sends half of the file and closes the connection
  stall     announces the whole length, sends 10 bytes and then nothing for an hour
  trickle   announces the whole length and sends one byte every 0.5 s (never a stall)
Each request's path is appended as one line to REQUEST_LOG when given. Runs until killed.
"""
import http.server
import os
import sys
import time


def main():
    folder, mode = sys.argv[1], sys.argv[2]
    request_log = sys.argv[3] if len(sys.argv) > 3 else None

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if request_log:
                with open(request_log, "a") as log:
                    log.write(self.path + "\n")
            path = os.path.join(folder, os.path.basename(self.path))
            if not os.path.isfile(path):
                self.send_error(404)
                return
            with open(path, "rb") as f:
                body = f.read()
            if mode == "corrupt":
                middle = len(body) // 2
                body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1:]
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if mode == "truncate":
                self.wfile.write(body[: len(body) // 2])
                self.close_connection = True
            elif mode == "trickle":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.5)
            elif mode == "stall":
                self.wfile.write(body[:10])
                self.wfile.flush()
                time.sleep(3600)
            else:
                self.wfile.write(body)

        def log_message(self, *args):  # quiet: the test reads REQUEST_LOG instead
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
