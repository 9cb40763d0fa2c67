#!/usr/bin/python3
"""Checks of the PyTorch reference itself (gpt_ref.py): sampler, files, schedule, model, training.

    /usr/bin/python3 test/e2e/test_gpt_ref.py        # a few seconds; needs torch and numpy
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from types import SimpleNamespace

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt_ref  # noqa: E402


def mix_np(x):
    """splitmix64 again, with numpy's wrapping uint64 arithmetic (independent of gpt_ref.mix)."""
    with np.errstate(over="ignore"):
        x = np.uint64(x) + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return int(x ^ (x >> np.uint64(31)))


def write_raw(path, tokens):
    np.asarray(tokens, dtype="<u2").tofile(path)


def write_llmc(path, tokens, version=1, count=None):
    h = np.zeros(256, dtype="<i4")
    h[0], h[1], h[2] = 20240520, version, len(tokens) if count is None else count
    with open(path, "wb") as f:
        f.write(h.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())


def train_args(**kw):
    a = dict(vocab=256, context=64, layers=2, heads=4, width=64, double=False, init=None, resume=None,
             data=None, batch=4, micro=2, seq=16, steps=20, run_steps=None, lr=3e-3, schedule="cosine",
             warmup=2, min_lr=3e-4, clip=1.0, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, seed=1337,
             out=None, grads_out=None, final_out=None, ckpt_out=None, quiet=True)
    a.update(kw)
    return SimpleNamespace(**a)


class Sampler(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def test_splitmix64(self):
        # The first outputs of Vigna's splitmix64 seeded with 0: mix(0), mix(golden ratio).
        self.assertEqual(gpt_ref.mix(0), 0xE220A8397B1DCDAF)
        self.assertEqual(gpt_ref.mix(0x9E3779B97F4A7C15), 0x6E789E6AA1B965F4)
        for x in (1, 12345, 2**63, 2**64 - 1):
            self.assertEqual(gpt_ref.mix(x), mix_np(x))

    def test_below(self):
        self.assertEqual(gpt_ref.below(0, 10), 0)
        self.assertEqual(gpt_ref.below(2**63, 10), 5)
        self.assertEqual(gpt_ref.below(2**64 - 1, 10), 9)
        self.assertEqual(gpt_ref.below(2**64 - 1, 2**64 - 1), 2**64 - 2)

    def test_one_file_by_hand(self):
        write_raw(os.path.join(self.d, "a.bin"), range(100, 110))   # 10 tokens, seq 4: 6 starts
        data = gpt_ref.TokenData(os.path.join(self.d, "a.bin"), 42, 256)
        for index in range(50):
            pick = (mix_np(42 ^ mix_np(index)) * 6) >> 64
            x, y = data.sample(index, 4)
            self.assertEqual(x.tolist(), list(range(100 + pick, 104 + pick)))
            self.assertEqual(y.tolist(), list(range(101 + pick, 105 + pick)))

    def test_files_in_order(self):
        # 3 tokens (too short for seq 4: skipped), 10 (6 starts), llm.c 7 (3 starts), 5 (1 start)
        write_raw(os.path.join(self.d, "f0.bin"), [1, 2, 3])
        write_raw(os.path.join(self.d, "f1.bin"), range(10, 20))
        write_llmc(os.path.join(self.d, "f2.bin"), range(30, 37))
        write_raw(os.path.join(self.d, "f3.bin"), range(40, 45))
        data = gpt_ref.TokenData(os.path.join(self.d, "f*.bin"), 7, 256)
        self.assertEqual([len(t) for t in data.files], [3, 10, 7, 5])
        seen = set()
        for index in range(400):
            pick = (mix_np(7 ^ mix_np(index)) * 10) >> 64
            want = (1, pick) if pick < 6 else (2, pick - 6) if pick < 9 else (3, 0)
            self.assertEqual(data.locate(index, 4), want)
            f, o = want
            x, y = data.sample(index, 4)
            self.assertEqual(x.tolist(), data.files[f][o:o + 4].tolist())
            self.assertEqual(y.tolist(), data.files[f][o + 1:o + 5].tolist())
            seen.add(want)
        self.assertEqual(len(seen), 10)   # every start is reachable
        # evaluation windows: offsets 0, seq, ... while seq + 1 tokens fit, files in order
        self.assertEqual(data.window(0, 4)[0].tolist(), [10, 11, 12, 13])
        self.assertEqual(data.window(1, 4)[0].tolist(), [14, 15, 16, 17])
        self.assertEqual(data.window(2, 4)[1].tolist(), [31, 32, 33, 34])
        self.assertEqual(data.window(3, 4)[0].tolist(), [40, 41, 42, 43])
        with self.assertRaises(IndexError):
            data.window(4, 4)

    def test_bad_files(self):
        p = os.path.join(self.d, "x.bin")
        write_llmc(p, range(5), version=2)
        self.assertRaises(gpt_ref.FormatError, gpt_ref.read_tokens, p)
        write_llmc(p, range(5), count=6)
        self.assertRaises(gpt_ref.FormatError, gpt_ref.read_tokens, p)
        with open(p, "wb") as f:
            f.write(b"abc")
        self.assertRaises(gpt_ref.FormatError, gpt_ref.read_tokens, p)
        write_raw(p, [1, 2, 300, 4, 5, 6])
        data = gpt_ref.TokenData(p, 0, 256)
        self.assertRaises(gpt_ref.FormatError, data.window, 0, 4)
        write_raw(p, [1, 2, 3])
        self.assertRaises(gpt_ref.FormatError, gpt_ref.TokenData(p, 0).sample, 0, 4)
        self.assertRaises(FileNotFoundError, gpt_ref.TokenData, os.path.join(self.d, "none*.bin"), 0)


class Safetensors(unittest.TestCase):
    def test_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            t = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.array([1, 2], dtype=np.int32),
                 "s": np.array(2.5, dtype=np.float32)}
            gpt_ref.write_safetensors(p, t, {"step": 7})
            with open(p, "rb") as f:
                raw = f.read()
            n = struct.unpack("<Q", raw[:8])[0]
            self.assertEqual(n % 8, 0)
            self.assertEqual(json.loads(raw[8:8 + n])["__metadata__"], {"step": "7"})
            back, meta = gpt_ref.read_safetensors(p)
            self.assertEqual(meta, {"step": "7"})
            for k in t:
                self.assertEqual(back[k].dtype, t[k].dtype)
                np.testing.assert_array_equal(back[k], t[k])

    def test_bf16_and_errors(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            h = json.dumps({"x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
            with open(p, "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h + struct.pack("<HH", 0x3F80, 0xC040))  # 1.0, -3.0
            np.testing.assert_array_equal(gpt_ref.read_safetensors(p)[0]["x"], [1.0, -3.0])
            h = json.dumps({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode()
            with open(p, "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h + b"\0" * 8)
            self.assertRaises(gpt_ref.FormatError, gpt_ref.read_safetensors, p)
            with open(p, "wb") as f:
                f.write(struct.pack("<Q", 1000) + b"{}")
            self.assertRaises(gpt_ref.FormatError, gpt_ref.read_safetensors, p)


class Schedule(unittest.TestCase):
    def test_values(self):
        lr = gpt_ref.lr_at
        self.assertAlmostEqual(lr(0, 1.0, 100, "cosine", 10, 0.1), 0.1)
        self.assertAlmostEqual(lr(9, 1.0, 100, "cosine", 10, 0.1), 1.0)
        self.assertAlmostEqual(lr(10, 1.0, 100, "cosine", 10, 0.1), 1.0)
        self.assertAlmostEqual(lr(55, 1.0, 100, "cosine", 10, 0.1), 0.55)        # p = 1/2
        self.assertAlmostEqual(lr(55, 1.0, 100, "linear", 10, 0.1), 0.55)
        self.assertAlmostEqual(lr(99, 1.0, 100, "linear", 10, 0.0), 1 / 90)
        self.assertAlmostEqual(lr(40, 1.0, 100, "constant", 10), 1.0)
        self.assertAlmostEqual(lr(0, 1.0, 1, "cosine", 0, 0.0), 1.0)           # max(1, steps - W)
        self.assertAlmostEqual(lr(0, 2.0, 5, "cosine", 5, 0.0), 0.4)


def numpy_gpt2(params, tokens, heads):
    """GPT-2 forward in float64 numpy from the HF formulas, for comparison with gpt_ref.GPT2."""
    P = {k: np.asarray(v, np.float64) for k, v in params.items()}

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * P[name + ".weight"] + P[name + ".bias"]

    def conv(x, name):
        return x @ P[name + ".weight"] + P[name + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    T = len(tokens)
    C = P["wte.weight"].shape[1]
    hd = C // heads
    x = P["wte.weight"][tokens] + P["wpe.weight"][:T]
    layers = len({k.split(".")[1] for k in P if k.startswith("h.")})
    for i in range(layers):
        a = conv(ln(x, "h.%d.ln_1" % i), "h.%d.attn.c_attn" % i)
        y = np.zeros((T, C))
        for h in range(heads):
            q = a[:, h * hd:(h + 1) * hd]
            k = a[:, C + h * hd:C + (h + 1) * hd]
            v = a[:, 2 * C + h * hd:2 * C + (h + 1) * hd]
            s = q @ k.T / math.sqrt(hd)
            s[np.triu_indices(T, 1)] = -np.inf
            s = np.exp(s - s.max(-1, keepdims=True))
            y[:, h * hd:(h + 1) * hd] = (s / s.sum(-1, keepdims=True)) @ v
        x = x + conv(y, "h.%d.attn.c_proj" % i)
        x = x + conv(gelu(conv(ln(x, "h.%d.ln_2" % i), "h.%d.mlp.c_fc" % i)), "h.%d.mlp.c_proj" % i)
    return ln(x, "ln_f") @ P["wte.weight"].T


class Model(unittest.TestCase):
    def test_names_and_shapes(self):
        m = gpt_ref.GPT2()
        shapes = {k: list(v.shape) for k, v in m.state_dict().items()}
        self.assertEqual(sum(p.numel() for p in m.parameters()), 120576)   # planc check --summary
        self.assertEqual(len(shapes), 28)
        self.assertEqual(shapes["wte.weight"], [256, 64])
        self.assertEqual(shapes["wpe.weight"], [64, 64])
        self.assertEqual(shapes["h.1.attn.c_attn.weight"], [64, 192])
        self.assertEqual(shapes["h.1.attn.c_proj.weight"], [64, 64])
        self.assertEqual(shapes["h.0.mlp.c_fc.weight"], [64, 256])
        self.assertEqual(shapes["h.0.mlp.c_proj.weight"], [256, 64])
        self.assertEqual(shapes["ln_f.bias"], [64])
        self.assertEqual(sum(p.numel() for p in gpt_ref.GPT2(256, 128, 4, 4, 128).parameters()), 842496)

    def test_forward_matches_numpy(self):
        m = gpt_ref.GPT2(vocab=50, context=16, layers=2, heads=4, width=32)
        m.init_random(3)
        with torch.no_grad():   # make biases and norms non-trivial
            for n, p in m.named_parameters():
                if p.dim() == 1:
                    p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n))) * 0.1)
        tokens = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7]
        want = numpy_gpt2(gpt_ref.params_numpy(m), tokens, heads=4)
        m.double()
        got = m.logits(torch.tensor([tokens]))[0].detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)

    def test_strict_load(self):
        m = gpt_ref.GPT2()
        t = gpt_ref.params_numpy(m)
        gpt_ref.load_params(m, dict(t, **{"optimizer.exp_avg.wte.weight": t["wte.weight"]}), "ckpt")
        bad = dict(t)
        del bad["ln_f.bias"]
        self.assertRaisesRegex(gpt_ref.FormatError, "missing tensor ln_f.bias", gpt_ref.load_params, m, bad, "x")
        bad = dict(t, **{"h.0.ln_1.weight": np.zeros(3, np.float32)})
        self.assertRaisesRegex(gpt_ref.FormatError, "shape", gpt_ref.load_params, m, bad, "x")
        self.assertRaisesRegex(gpt_ref.FormatError, "unexpected", gpt_ref.load_params, m,
                               dict(t, extra=np.zeros(1)), "x")


class Training(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        rng = np.random.default_rng(0)
        # text-like data: a few repeated phrases with noise, so that the loss can fall quickly
        words = [b"the ", b"licensee ", b"software ", b"copyright ", b"of ", b"and ", b"to "]
        text = b"".join(words[i] for i in rng.integers(0, len(words), 6000))
        cls.data = os.path.join(d, "train.bin")
        write_raw(cls.data, np.frombuffer(text, np.uint8))
        m = gpt_ref.GPT2()
        m.init_random(5)
        cls.init = os.path.join(d, "init.safetensors")
        gpt_ref.write_safetensors(cls.init, gpt_ref.params_numpy(m))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_loss_falls(self):
        recs, _ = gpt_ref.train(train_args(data=[self.data], init=self.init, steps=20, batch=8, micro=4), log=None)
        self.assertEqual([r["step"] for r in recs], list(range(20)))
        self.assertAlmostEqual(recs[0]["loss"], math.log(256), delta=0.05)
        self.assertLess(recs[-1]["loss"], 3.0)

    def test_accumulation_is_a_mean(self):
        g = {}
        for micro in (4, 2, 1):
            out = self.path("g%d.safetensors" % micro)
            recs, _ = gpt_ref.train(train_args(data=[self.data], init=self.init, batch=4, micro=micro,
                                               run_steps=1, grads_out=out, double=True), log=None)
            g[micro] = (recs[0]["loss"], gpt_ref.read_safetensors(out)[0])
        for micro in (2, 1):
            self.assertAlmostEqual(g[micro][0], g[4][0], places=6)
            for k in g[4][1]:
                np.testing.assert_allclose(g[micro][1][k], g[4][1][k], rtol=1e-5, atol=1e-7)

    def test_first_step_is_adamw(self):
        # Step 0 of AdamW: m̂ = g, v̂ = g², so p1 = p0 (1 − lr wd) − lr g / (|g| + eps), with
        # decay on matrices only; clip 0: no clipping, grad_norm = ‖g‖.
        args = train_args(data=[self.data], init=self.init, run_steps=1, clip=0.0, double=True,
                          grads_out=self.path("g.safetensors"), final_out=self.path("p1.safetensors"))
        recs, _ = gpt_ref.train(args, log=None)
        p0 = gpt_ref.read_safetensors(self.init)[0]
        g = gpt_ref.read_safetensors(args.grads_out)[0]
        p1 = gpt_ref.read_safetensors(args.final_out)[0]
        lr = recs[0]["lr"]
        self.assertAlmostEqual(lr, 3e-3 / 2)
        norm = math.sqrt(sum(float((v.astype(np.float64) ** 2).sum()) for v in g.values()))
        self.assertAlmostEqual(recs[0]["grad_norm"], norm, delta=1e-5 * norm)
        for k in p0:
            g64, w = g[k].astype(np.float64), p0[k].astype(np.float64)
            wd = 0.1 if w.ndim >= 2 else 0.0
            want = w * (1 - lr * wd) - lr * g64 / (np.abs(g64) + 1e-8)
            np.testing.assert_allclose(p1[k], want, rtol=1e-5, atol=1e-6, err_msg=k)

    def test_clip(self):
        a = train_args(data=[self.data], init=self.init, run_steps=1, clip=1e-3, final_out=self.path("c.safetensors"))
        recs, _ = gpt_ref.train(a, log=None)
        self.assertGreater(recs[0]["grad_norm"], 1e-3)   # logged before clipping
        b = train_args(data=[self.data], init=self.init, run_steps=1, clip=0.0, final_out=self.path("n.safetensors"))
        recs_b, _ = gpt_ref.train(b, log=None)
        self.assertEqual(recs[0]["grad_norm"], recs_b[0]["grad_norm"])

    def test_resume_is_bitwise(self):
        common = dict(data=[self.data], init=self.init, steps=8, schedule="linear", warmup=3)
        whole, _ = gpt_ref.train(train_args(**common, ckpt_out=self.path("w.safetensors")), log=None)
        first, _ = gpt_ref.train(train_args(**common, run_steps=4, ckpt_out=self.path("h.safetensors")), log=None)
        rest, _ = gpt_ref.train(train_args(**dict(common, init=None), resume=self.path("h.safetensors"),
                                           ckpt_out=self.path("r.safetensors")), log=None)
        self.assertEqual(whole, first + rest)
        a, ma = gpt_ref.read_safetensors(self.path("w.safetensors"))
        b, mb = gpt_ref.read_safetensors(self.path("r.safetensors"))
        self.assertEqual(ma, {"step": "8"})
        self.assertEqual(mb, {"step": "8"})
        self.assertEqual(sorted(a), sorted(b))
        self.assertEqual(len(a), 28 * 3)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])

    def test_command_line(self):
        ref = os.path.join(HERE, "gpt_ref.py")
        out = self.path("cli.json")
        subprocess.run([sys.executable, ref, "train", "--init", self.init, "--data", self.data, "--batch", "4",
                        "--micro", "2", "--seq", "32", "--steps", "3", "--lr", "1e-3", "--schedule", "cosine",
                        "--warmup", "1", "--min-lr", "1e-4", "--clip", "1", "--weight-decay", "0.1",
                        "--out", out, "--final-out", self.path("cli_final.safetensors"), "--quiet"], check=True)
        with open(out) as f:
            steps = json.load(f)["steps"]
        self.assertEqual(len(steps), 3)
        r = subprocess.run([sys.executable, ref, "eval", "--ckpt", self.path("cli_final.safetensors"), "--data",
                            self.data, "--windows", "0:4", "--seq", "32"], check=True, capture_output=True, text=True)
        loss = json.loads(r.stdout)["loss"]
        self.assertTrue(0 < loss < 6)
        r = subprocess.run([sys.executable, ref, "eval", "--ckpt", self.path("cli_final.safetensors"), "--data",
                            self.data, "--windows", "0:4", "--seq", "32", "--expect", str(loss * 1.01)],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        r = subprocess.run([sys.executable, ref, "logits", "--ckpt", self.path("cli_final.safetensors"),
                            "--tokens", "116,104,101", "--layers", "3"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing tensor h.2.ln_1.weight", r.stderr)


if __name__ == "__main__":
    unittest.main()
