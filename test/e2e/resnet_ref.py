#!/usr/bin/python3
"""stdlib/models/resnet.plan against ResNet as torchvision defines it, written here in plain
PyTorch (torchvision's BasicBlock, Bottleneck and ResNet: their layers, strides and
parameter names), without planc.

    resnet_ref.py NN_IR_FILE FUNCTION=MODEL...

NN_IR_FILE is `planc emit PLAN --stage nn`; each FUNCTION is a model's function in that IR
and MODEL `resnet18`, `resnet34` or `resnet50`. Checks that each function's parameters are
exactly the reference's named_parameters: the same names in the same order, the same shapes
(the linear head's weight transposed: planc stores [in, out]), and prints the total, which
must be the published count (resnet18 11,689,512; resnet34 21,797,672; resnet50
25,557,032). Exits 1 on any difference.
"""
import math
import re
import sys

import torch.nn as nn

PUBLISHED = {"resnet18": 11689512, "resnet34": 21797672, "resnet50": 25557032}


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))


class ResNet(nn.Module):
    def __init__(self, block, layers, classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), layers)):
            setattr(self, "layer%d" % (i + 1), self._make_layer(block, planes, n, 1 if i == 0 else 2))
        self.fc = nn.Linear(512 * block.expansion, classes)

    def _make_layer(self, block, planes, n, stride):
        blocks = [block(self.inplanes, planes, stride)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, n)]
        return nn.Sequential(*blocks)


REFERENCE = {"resnet18": lambda: ResNet(BasicBlock, [2, 2, 2, 2]),
             "resnet34": lambda: ResNet(BasicBlock, [3, 4, 6, 3]),
             "resnet50": lambda: ResNet(Bottleneck, [3, 4, 6, 3])}


def planc_params(ir, model):
    """(name, shape) of each nn.param argument of func.func @model, in order."""
    m = re.search(r"func\.func @%s\((.*?)\) -> " % re.escape(model), ir, re.S)
    if not m:
        sys.exit("no function @%s in the IR" % model)
    out = []
    for shape, name in re.findall(r"tensor<([0-9x]+)xf32> \{[^}]*nn\.param = \"([^\"]+)\"", m.group(1)):
        out.append((name, tuple(int(d) for d in shape.split("x"))))
    return out


def main():
    ir = open(sys.argv[1]).read()
    failures = 0
    for arg in sys.argv[2:]:
        function, _, model = arg.partition("=")
        ref = [(n, tuple(p.shape)) for n, p in REFERENCE[model]().named_parameters()]
        ref = [(n, s[::-1]) if n == "fc.weight" else (n, s) for n, s in ref]  # planc's [in, out]
        got = planc_params(ir, function)
        total = sum(math.prod(s) for _, s in got)
        if got != ref:
            failures += 1
            diff = [(a, b) for a, b in zip(got, ref) if a != b][:5]
            print("%s: %d parameters against the reference's %d; first differences (planc, reference): %s"
                  % (model, len(got), len(ref), diff))
        elif total != PUBLISHED[model]:
            failures += 1
            print("%s: %d parameter elements, published %d" % (model, total, PUBLISHED[model]))
        else:
            print("%s: %d tensors, names and shapes as torchvision's, %d parameters (published %d)"
                  % (model, len(got), total, PUBLISHED[model]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
