"""A PyTorch training loop that leaks GPU memory as real ones do: every step
keeps its output tensor in a list (4 MiB a step), so the caching allocator
keeps asking CUDA for more. scripts/gpu-selftest.sh runs it plain and under
`gpudoctor trace-alloc`, and compares the median step time of the two.

    python3 torch_leak.py [STEPS]      prints: steps=N median_step_ms=X kept_mib=Y
"""
import sys
import time

import torch


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        batch = torch.randn(1024, 1024, device="cuda")
        loss = model(batch).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        kept.append(model(batch).detach())  # the leak: 1024 x 1024 floats kept every step
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    kept_mib = sum(t.numel() * t.element_size() for t in kept) / 2**20
    print(f"steps={steps} median_step_ms={1000 * times[len(times) // 2]:.3f} kept_mib={kept_mib:.0f}")


if __name__ == "__main__":
    main()
