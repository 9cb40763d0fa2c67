#!/usr/bin/env python3
"""Training step time of a CIFAR-sized CNN: a planc-built executable against PyTorch, same
model, batch, threads and optimizer.

Usage: vision_step.py PLANC_BIN WORKDIR [threads]

The model: three stages of conv 3x3 (pad 1, no bias) → batchnorm → ReLU, with 2x2 max
pooling between them (32, 64, 128 channels), global average pooling and a linear head to
10 classes, on 3×32×32 images, batch 32, AdamW. planc trains 30 steps (the log's images/s
of steps 10–29); PyTorch (torch.set_num_threads, OPENBLAS_NUM_THREADS for planc) the same
30 steps, timed over the same ones. Prints ms per step and images/s for each. A benchmark:
nothing is asserted.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

PLANC, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
BATCH, STEPS, WARM = 32, 30, 10
os.makedirs(WORK, exist_ok=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import cnn_ref  # noqa: E402  (planc image files)

rng = np.random.default_rng(0)
cnn_ref.write_images(os.path.join(WORK, "cifar_like.bin"), rng.integers(0, 256, (512, 3, 32, 32), dtype=np.uint8),
                     rng.integers(0, 10, 512))
plan = os.path.join(WORK, "bench.plan")
with open(plan, "w") as f:
    f.write('''import "meshes/cpu_local.plan"
block stage(i: int, o: int) (x) {
  conv = conv2d(i, o, 3, padding: 1, bias: false)
  bn   = batchnorm(o)
  return relu(bn(conv(x)))
}
model cnn() (images, labels) {
  s1 = stage(3, 32)   s2 = stage(32, 64)   s3 = stage(64, 128)
  pool = maxpool(2)   gap = avgpool()      fc = linear(128, 10)
  return cross_entropy(fc(flatten(gap(s3(pool(s2(pool(s1(images)))))))), labels)
}
train bench {
  model = cnn  mesh = cpu1  data = images("%s/cifar_like.bin")
  batch = %d  parallel { data = dp }  optimizer = adamw(lr: 1e-3)  steps = %d
}
''' % (WORK, BATCH, STEPS))
env = dict(os.environ, OPENBLAS_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS))
exe, log = os.path.join(WORK, "bench"), os.path.join(WORK, "bench.jsonl")
subprocess.run([PLANC, "build", plan, "-o", exe], check=True)
subprocess.run([exe, "--quiet", "--log", log], check=True, env=env)
rates = [json.loads(l)["tokens_per_s"] for l in open(log) if '"loss"' in l][WARM:]
planc_ms = 1e3 * BATCH / (sum(rates) / len(rates))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(THREADS)


def stage(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU())


model = nn.Sequential(stage(3, 32), nn.MaxPool2d(2), stage(32, 64), nn.MaxPool2d(2), stage(64, 128),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
x = torch.rand(BATCH, 3, 32, 32)
y = torch.randint(0, 10, (BATCH,))
times = []
for s in range(STEPS):
    t = time.perf_counter()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    times.append(time.perf_counter() - t)
torch_ms = 1e3 * sum(times[WARM:]) / len(times[WARM:])
print("threads %d, batch %d of 3x32x32: planc %.1f ms/step (%.0f images/s), PyTorch %.1f ms/step "
      "(%.0f images/s), ratio %.2f" % (THREADS, BATCH, planc_ms, 1e3 * BATCH / planc_ms, torch_ms,
                                       1e3 * BATCH / torch_ms, planc_ms / torch_ms))
