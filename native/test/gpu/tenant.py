"""A compute tenant for the GPU scripts: runs WORKLOAD for SECONDS and prints one line per second
with the number of iterations completed in it (synchronized at the end of each second, so counts
are GPU work done). WORKLOAD: matmulN (N x N fp16 matmuls), tiny (torch.add on 4 KiB, thousands
of tiny launches per second) or pulseP (every 100 ms tick, as many 16384² matmuls, a dozen ms each,
as fill P % of the tick, then synchronize and sleep to the tick's end: a program of few, long
kernels; an iteration is a tick)."""
import sys, time, torch
workload, seconds = sys.argv[1], float(sys.argv[2])
dev = torch.device("cuda")
if workload.startswith("pulse"):
    percent = float(workload[len("pulse"):])
    a = torch.randn(16384, 16384, device=dev, dtype=torch.float16)
    b = torch.randn(16384, 16384, device=dev, dtype=torch.float16)
    torch.mm(a, b)
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    torch.mm(a, b)
    t1.record()
    torch.cuda.synchronize()
    kernels = max(1, round(percent / 100 * 100.0 / t0.elapsed_time(t1)))

    def step():
        tick_end = time.monotonic() + 0.1
        for _ in range(kernels):
            torch.mm(a, b)
        torch.cuda.synchronize()
        time.sleep(max(0.0, tick_end - time.monotonic()))

    per_sync = 1
elif workload.startswith("matmul"):
    n = int(workload[len("matmul"):])
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    step = lambda: torch.mm(a, b)
    per_sync = max(1, 2048 // max(1, (n // 1024) ** 3))  # about the same GPU time between syncs
else:  # tiny: a small-kernel loop
    x = torch.zeros(1024, device=dev)
    step = lambda: x.add_(1.0)
    per_sync = 256
for _ in range(2 if workload.startswith("pulse") else 20):
    step()
torch.cuda.synchronize()
print("ready", flush=True)
start = time.monotonic()
second, count = 1, 0
while True:
    for _ in range(per_sync):
        step()
    torch.cuda.synchronize()
    count += per_sync
    now = time.monotonic() - start
    while now >= second:
        print(count, flush=True)
        count, second = 0, second + 1
    if second > seconds:
        break
