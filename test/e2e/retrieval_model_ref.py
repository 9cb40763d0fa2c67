#!/usr/bin/python3
"""PyTorch reference for a retrieval graph's model embedder and re-ranker.

Recomputes, from the checkpoint with gpt_ref.GPT2 in float64 and without a key/value
cache, what docs/RETRIEVAL.md "Models" specifies, and checks a retrieval executable's
`query --json` output against it:

  embedding (pool mean): the text's bytes in consecutive windows of WINDOW bytes, each
      from position 0; the mean of every byte's final hidden state (after ln_f),
      L2-normalised. pool last: the hidden state of the last byte after the text's last
      WINDOW bytes, L2-normalised.
  re-ranking: the chunk's first WINDOW - 1 - q bytes, "\\n", the query's first
      q = min(len, WINDOW // 2) bytes; the mean log-probability of the query's bytes.

  retrieval_model_ref.py vector --ckpt F --window W --pool mean|last \\
      --chunks STORE/chunks.jsonl --query TEXT --result q.json
      every result's vector score equals the reference inner product (within 1e-4), and
      the results are the reference's top k over every chunk of the store
  retrieval_model_ref.py rerank --ckpt F --window W --query TEXT \\
      --fused fused.json --result q.json
      every result's re-rank score equals the reference's (within 1e-4), the results are
      ordered by it, and they are the best of the fused candidates by the reference
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_ref  # noqa: E402
import gpt_ref  # noqa: E402
import torch  # noqa: E402

TOL = 1e-4


def ids(text):
    return list(text.encode("utf-8"))


def embed(model, text, window, pool):
    t = ids(text)
    with torch.no_grad():
        if pool == "last":
            h = model.hidden(torch.tensor([t[-window:]]))[0, -1]
        else:
            h = torch.zeros(model.width, dtype=torch.float64)
            for w0 in range(0, len(t), window):
                h += model.hidden(torch.tensor([t[w0:w0 + window]]))[0].sum(0)
    return h / h.norm()


def rerank_score(model, chunk, query, window):
    q = ids(query)[:max(1, window // 2)]
    d = ids(chunk)[:window - 1 - len(q)]
    ctx = d + [10] + q
    with torch.no_grad():
        logp = torch.log_softmax(model.logits(torch.tensor([ctx[:-1]]))[0], -1)
    first = len(d) + 1
    return sum(float(logp[p - 1, ctx[p]]) for p in range(first, len(ctx))) / len(q)


def fail(msg):
    sys.exit("retrieval_model_ref: FAIL: " + msg)


def check_vector(args, model):
    chunks = [json.loads(line)["text"] for line in open(args.chunks)]
    result = json.load(open(args.result))["results"]
    q = embed(model, args.query, args.window, args.pool)
    ref = [float(embed(model, c, args.window, args.pool) @ q) for c in chunks]
    order = sorted(range(len(chunks)), key=lambda i: -ref[i])
    k = len(result)
    worst = 0.0
    for r in result:
        if r["vector"] is None:
            fail(f"chunk {r['chunk']} has no vector score")
        d = abs(r["vector"]["score"] - ref[r["chunk"]])
        worst = max(worst, d)
        if d > TOL:
            fail(f"chunk {r['chunk']}: inner product {r['vector']['score']:.7f}, PyTorch {ref[r['chunk']]:.7f}")
    # The results are the reference's top k, up to ties at the tolerance.
    kth = ref[order[k - 1]]
    for r in result:
        if ref[r["chunk"]] < kth - TOL:
            fail(f"chunk {r['chunk']} (PyTorch {ref[r['chunk']]:.7f}) is not in PyTorch's top {k} (k-th {kth:.7f})")
    print(f"vector ({args.pool}): {k} results over {len(chunks)} chunks equal PyTorch's top {k}, "
          f"inner products within {worst:.2g}")


def check_rerank(args, model):
    fused = json.load(open(args.fused))["results"]
    result = json.load(open(args.result))["results"]
    ref = {r["chunk"]: rerank_score(model, r["text"], args.query, args.window) for r in fused}
    worst = 0.0
    for i, r in enumerate(result):
        if "rerank" not in r:
            fail(f"result {i + 1} has no re-rank score")
        if r["chunk"] not in ref:
            fail(f"chunk {r['chunk']} was not among the fused candidates")
        d = abs(r["rerank"]["score"] - ref[r["chunk"]])
        worst = max(worst, d)
        if d > TOL:
            fail(f"chunk {r['chunk']}: re-rank score {r['rerank']['score']:.7f}, PyTorch {ref[r['chunk']]:.7f}")
        if i and r["rerank"]["score"] > result[i - 1]["rerank"]["score"]:
            fail(f"results {i} and {i + 1} are not in re-rank order")
        fr = r["rerank"]["fused_rank"]
        if fused[fr - 1]["chunk"] != r["chunk"]:
            fail(f"chunk {r['chunk']}: fused_rank {fr} is chunk {fused[fr - 1]['chunk']} in the fused list")
    best = sorted(ref.values(), reverse=True)
    kth = best[len(result) - 1]
    for r in result:
        if ref[r["chunk"]] < kth - TOL:
            fail(f"chunk {r['chunk']} is not among PyTorch's best {len(result)} of {len(fused)} candidates")
    moved = sum(1 for i, r in enumerate(result) if r["rerank"]["fused_rank"] != i + 1)
    print(f"rerank: best {len(result)} of {len(fused)} fused candidates by PyTorch's query likelihood "
          f"({moved} moved), scores within {worst:.2g}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    v = sub.add_parser("vector")
    v.add_argument("--pool", choices=["mean", "last"], required=True)
    v.add_argument("--chunks", required=True)
    r = sub.add_parser("rerank")
    r.add_argument("--fused", required=True)
    for p in (v, r):
        gpt_ref.add_model_args(p)
        p.add_argument("--ckpt", required=True)
        p.add_argument("--window", type=int, required=True)
        p.add_argument("--query", required=True)
        p.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("PLANC_REF_THREADS", "1")))
    args.family = "gpt"
    model = generate_ref.load(args)  # float64, eval mode
    (check_vector if args.what == "vector" else check_rerank)(args, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
