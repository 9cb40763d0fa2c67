#!/usr/bin/env python3
"""Step time of a planc-built executable against PyTorch on the same model, batch and threads.

    test/bench/train_step.py PLANC_BIN [--threads N] [--steps N] [--config tiny|10m|all]

Both sides train the same GPT-2 (fp32, AdamW, clipping) on the license-text bytes for N steps;
the first 3 steps are warm-up and left out; the median step time of the rest is reported.
planc's step time comes from its log (tokens_per_s), PyTorch's from timing the same loop
as test/e2e/gpt_ref.py. OpenBLAS and PyTorch get the same thread count.
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

CONFIGS = {  # name: (layers, heads, width, context, micro, seq)
    "tiny": (2, 4, 64, 64, 8, 64),
    "10m": (6, 6, 384, 256, 8, 256),
}


def planc_run(planc, work, name, cfg, steps, threads):
    layers, heads, width, context, micro, seq = cfg
    plan = os.path.join(work, name + ".plan")
    with open(plan, "w") as f:
        f.write(f"""import "models/gpt.plan"
import "meshes/cpu_local.plan"
model m = gpt(vocab: 256, context: {context}, layers: {layers}, heads: {heads}, width: {width})
train bench {{
  model = m   mesh = cpu1   data = tokens("{work}/data/train.bin")
  batch = {micro}   micro = {micro}   seq = {seq}
  parallel {{ data = dp }}
  optimizer = adamw(lr: 1e-3, weight_decay: 0.1)
  clip = 1.0   steps = {steps}   seed = 1
}}
""")
    exe = os.path.join(work, name)
    t0 = time.time()
    subprocess.run([planc, "build", plan, "-o", exe], check=True)
    build_s = time.time() - t0
    log = os.path.join(work, name + ".jsonl")
    if os.path.exists(log):
        os.remove(log)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    subprocess.run([exe, "--quiet", "--log", log], check=True, env=env)
    rows = [json.loads(l) for l in open(log) if '"loss"' in l]
    tokens = micro * seq
    times = [tokens / r["tokens_per_s"] for r in rows[3:]]
    n_params = 12 * layers * width * width + 13 * layers * width + (256 + context) * width + 2 * width
    return statistics.median(times), build_s, n_params


def torch_run(cfg, steps, threads, data):
    import torch
    import gpt_ref
    torch.set_num_threads(threads)
    layers, heads, width, context, micro, seq = cfg
    model = gpt_ref.GPT2(256, context, layers, heads, width)
    model.init_random(1)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, foreach=False)
    td = gpt_ref.TokenData([data], seed=1)
    times = []
    for s in range(steps):
        toks, tgts = td.batch(s * micro, micro, seq)
        t0 = time.perf_counter()
        loss = model(torch.as_tensor(toks, dtype=torch.long), torch.as_tensor(tgts, dtype=torch.long))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[3:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("planc")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--config", default="all")
    a = ap.parse_args()
    # The same thread count for everything on both sides: OpenBLAS reads it when it is
    # loaded (before torch is imported), torch's own pool from set_num_threads.
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(a.threads)
    work = tempfile.mkdtemp(prefix="planc-bench-")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare_text.py"), work + "/data"],
                   check=True, stdout=subprocess.DEVNULL)
    names = list(CONFIGS) if a.config == "all" else [a.config]
    print(f"threads {a.threads}, {a.steps} steps (median of steps 3..), fp32")
    print(f"{'model':6} {'params':>10} {'batch':>9} {'build s':>8} {'planc ms':>9} {'torch ms':>9} {'torch/planc':>11}")
    for n in names:
        cfg = CONFIGS[n]
        p, build_s, n_params = planc_run(os.path.abspath(a.planc), work, n, cfg, a.steps, a.threads)
        t = torch_run(cfg, a.steps, a.threads, work + "/data/train.bin")
        print(f"{n:6} {n_params:>10,} {cfg[4]:>3}x{cfg[5]:<5} {build_s:8.2f} {p * 1e3:9.2f} {t * 1e3:9.2f} {t / p:11.2f}")


if __name__ == "__main__":
    main()
