"""A small PyTorch training loop used by the GPU tests and benchmarks/capture_overhead.py.

Run it plain, under `ktrace run`, or with --torch-profiler (which profiles steps [A, B) with
torch.profiler and writes the kernel count). Prints one JSON line: step times, kernels seen.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    """Train a few steps of an MLP with pinned and pageable copies, syncs and NVTX ranges."""
    import torch

    import ktrace

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--window", default="5:15", help="steps A:B profiled by --torch-profiler")
    p.add_argument("--torch-profiler", action="store_true")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    args = p.parse_args()
    a, b = (int(x) for x in args.window.split(":"))
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = [torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU()) for _ in range(args.layers)]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    pinned = torch.randn(256, args.width).pin_memory()
    pageable = torch.randn(256, args.width)
    prof = None
    times: list[float] = []
    for step in range(args.steps):
        if args.torch_profiler and step == a:
            prof = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
            )
            prof.__enter__()
        if args.torch_profiler and step == b and prof is not None:
            prof.__exit__(None, None, None)
        ktrace.step()
        t0 = time.perf_counter()
        x = (pinned if step % 2 == 0 else pageable).to(dev, non_blocking=step % 2 == 0)
        torch.cuda.nvtx.range_push("nvtx_range")
        with ktrace.annotate("forward"):
            loss = model(x).square().mean()
        torch.cuda.nvtx.range_pop()
        with ktrace.annotate("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        loss.item()  # DtoH copy + stream sync
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if prof is not None and args.steps <= b:
        prof.__exit__(None, None, None)
    kernels = None
    if prof is not None:
        kernels = sum(
            1
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
            and "memcpy" not in e.name.lower()
            and "memset" not in e.name.lower()
        )
    print(json.dumps({"step_s": times, "window": [a, b], "torch_profiler_kernels": kernels}))


if __name__ == "__main__":
    main()
