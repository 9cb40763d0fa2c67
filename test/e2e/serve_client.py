#!/usr/bin/env python3
"""The client side of test/e2e/serve.sh, on Python's standard library only.

  serve_client.py endpoints PORT TOKEN_FILE WORKDIR
  serve_client.py reload PORT TOKEN_FILE WORKDIR
  serve_client.py access-log FILE TOKEN_FILE
  serve_client.py drain PORT PID
  serve_client.py generate PORT WORKDIR     (a generate executable's server: gpt_gen)
  serve_client.py grounded PORT WORKDIR     (a grounded one: grounded)
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time


def fail(msg):
    print(f"serve_client: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Client:
    def __init__(self, port, token=None):
        self.port, self.token = port, token
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.connect()
        # http.client writes a request's head and body separately: no Nagle delay.
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, method, path, body=None, token=None, raw=None):
        headers = {}
        token = self.token if token is None else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        if method == "POST":
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data if method in ("POST", "PUT") else None, headers=headers)
        r = self.conn.getresponse()
        payload = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.__init__(self.port, self.token)
        return r.status, r, payload


def expect(client, method, path, status, body=None, raw=None, token=None, has=None):
    got, resp, payload = client.call(method, path, body=body, raw=raw, token=token)
    if got != status:
        fail(f"{method} {path} {raw or body!r}: status {got}, not {status}: {payload[:300]!r}")
    if path != "/metrics":
        try:
            doc = json.loads(payload)
        except ValueError:
            fail(f"{method} {path}: the reply is not JSON: {payload[:200]!r}")
        if status >= 400 and not (isinstance(doc, dict) and doc.get("error")):
            fail(f"{method} {path}: a {status} without a JSON error: {payload[:200]!r}")
        if has and has not in doc.get("error", ""):
            fail(f"{method} {path}: the error does not say {has!r}: {doc}")
        return doc, resp
    return payload.decode(), resp


def metrics(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def endpoints(port, token, work):
    c = Client(port, token)
    wrong = token[:-1] + ("x" if token[-1] != "x" else "y")
    for method, path in [("GET", "/health"), ("POST", "/query"), ("POST", "/reload"), ("GET", "/metrics")]:
        for t in ("", wrong, token[:-1]):
            status, resp, payload = c.call(method, path, body={"text": "x"} if method == "POST" else None, token=t)
            if status != 401 or "error" not in json.loads(payload) or resp.getheader("WWW-Authenticate") != "Bearer":
                fail(f"{method} {path} with token {t!r}: {status} {payload[:200]!r}, not 401 with a challenge")
    # The body of a refused request is read, so the connection stays in step: the next
    # request on it is answered.
    status, _, _ = c.call("POST", "/query", body={"text": "x" * 3000}, token=wrong)
    status2, _, payload = c.call("GET", "/health")
    if status != 401 or status2 != 200:
        fail(f"after a 401 with a 3 KB body the next request on the connection got {status2}: {payload[:200]!r}")
    expect(c, "GET", "/nope", 401, token=wrong)
    print("serve_client: 401 without the token, or with a wrong one, on every endpoint (unknown ones too); "
          "the connection stays in step")

    # Idle kept-alive connections hold a thread each, not the server: with 6 threads, 4
    # connections that send nothing leave the next request answered at once.
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    t0 = time.time()
    expect(Client(port, token), "GET", "/health", 200)
    for s in idle:
        s.close()
    if time.time() - t0 > 2:
        fail(f"4 idle connections held up a request for {time.time() - t0:.1f} s")
    health, _ = expect(c, "GET", "/health", 200)
    if health.get("status") != "ok" or health.get("graph") != "licenses" or health.get("generation") != 1:
        fail(f"health: {health}")
    for cli, body in [("cli_hybrid.json", {"text": "patent license grant", "k": 5}),
                      ("cli_keyword.json", {"text": "patent license grant", "k": 3, "mode": "keyword"}),
                      ("cli_vector.json", {"text": "warranty disclaimer", "k": 4, "mode": "vector",
                                           "fusion": "rrf"})]:
        want = json.load(open(os.path.join(work, cli)))
        got, _ = expect(c, "POST", "/query", 200, body=body)
        if got != want:
            fail(f"/query {body} differs from `query --json`:\n{json.dumps(got)[:400]}\n{json.dumps(want)[:400]}")
        if not got["results"]:
            fail(f"/query {body}: no results")
    print("serve_client: POST /query equals `query --json` (hybrid, keyword, vector with rrf)")

    bad = [(b"nope", "not JSON"), (b"[1]", "JSON object"), (b'{"text": 3}', "string"),
           (b'{"text": "x", "k": 0}', "\"k\""), (b'{"text": "x", "k": 2.5}', "\"k\""),
           (b'{"text": "x", "mode": "fuzzy"}', "mode"), (b'{"txt": "x"}', "unknown field"),
           (b'{"text": ""}', "empty"), (b'{"text": "x", "rerank": "no"}', "rerank"), (b"{}", "required")]
    for raw, why in bad:
        expect(c, "POST", "/query", 400, raw=raw, has=why)
    expect(c, "POST", "/query", 413, body={"text": "a" * 5000})
    expect(c, "POST", "/reload", 400, body={"ingest": "yes"}, has="ingest")
    expect(c, "GET", "/nope", 404, has="no such endpoint")
    expect(c, "POST", "/generate", 404, body={"prompt": "x"}, has="does not generate")
    _, resp = expect(c, "GET", "/query", 405)
    if resp.getheader("Allow") != "POST":
        fail("405 without Allow: POST")
    expect(c, "PUT", "/query", 405)
    expect(c, "POST", "/metrics", 405, body={})
    for head in (b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"\r\n"):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() + b"\r\n" + head)
        reply = s.recv(65536)
        s.close()
        if not reply.startswith(b"HTTP/1.1 411") or b"Connection: close" not in reply:
            fail(f"a body without Content-Length got {reply[:100]!r}")
    print(f"serve_client: {len(bad)} malformed bodies 400, an oversized one 413, a chunked or unsized one 411, "
          "404 and 405, each a JSON error")

    text, resp = expect(c, "GET", "/metrics", 200)
    if not resp.getheader("Content-Type", "").startswith("text/plain"):
        fail("metrics are not text/plain")
    m = metrics(text)
    q = 'route="POST /query"'
    want = {f'planc_requests_total{{{q},code="200"}}': 3, f'planc_requests_total{{{q},code="400"}}': len(bad),
            f'planc_requests_total{{{q},code="413"}}': 1, f'planc_requests_total{{{q},code="401"}}': 4,
            'planc_requests_total{route="GET /query",code="405"}': 1,
            'planc_requests_total{route="PUT /query",code="405"}': 1,
            'planc_requests_total{route="POST /query",code="411"}': 2,
            'planc_requests_total{route="other",code="404"}': 1,
            'planc_requests_total{route="other",code="401"}': 1}
    for name, n in want.items():
        if m.get(name) != n:
            fail(f"metrics: {name} = {m.get(name)}, not {n}")
    count = m[f"planc_request_duration_seconds_count{{{q}}}"]
    if count != 3 + len(bad) + 1 + 4 + 2 or m[f'planc_request_duration_seconds_bucket{{{q},le="+Inf"}}'] != count:
        fail(f"metrics: the /query histogram counts {count} requests")
    buckets = [v for k, v in m.items() if k.startswith(f"planc_request_duration_seconds_bucket{{{q}")]
    if buckets != sorted(buckets):
        fail(f"metrics: the histogram's buckets are not cumulative: {buckets}")
    errors = sum(v for k, v in m.items() if k.startswith("planc_requests_total") and 'code="2' not in k)
    if m["planc_request_errors_total"] != errors or m["planc_store_chunks"] != health["chunks"]:
        fail("metrics: errors or chunks disagree")
    print(f"serve_client: /metrics counts every request by route and status ({int(errors)} errors) "
          f"and the /query latency histogram")


def load(port, token, stop, tally):
    c = Client(port, token)
    texts = ["GNU Lesser General Public License library", "patent license grant", "warranty disclaimer",
             "Mozilla Public License source code form", "redistribution and use in source and binary forms"]
    i = 0
    while not stop.is_set():
        body = {"text": texts[i % len(texts)], "k": 5}
        i += 1
        try:
            status, _, payload = c.call("POST", "/query", body=body)
            ok = status == 200 and "results" in json.loads(payload)
        except Exception as e:  # a reset or a refused connection is a failed request
            ok, payload = False, repr(e).encode()
            c = Client(port, token)
        with tally["lock"]:
            tally["ok" if ok else "failed"] += 1
            if not ok and len(tally["why"]) < 5:
                tally["why"].append(payload[:200])


def wait_generation(c, generation, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        _, _, payload = c.call("GET", "/health")
        health = json.loads(payload)
        if health["generation"] >= generation:
            return health
        time.sleep(0.1)
    fail(f"the server did not reach generation {generation} in {seconds} s")


def reload(port, token, work):
    c = Client(port, token)
    before = json.loads(c.call("GET", "/health")[2])
    stop, tally = threading.Event(), {"ok": 0, "failed": 0, "why": [], "lock": threading.Lock()}
    workers = [threading.Thread(target=load, args=(port, token, stop, tally)) for _ in range(8)]
    for w in workers:
        w.start()
    time.sleep(0.5)
    subprocess.run(["bash", "reload.sh"], cwd=work, check=True)
    doc, _ = expect(c, "POST", "/reload", 200, body={})
    if doc["generation"] != before["generation"] + 1 or doc["ingest"]["added"] != 1 or doc["chunks"] <= before["chunks"]:
        fail(f"POST /reload: {doc}")
    got, _ = expect(c, "POST", "/query", 200, body={"text": "GNU Lesser General Public License", "k": 1,
                                                     "mode": "keyword"})
    if not got["results"][0]["file"].endswith("LGPL-2.1.txt"):
        fail(f"after the reload the added file is not found: {got['results'][0]['file']}")
    print(f"serve_client: POST /reload re-ingested (1 file added): generation {doc['generation']}, "
          f"{doc['chunks']} chunks, {doc['seconds'] * 1e3:.0f} ms")

    # A refused re-ingest (a file that no longer matches the manifest) keeps the store.
    path = os.path.join(work, "docs", "BSD.txt")
    original = open(path, "rb").read()
    open(path, "ab").write(b"a line the manifest does not know\n")
    expect(c, "POST", "/reload", 500, body={}, has="BSD.txt")
    health = json.loads(c.call("GET", "/health")[2])
    if health["generation"] != doc["generation"] or health["chunks"] != doc["chunks"]:
        fail(f"a failed reload changed what is served: {health}")
    open(path, "wb").write(original)
    print("serve_client: a refused re-ingest names the file and keeps serving the last store")

    # The store replaced on disk by `ingest` beside the server.
    os.remove(os.path.join(work, "docs", "LGPL-2.1.txt"))
    subprocess.run("sha256sum docs/*.txt > MANIFEST.sha256 && ./rag ingest --quiet > /dev/null", shell=True,
                   cwd=work, check=True)
    health = wait_generation(c, doc["generation"] + 1)
    if health["chunks"] != before["chunks"]:
        fail(f"after the on-disk re-ingest: {health['chunks']} chunks, not {before['chunks']}")
    print(f"serve_client: a store re-ingested on disk was swapped in (generation {health['generation']})")
    time.sleep(0.5)
    stop.set()
    for w in workers:
        w.join()
    if tally["failed"] or tally["ok"] < 100:
        fail(f"under load: {tally['ok']} answered, {tally['failed']} failed: {tally['why']}")
    print(f"serve_client: 8 clients, {tally['ok']} queries during both reloads, none failed")


def access_log(path, token_file):
    token = open(token_file).read().strip()
    text = open(path).read()
    if token in text:
        fail("the access log holds the token")
    lines = [json.loads(line) for line in text.splitlines()]
    statuses = {line["status"] for line in lines}
    for line in lines:
        if set(line) != {"time", "remote", "method", "path", "status", "bytes", "ms"}:
            fail(f"access log line with fields {sorted(line)}")
    if len(lines) < 100 or not {200, 400, 401, 404, 405, 413, 500} <= statuses:
        fail(f"access log: {len(lines)} lines, statuses {sorted(statuses)}")
    print(f"serve_client: the access log has {len(lines)} JSON lines, statuses {sorted(statuses)}, no token")


def drain(port, pid):
    body = json.dumps({"text": "patent license grant", "k": 2}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
    time.sleep(0.3)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        fail("the server still accepts connections after SIGTERM")
    except ConnectionRefusedError:
        pass
    s.sendall(body[10:])
    reply = b""
    while True:
        part = s.recv(65536)
        if not part:
            break
        reply += part
        head, _, rest = reply.partition(b"\r\n\r\n")
        length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
        if length and len(rest) >= length[0]:
            break
    head, _, rest = reply.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or not json.loads(rest)["results"]:
        fail(f"the request in flight at SIGTERM got {reply[:200]!r}")
    print("serve_client: after SIGTERM no new connection is accepted, and the request in flight is answered")


SAME = ("tokens", "logprobs", "text", "prompt", "prompt_tokens", "checkpoint", "temperature", "top_k", "seed",
        "context", "stopped", "context_restarts")


def same_run(got, want, what):
    for key in SAME:
        if got.get(key) != want.get(key):
            fail(f"{what}: {key} is {str(got.get(key))[:200]}, the command line's {str(want.get(key))[:200]}")


def cli(work, exe, *args):
    out = subprocess.run([f"./{exe}", *args, "--json"], cwd=work, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def generate(port, work):
    c = Client(port)
    runs = [({"prompt": "The license", "max_tokens": 30}, ["The license", "--max-tokens", "30"]),
            ({"prompt": "The", "max_tokens": 40, "temperature": 1, "top_k": 5, "seed": 9},
             ["The", "--max-tokens", "40", "--temperature", "1", "--top-k", "5", "--seed", "9"]),
            ({"tokens": [84, 104, 101], "max_tokens": 10}, ["--tokens", "84 104 101", "--max-tokens", "10"])]
    for body, args in runs:
        got, _ = expect(c, "POST", "/generate", 200, body=body)
        same_run(got, cli(work, "gpt_gen", *args), f"POST /generate {body}")
    print("serve_client: POST /generate equals the command line's --json (greedy, sampled, token ids)")

    # Eight clients at once, each request against its answer alone: decoders share no state.
    bodies = [{"prompt": f"Section {i}", "max_tokens": 48, "temperature": 0.9, "seed": i} for i in range(24)]
    alone = [expect(c, "POST", "/generate", 200, body=b)[0]["tokens"] for b in bodies]
    together, errors = [None] * len(bodies), []

    def worker(w):
        cw = Client(port)
        for i in range(w, len(bodies), 8):
            status, _, payload = cw.call("POST", "/generate", body=bodies[i])
            if status != 200:
                errors.append(payload[:200])
            else:
                together[i] = json.loads(payload)["tokens"]
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors or together != alone:
        fail(f"concurrent generation differs from one at a time: {errors[:2]}")
    print(f"serve_client: {len(bodies)} requests from 8 clients at once equal each one alone")

    bad = [({"prompt": "x", "tokens": [1]}, "one way"), ({"tokens": [999]}, "not a token id"),
           ({"prompt": ""}, "empty"), ({"prompt": "x", "temperature": -1}, "temperature"),
           ({"prompt": "x", "max_tokens": 0}, "max_tokens"), ({"prompt": "x", "k": 2}, "retrieves nothing"),
           ({"prompt": "x", "bogus": 1}, "unknown field"), ({}, "required"), ({"tokens": "1 2"}, "tokens"),
           ({"prompt": "x", "context": "no"}, "context")]
    for body, why in bad:
        expect(c, "POST", "/generate", 400, body=body, has=why)
    expect(c, "POST", "/query", 404, body={"text": "x"}, has="retrieves nothing")
    expect(c, "POST", "/reload", 400, body={"ingest": True}, has="retrieves nothing")
    print(f"serve_client: {len(bad)} bad requests 400, POST /query 404 on a generate executable")

    long, _ = expect(c, "POST", "/generate", 200, body={"prompt": "The", "max_tokens": 1 << 20})
    if long["stopped"] != "timeout" or not 0 < len(long["tokens"]) < 1 << 20:
        fail(f"a request past --timeout: stopped {long['stopped']}, {len(long['tokens'])} tokens")
    print(f"serve_client: a request past --timeout stops at {len(long['tokens'])} tokens (\"stopped\": \"timeout\")")

    health, _ = expect(c, "GET", "/health", 200)
    newer = os.path.join(work, "ckpt", "gpt", "step-00000300.safetensors")
    shutil.copyfile(health["checkpoint"], newer)
    try:
        doc, _ = expect(c, "POST", "/reload", 200, body={})
    finally:
        os.remove(newer)
    if doc["generation"] != 2 or doc["checkpoint"] != newer or doc["context"] is not None:
        fail(f"POST /reload: {doc}")
    got, _ = expect(c, "POST", "/generate", 200, body={"prompt": "The license", "max_tokens": 5})
    if got["checkpoint"] != newer:
        fail(f"after the reload the server decodes with {got['checkpoint']}")
    m = metrics(expect(c, "GET", "/metrics", 200)[0])
    if m["planc_checkpoint_generation"] != 2 or m["planc_generated_tokens_total"] < 30 + 40 + 10 + 48 * 48:
        fail("metrics: checkpoint generation or generated tokens")
    print("serve_client: POST /reload loads the newest checkpoint; /metrics counts the tokens")


def grounded(port, work):
    c = Client(port)
    question = "What does the Apache License require, a NOTICE file?"
    got, _ = expect(c, "POST", "/generate", 200, body={"prompt": question, "k": 4})
    same_run(got, cli(work, "grounded", question, "--k", "4"), "grounded POST /generate")
    got, _ = expect(c, "POST", "/generate", 200, body={"prompt": question, "context": False})
    same_run(got, cli(work, "grounded", question, "--no-context"), "POST /generate with context false")
    want = subprocess.run(["./rag", "query", "Apache NOTICE file", "--k", "3", "--json"], cwd=work, check=True,
                          capture_output=True, text=True).stdout
    got, _ = expect(c, "POST", "/query", 200, body={"text": "Apache NOTICE file", "k": 3})
    if got != json.loads(want):
        fail("a grounded generate executable's POST /query differs from the retrieval executable's query --json")
    doc, _ = expect(c, "POST", "/reload", 200, body={"ingest": False})
    if doc["context"]["generation"] != 2 or doc["context"]["ingest"] is not None:
        fail(f"POST /reload of a grounded executable: {doc}")
    health, _ = expect(c, "GET", "/health", 200)
    if health["context"]["graph"] != "licenses":
        fail(f"health: {health}")
    print("serve_client: grounded POST /generate equals the command line (with and without context); "
          "POST /query equals the retrieval executable's; reload swaps the store too")


def main():
    cmd = sys.argv[1]
    if cmd == "endpoints":
        endpoints(int(sys.argv[2]), open(sys.argv[3]).read().strip(), sys.argv[4])
    elif cmd == "reload":
        reload(int(sys.argv[2]), open(sys.argv[3]).read().strip(), sys.argv[4])
    elif cmd == "access-log":
        access_log(sys.argv[2], sys.argv[3])
    elif cmd == "generate":
        generate(int(sys.argv[2]), sys.argv[3])
    elif cmd == "grounded":
        grounded(int(sys.argv[2]), sys.argv[3])
    elif cmd == "drain":
        drain(int(sys.argv[2]), int(sys.argv[3]))
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
