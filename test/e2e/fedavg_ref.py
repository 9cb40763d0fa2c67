#!/usr/bin/python3
"""PyTorch reference for planc's federated training (docs/FEDERATED.md, EXTENSIONS.md §3).

FedAvg written the plain way, on gpt_ref.py's GPT-2, token data and AdamW: each round a
seeded sample of the clients starts from the global model, takes local_steps AdamW steps
(a fresh torch.optim.AdamW each round) on its own token file, FedProx's μ/2·‖w − w_g‖²
added to its loss; the server averages the updates (local − global), weighted by each
client's tokens or uniformly, each clipped to norm C first under DP (noise σ = 0 only:
planc's noise is its own seeded draw), and applies torch.optim.SGD or torch.optim.Adam to
the pseudo-gradient −mean. --client-optimizer sgd --momentum μ makes the clients'
optimizer torch.optim.SGD; --combined instead takes one SGD step on every client's first
batch together, the DDP step that one round of FedAvg with one local SGD step equals.

  fedavg_ref.py --init init.safetensors --clients 'clients/*.bin' MODEL... --batch 4 \\
      --micro 2 --seq 32 --rounds 5 --local-steps 3 --fraction 1.0 --weighting tokens \\
      --prox 0.0 --lr 1e-3 --server sgd --server-lr 1.0 --seed 7 --out rounds.json \\
      [--final-out global.safetensors] [--sample-only]

MODEL is --vocab --context --layers --heads --width. With --sample-only it writes only
each round's sampled clients (planc's sampler, reproduced: a seeded partial Fisher–Yates
shuffle).
"""
import argparse
import copy
import glob
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_ref  # noqa: E402

M64 = gpt_ref.M64
SAMPLE_SALT = 0x66656473616d706c  # "fedsampl"


def sample_clients(seed, rnd, clients, sampled):
    perm = list(range(clients))
    key = gpt_ref.mix((seed ^ SAMPLE_SALT) & M64)
    for i in range(sampled):
        r = gpt_ref.mix(key ^ gpt_ref.mix((rnd * clients + i) & M64))
        j = i + gpt_ref.below(r, clients - i)
        perm[i], perm[j] = perm[j], perm[i]
    return sorted(perm[:sampled])


def client_optimizer(model, args):
    """AdamW as gpt_ref's, or torch.optim.SGD with the same groups (decay on matrices only)."""
    if args.client_optimizer == "adamw":
        return gpt_ref.make_optimizer(model, args)
    decay = [p for _, p in gpt_ref.trainable(model) if p.dim() >= 2]
    no_decay = [p for _, p in gpt_ref.trainable(model) if p.dim() < 2]
    return torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, momentum=args.momentum,
                           foreach=False)


def combined_step(model, data, args):
    """One SGD step on every client's first batch at once (the DDP step FedAvg with one
    local SGD step, every client and uniform weights equals): its loss."""
    opt = client_optimizer(model, args)
    opt.zero_grad(set_to_none=False)
    accum = args.batch // args.micro
    total = 0.0
    for d in data:
        for a in range(accum):
            x, y = d.batch(a * args.micro, args.micro, args.seq)
            loss = model(x, y)
            (loss / (accum * len(data))).backward()
            total += loss.item() / (accum * len(data))
    opt.step()
    return total


def local_round(model, global_params, data, args, rnd):
    """The client's local steps from the global model: its mean loss and its update."""
    opt = client_optimizer(model, args)  # afresh each round
    params = [p for _, p in gpt_ref.trainable(model)]
    accum = args.batch // args.micro
    losses = []
    for i in range(args.local_steps):
        s = rnd * args.local_steps + i  # the client's samples of step s
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for a in range(accum):
            x, y = data.batch(s * args.batch + a * args.micro, args.micro, args.seq)
            loss = model(x, y)
            (loss / accum).backward()
            total += loss.item()
        if args.prox > 0:
            prox = sum(((p - g) ** 2).sum() for p, g in zip(params, global_params))
            (args.prox / 2 * prox).backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        losses.append(total / accum)
    update = [(p.detach().double() - g.double()) for p, g in zip(params, global_params)]
    return sum(losses) / len(losses), update


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--init")
    p.add_argument("--clients", required=True, help="glob of the clients' token files (sorted: client order)")
    gpt_ref.add_model_args(p)
    for name, kind, default in [("batch", int, 4), ("micro", int, 4), ("seq", int, 32), ("rounds", int, 5),
                                ("local-steps", int, 1), ("fraction", float, 1.0), ("prox", float, 0.0),
                                ("lr", float, 1e-3), ("beta1", float, 0.9), ("beta2", float, 0.95),
                                ("eps", float, 1e-8), ("weight-decay", float, 0.0), ("clip", float, 0.0),
                                ("server-lr", float, 1.0), ("server-beta1", float, 0.9),
                                ("server-beta2", float, 0.99), ("server-eps", float, 1e-3),
                                ("dp-clip", float, 0.0), ("momentum", float, 0.0), ("seed", int, 1337)]:
        p.add_argument("--" + name, type=kind, default=default)
    p.add_argument("--weighting", choices=["tokens", "uniform"], default="tokens")
    p.add_argument("--server", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--client-optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--combined", action="store_true",
                   help="instead: one SGD step on every client's first batch together (DDP's step)")
    p.add_argument("--out", required=True)
    p.add_argument("--final-out")
    p.add_argument("--sample-only", action="store_true")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    files = sorted(glob.glob(args.clients))
    C = len(files)
    S = min(C, max(1, math.ceil(args.fraction * C - 1e-9)))
    if args.sample_only:
        with open(args.out, "w") as f:
            json.dump({"rounds": [{"round": r, "clients": sample_clients(args.seed, r, C, S)}
                                  for r in range(args.rounds)]}, f)
        return 0
    model = gpt_ref.model_from_args(args)
    tensors, _ = gpt_ref.read_safetensors(args.init)
    gpt_ref.load_params(model, tensors, args.init, allow_extra_prefix=())
    data = [gpt_ref.TokenData(f, args.seed, args.vocab) for f in files]
    tokens = [sum(len(t) for t in d.files) for d in data]
    if args.combined:
        loss = combined_step(model, data, args)
        with open(args.out, "w") as f:
            json.dump({"rounds": [{"round": 0, "loss": loss, "clients": list(range(C))}]}, f)
        if args.final_out:
            gpt_ref.write_safetensors(args.final_out, gpt_ref.params_numpy(model), {"round": "1"})
        return 0
    global_params = [p for _, p in gpt_ref.trainable(model)]
    if args.server == "sgd":
        server = torch.optim.SGD(global_params, lr=args.server_lr)
    else:
        server = torch.optim.Adam(global_params, lr=args.server_lr, betas=(args.server_beta1, args.server_beta2),
                                  eps=args.server_eps, foreach=False)
    records = []
    for r in range(args.rounds):
        clients = sample_clients(args.seed, r, C, S)
        frozen = [g.detach().clone() for g in global_params]
        weights = [1.0 / S] * S if args.weighting == "uniform" else [tokens[k] / sum(tokens[j] for j in clients)
                                                                    for k in clients]
        mean = [torch.zeros_like(g, dtype=torch.float64) for g in frozen]
        losses = []
        for k, w in zip(clients, weights):
            local = copy.deepcopy(model)
            loss, update = local_round(local, frozen, data[k], args, r)
            if args.dp_clip > 0:
                norm = math.sqrt(sum(float((u * u).sum()) for u in update))
                if norm > args.dp_clip:
                    update = [u * (args.dp_clip / norm) for u in update]
            for m, u in zip(mean, update):
                m += w * u
            losses.append(loss)
        server.zero_grad(set_to_none=False)
        for g, m in zip(global_params, mean):
            g.grad = (-m).to(g.dtype)
        server.step()
        records.append({"round": r, "loss": sum(losses) / len(losses), "clients": clients})
        print(json.dumps(records[-1]))
    with open(args.out, "w") as f:
        json.dump({"rounds": records}, f, indent=1)
        f.write("\n")
    if args.final_out:
        gpt_ref.write_safetensors(args.final_out, gpt_ref.params_numpy(model), {"round": str(args.rounds)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
