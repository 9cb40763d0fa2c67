#!/usr/bin/python3
"""PyTorch reference for planc's GPT-2 training executables.

Everything an executable built from a `gpt` plan does on one process, written the plain
PyTorch way, so that its losses, gradients and checkpoints can be compared with this:

  * GPT2 below: the stdlib `gpt` family (stdlib/models/gpt.plan) with Hugging Face GPT-2
    parameter names as state_dict keys (wte.weight [vocab, width], wpe.weight [context,
    width], h.{i}.ln_1, h.{i}.attn.c_attn [width, 3 width], h.{i}.attn.c_proj, h.{i}.ln_2,
    h.{i}.mlp.c_fc [width, 4 width], h.{i}.mlp.c_proj, ln_f; Conv1D weights [in, out]), tied
    head, tanh GELU, LayerNorm eps 1e-5, causal attention, mean cross-entropy, no dropout;
  * safetensors reading and writing with json + numpy;
  * TokenData: the runtime's token files (nanoGPT raw uint16, llm.c headered) and its
    deterministic sampler (splitmix64 of seed and global sample index);
  * train(): accumulation, clipping, warm-up + constant/linear/cosine schedule, AdamW with
    decay on tensors of >= 2 dims only, as torch.optim.AdamW(foreach=False).

Command line:

  gpt_ref.py train --init init.safetensors --data train.bin --vocab 256 --context 64 \\
      --layers 2 --heads 4 --width 64 --batch 8 --micro 4 --seq 64 --steps 20 --lr 1e-3 \\
      --schedule cosine --warmup 2 --min-lr 1e-4 --clip 1.0 --weight-decay 0.1 \\
      --beta1 0.9 --beta2 0.95 --eps 1e-8 --seed 1337 --out losses.json \\
      [--grads-out grads.safetensors] [--final-out params.safetensors] [--ckpt-out ckpt.safetensors]
      [--resume ckpt.safetensors] [--run-steps N] [--double]
  gpt_ref.py eval --ckpt ckpt.safetensors --data val.bin MODEL... --seq 64 \\
      (--windows FIRST:COUNT | --samples FIRST:COUNT --seed S) [--expect LOSS --rtol 1e-4]
  gpt_ref.py logits --ckpt ckpt.safetensors MODEL... --tokens 1,2,3 [--targets 2,3,4] [--out f.npy|f.json]

MODEL is --vocab --context --layers --heads --width (defaults: the stdlib's `tiny`).
Torch uses PLANC_REF_THREADS threads (default 1) so that runs are reproducible.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(int(os.environ.get("PLANC_REF_THREADS", "1")))

# ---------------------------------------------------------------------------- safetensors

_ST_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"), "BF16": np.dtype("<u2"),  # BF16 is widened to f32 on read
}


class FormatError(Exception):
    pass


def read_safetensors(path):
    """Returns ({name: np.ndarray}, {metadata}). BF16 tensors come back as float32."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise FormatError("%s: %d bytes, too short for a safetensors header" % (path, len(raw)))
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise FormatError("%s: header of %d bytes runs past the end of the file (%d bytes)" % (path, n, len(raw)))
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError("%s: header is not JSON: %s" % (path, e))
    if not isinstance(header, dict):
        raise FormatError("%s: header is not a JSON object" % path)
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        try:
            dtype, shape, (b, e) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise FormatError("%s: tensor %r: malformed entry %r" % (path, name, info))
        if dtype not in _ST_DTYPES:
            raise FormatError("%s: tensor %r: unsupported dtype %s" % (path, name, dtype))
        dt = _ST_DTYPES[dtype]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= b <= e <= len(body)) or e - b != count * dt.itemsize:
            raise FormatError("%s: tensor %r: data_offsets [%d, %d] do not hold %s %s" % (path, name, b, e, dtype, shape))
        a = np.frombuffer(body[b:e], dtype=dt).reshape(shape)
        if dtype == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.copy()
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: array} (f32/f64/f16/i32/i64/u16/u8 arrays, 0-d ones with shape [])
    with string metadata."""
    names = sorted(tensors)
    rev = {v: k for k, v in _ST_DTYPES.items() if k != "BF16"}
    header, offset, blobs = {}, 0, []
    for name in names:
        a = tensors[name]
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
        a = np.asarray(a)
        a = np.ascontiguousarray(a).reshape(a.shape)  # ascontiguousarray makes a 0-d array 1-d
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in rev:
            raise ValueError("tensor %r: dtype %s has no safetensors name" % (name, a.dtype))
        data = a.astype(dt, copy=False).tobytes()
        header[name] = {"dtype": rev[dt], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- token data

M64 = (1 << 64) - 1
LLMC_MAGIC = 20240520


def mix(x):
    """splitmix64 of x (the runtime's planrt::mix)."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def below(r, n):
    """A number in [0, n) from the 64-bit r: the high half of the 128-bit r * n."""
    return (r * n) >> 64


def read_tokens(path):
    """The uint16 tokens of a nanoGPT raw file or an llm.c file (header[0] = 20240520)."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0:
        raise FormatError("%s: empty token file" % path)
    if raw.size >= 4 and int(raw[:4].view("<i4")[0]) == LLMC_MAGIC:
        if raw.size < 1024:
            raise FormatError("%s: truncated llm.c header (%d bytes of 1024)" % (path, raw.size))
        header = raw[:1024].view("<i4")
        if header[1] != 1:
            raise FormatError("%s: llm.c token file version %d; version 1 (uint16 tokens) expected" % (path, header[1]))
        count = int(header[2])
        if count < 0 or 1024 + 2 * count != raw.size:
            raise FormatError("%s: header promises %d tokens but the file has %d bytes" % (path, count, raw.size))
        return raw[1024:].view("<u2")
    if raw.size % 2:
        raise FormatError("%s: %d bytes is not a whole number of uint16 tokens" % (path, raw.size))
    return raw.view("<u2")


class TokenData:
    """Token files, in order: each pattern's glob matches sorted, patterns in the order given."""

    def __init__(self, patterns, seed, vocab=0):
        if isinstance(patterns, str):
            patterns = [patterns]
        self.paths = []
        for p in patterns:
            matches = sorted(glob.glob(p))
            if not matches:
                raise FileNotFoundError("%s: no such token file" % p)
            self.paths.extend(matches)
        self.files = [read_tokens(p) for p in self.paths]
        self.seed = int(seed) & M64
        self.vocab = int(vocab)

    def _copy(self, f, offset, seq):
        w = self.files[f][offset:offset + seq + 1].astype(np.int64)
        if self.vocab > 0 and w.size and int(w.max()) >= self.vocab:
            bad = int(np.argmax(w >= self.vocab))
            raise FormatError("%s: token %d at position %d is outside the vocabulary of %d"
                              % (self.paths[f], w[bad], offset + bad, self.vocab))
        return w[:seq], w[1:seq + 1]

    def locate(self, index, seq):
        """(file number, offset) of global sample `index`'s window of seq + 1 tokens."""
        starts = sum(len(t) - seq for t in self.files if len(t) > seq)
        if starts == 0:
            raise FormatError("%s: fewer than %d tokens: too short for one sequence" % (self.paths[0], seq + 1))
        pick = below(mix(self.seed ^ mix(int(index) & M64)), starts)
        for f, t in enumerate(self.files):
            if len(t) <= seq:
                continue
            here = len(t) - seq
            if pick < here:
                return f, pick
            pick -= here
        raise AssertionError("unreachable")

    def sample(self, index, seq):
        return self._copy(*self.locate(index, seq), seq)

    def batch(self, first, count, seq):
        xs, ys = zip(*(self.sample(first + i, seq) for i in range(count)))
        return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))

    def window(self, w, seq):
        """Evaluation: the w-th window of seq + 1 tokens at offsets 0, seq, 2 seq, … in file order."""
        for f, t in enumerate(self.files):
            here = (len(t) - 1) // seq if len(t) > seq else 0
            if w < here:
                return self._copy(f, w * seq, seq)
            w -= here
        raise IndexError("evaluation window past the end of the data")

    def windows(self, first, count, seq):
        xs, ys = zip(*(self.window(first + i, seq) for i in range(count)))
        return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


# ---------------------------------------------------------------------------- the model

class Conv1D(nn.Module):
    """Hugging Face's Conv1D: weight [in, out], y = x @ weight + bias."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.width, self.heads = width, heads
        self.c_attn = Conv1D(width, 3 * width)
        self.c_proj = Conv1D(width, width)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.c_fc = Conv1D(width, hidden)
        self.c_proj = Conv1D(hidden, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = MLP(width, 4 * width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab=256, context=64, layers=2, heads=4, width=64):
        super().__init__()
        if width % heads:
            raise ValueError("width %d is not divisible by heads %d" % (width, heads))
        self.vocab, self.context, self.layers, self.heads, self.width = vocab, context, layers, heads, width
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)

    def hidden(self, tokens):
        """The final hidden states (after ln_f), which the output head projects."""
        T = tokens.shape[1]
        if T > self.context:
            raise ValueError("sequence of %d tokens is longer than the context %d" % (T, self.context))
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)

    def logits(self, tokens):
        return self.hidden(tokens) @ self.wte.weight.t()

    def forward(self, tokens, targets):
        logits = self.logits(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def init_random(self, seed):
        """GPT-2's initialisation (normal 0.02, residual projections 0.02 / sqrt(2 layers))."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                    p.fill_(1.0)
                elif p.dim() == 1:
                    p.zero_()
                else:
                    std = 0.02 / math.sqrt(2 * self.layers) if name.endswith("c_proj.weight") else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)


def model_from_args(args):
    return GPT2(args.vocab, args.context, args.layers, args.heads, args.width)


def load_params(model, tensors, source, allow_extra_prefix=("optimizer.",)):
    """Strict load: every parameter present with its shape; other names only under allow_extra_prefix."""
    params = dict(model.named_parameters())
    problems = []
    for name, p in params.items():
        if name not in tensors:
            problems.append("missing tensor %s %s" % (name, list(p.shape)))
        elif list(tensors[name].shape) != list(p.shape):
            problems.append("tensor %s has shape %s, the model needs %s" % (name, list(tensors[name].shape), list(p.shape)))
    for name in tensors:
        if name not in params and not name.startswith(tuple(allow_extra_prefix)):
            problems.append("unexpected tensor %s %s" % (name, list(tensors[name].shape)))
    if problems:
        raise FormatError("%s does not match the model:\n  %s" % (source, "\n  ".join(problems)))
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(np.asarray(tensors[name], dtype=np.float64)).to(p.dtype))


def params_numpy(model):
    """What trains (a LoRA model's adapters, else every parameter), as float32 arrays."""
    return {n: p.detach().float().numpy().copy() for n, p in trainable(model)}


# ---------------------------------------------------------------------------- training

def lr_at(step, lr, steps, schedule="cosine", warmup=0, min_lr=0.0):
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    if schedule == "cosine":
        return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))
    if schedule == "linear":
        return lr + (min_lr - lr) * p
    if schedule == "constant":
        return lr
    raise ValueError("unknown schedule %r" % schedule)


def trainable(model):
    """(name, parameter) of what trains: all of them, but a LoRA model's frozen base."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def make_optimizer(model, args):
    decay = [p for _, p in trainable(model) if p.dim() >= 2]
    no_decay = [p for _, p in trainable(model) if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                             foreach=False)


def load_optimizer_state(model, opt, tensors, step, source):
    """Restores exp_avg/exp_avg_sq ("optimizer.exp_avg.<name>") and the step count."""
    for name, p in trainable(model):
        st = {}
        for key in ("exp_avg", "exp_avg_sq"):
            full = "optimizer.%s.%s" % (key, name)
            if full not in tensors:
                raise FormatError("%s: missing %s" % (source, full))
            if list(tensors[full].shape) != list(p.shape):
                raise FormatError("%s: %s has shape %s, expected %s" % (source, full, list(tensors[full].shape), list(p.shape)))
            st[key] = torch.from_numpy(np.asarray(tensors[full], dtype=np.float64)).to(p.dtype)
        st["step"] = torch.tensor(float(step))
        opt.state[p] = st


def optimizer_tensors(model, opt):
    out = {}
    for name, p in trainable(model):
        st = opt.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq"):
            t = st.get(key, torch.zeros_like(p))
            out["optimizer.%s.%s" % (key, name)] = t.detach().float().numpy().copy()
    return out


def train(args, log=print, make_model=None, make_data=None, after_step=None):
    """The training loop (also llama_ref.py's, with its own make_model; cnn_ref.py's, with
    its model and its image data, whose batch(first, count, seq) gives (images, labels)).
    after_step(s, model), when given, runs after each optimizer step s and its record."""
    dtype = torch.float64 if args.double else torch.float32
    model = (make_model or model_from_args)(args)
    context = getattr(args, "context", None)
    seq = args.seq or context
    if context and seq > context:
        raise ValueError("seq %d exceeds the context %d" % (seq, context))
    if args.batch % args.micro:
        raise ValueError("batch %d is not a multiple of micro %d" % (args.batch, args.micro))
    accum = args.batch // args.micro
    start = 0
    resume = getattr(args, "resume", None)
    if resume:
        tensors, meta = read_safetensors(resume)
        load_params(model, tensors, resume)
        start = int(meta.get("step", 0))
    elif args.init:
        tensors, _ = read_safetensors(args.init)
        load_params(model, tensors, args.init, allow_extra_prefix=())
    else:
        model.init_random(args.seed)
    model.to(dtype)
    opt = make_optimizer(model, args)
    if resume:
        load_optimizer_state(model, opt, tensors, start, resume)
    data = make_data(args) if make_data else TokenData(args.data, args.seed, args.vocab)
    params = [p for _, p in trainable(model)]
    run_steps = getattr(args, "run_steps", None)
    if run_steps is None:
        run_steps = args.steps - start
    records = []
    for s in range(start, start + run_steps):
        opt.zero_grad(set_to_none=False)
        total = 0.0
        for a in range(accum):
            x, y = data.batch(s * args.batch + a * args.micro, args.micro, seq)
            loss = model(x, y)
            (loss / accum).backward()
            total += loss.item()
        loss_value = total / accum
        if s == start and args.grads_out:
            write_safetensors(args.grads_out, {n: p.grad.detach().float().numpy().copy()
                                               for n, p in trainable(model)}, {"step": str(s)})
        if args.clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, args.clip)
        else:
            norm = torch.norm(torch.stack([torch.norm(p.grad.detach(), 2.0) for p in params]), 2.0)
        lr = lr_at(s, args.lr, args.steps, args.schedule, args.warmup, args.min_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        rec = {"step": s, "loss": loss_value, "lr": lr, "grad_norm": float(norm)}
        records.append(rec)
        if log:
            log(json.dumps(rec))
        if after_step:
            after_step(s, model)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"config": {k: v for k, v in vars(args).items() if k != "func"}, "steps": records}, f, indent=1)
            f.write("\n")
    if getattr(args, "final_out", None):
        write_safetensors(args.final_out, params_numpy(model), {"step": str(start + run_steps)})
    if getattr(args, "ckpt_out", None):
        t = params_numpy(model)
        t.update(optimizer_tensors(model, opt))
        write_safetensors(args.ckpt_out, t, {"step": str(start + run_steps)})
    return records, model


# ---------------------------------------------------------------------------- evaluation

def parse_range(text):
    first, _, count = text.partition(":")
    return int(first), int(count)


def load_checkpoint_model(args, make_model=None):
    model = (make_model or model_from_args)(args)
    tensors, meta = read_safetensors(args.ckpt)
    load_params(model, tensors, args.ckpt)
    if args.double:
        model.to(torch.float64)
    return model, meta


def evaluate(args, make_model=None):
    """Loss over data windows of a checkpoint (also llama_ref.py's, with its make_model)."""
    model, meta = load_checkpoint_model(args, make_model)
    seq = args.seq or args.context
    data = TokenData(args.data, args.seed, args.vocab)
    if bool(args.windows) == bool(args.samples):
        raise SystemExit("eval: give exactly one of --windows FIRST:COUNT and --samples FIRST:COUNT")
    first, count = parse_range(args.windows or args.samples)
    fetch = data.windows if args.windows else data.batch
    losses = []
    with torch.no_grad():
        for b in range(first, first + count, args.micro):
            n = min(args.micro, first + count - b)
            x, y = fetch(b, n, seq)
            losses.append((model(x, y).item(), n))
    loss = sum(l * n for l, n in losses) / sum(n for _, n in losses)
    result = {"ckpt": args.ckpt, "step": meta.get("step"), "loss": loss, "sequences": count, "seq": seq}
    print(json.dumps(result))
    if args.expect is not None:
        rel = abs(loss - args.expect) / max(abs(args.expect), 1e-12)
        if rel > args.rtol:
            print("eval: loss %.8g differs from the expected %.8g by %.3g (rtol %.3g)" % (loss, args.expect, rel, args.rtol),
                  file=sys.stderr)
            return 1
        print("eval: loss matches the expected %.8g (rel diff %.3g <= %.3g)" % (args.expect, rel, args.rtol))
    return 0


def logits_cmd(args):
    model, meta = load_checkpoint_model(args)
    toks = torch.tensor([[int(t) for t in args.tokens.split(",")]], dtype=torch.int64)
    with torch.no_grad():
        logits = model.logits(toks)[0]
        result = {"ckpt": args.ckpt, "step": meta.get("step"), "shape": list(logits.shape)}
        if args.targets:
            tg = torch.tensor([int(t) for t in args.targets.split(",")], dtype=torch.int64)
            result["loss"] = F.cross_entropy(logits, tg).item()
    if args.out:
        a = logits.float().numpy()
        if args.out.endswith(".json"):
            with open(args.out, "w") as f:
                json.dump(a.tolist(), f)
        else:
            np.save(args.out, a)
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------- command line

def add_train_args(t):
    """The data, batch, schedule and optimizer flags of `train` (llama_ref.py's too)."""
    t.add_argument("--data", action="append", required=True, help="token file or glob; repeatable")
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--micro", type=int, required=True)
    t.add_argument("--seq", type=int, default=0, help="default: the context")
    t.add_argument("--steps", type=int, required=True, help="the plan's steps (the schedule's length)")
    t.add_argument("--run-steps", type=int, help="steps to run (default: all remaining)")
    t.add_argument("--lr", type=float, required=True)
    t.add_argument("--schedule", choices=["constant", "linear", "cosine"], default="constant")
    t.add_argument("--warmup", type=int, default=0)
    t.add_argument("--min-lr", type=float, default=0.0)
    t.add_argument("--clip", type=float, default=0.0, help="0: no clipping")
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--beta1", type=float, default=0.9)
    t.add_argument("--beta2", type=float, default=0.95)
    t.add_argument("--eps", type=float, default=1e-8)
    t.add_argument("--seed", type=int, default=1337)
    t.add_argument("--out", help="losses as JSON {config, steps: [{step, loss, lr, grad_norm}]}")
    t.add_argument("--grads-out", help="the first step's accumulated (unclipped) gradients, safetensors")
    t.add_argument("--final-out", help="parameters after the last step, safetensors")
    t.add_argument("--ckpt-out", help="a checkpoint after the last step: parameters + optimizer.* + metadata step")
    t.add_argument("--quiet", action="store_true")


def add_model_args(p):
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--double", action="store_true", help="compute in float64 (a tighter reference)")


def add_eval_args(e):
    """The data and windows of `eval` (also llama_ref.py's)."""
    e.add_argument("--data", action="append", required=True)
    e.add_argument("--seq", type=int, default=0)
    e.add_argument("--windows", help="FIRST:COUNT evaluation windows (offsets 0, seq, 2 seq, … in file order)")
    e.add_argument("--samples", help="FIRST:COUNT training samples (the seeded sampler)")
    e.add_argument("--seed", type=int, default=1337)
    e.add_argument("--micro", type=int, default=8, help="sequences per forward pass")
    e.add_argument("--expect", type=float, help="fail unless the loss is within --rtol of this")
    e.add_argument("--rtol", type=float, default=1e-4)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("train", help="train from an initial state and log losses")
    add_model_args(t)
    t.add_argument("--init", help="initial parameters (safetensors, HF names); default: random from --seed")
    t.add_argument("--resume", help="a checkpoint (parameters, optimizer.*, metadata step) to continue from")
    add_train_args(t)

    for name in ("eval", "logits"):
        e = sub.add_parser(name, help="loss over data windows of a checkpoint" if name == "eval"
                           else "logits of one token sequence under a checkpoint")
        add_model_args(e)
        e.add_argument("--ckpt", required=True, help="safetensors with every parameter (optimizer.* ignored)")
        if name == "eval":
            add_eval_args(e)
        else:
            e.add_argument("--tokens", required=True, help="comma-separated token ids")
            e.add_argument("--targets", help="comma-separated targets: also print the mean cross-entropy")
            e.add_argument("--out", help=".npy or .json file for the [T, vocab] logits")

    args = ap.parse_args(argv)
    try:
        if args.cmd == "train":
            train(args, log=None if args.quiet else print)
            return 0
        if args.cmd == "eval":
            return evaluate(args)
        return logits_cmd(args)
    except (FormatError, FileNotFoundError, ValueError) as e:
        print("gpt_ref.py: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
