"""A compute tenant for the GPU scripts: runs WORKLOAD for SECONDS and prints one line per second
with the number of iterations completed in it (synchronized at the end of each second, so counts
are GPU work done). WORKLOAD: matmulN (N x N fp16 matmuls) or tiny (torch.add on 4 KiB, thousands
of tiny launches per second)."""
import sys, time, torch
workload, seconds = sys.argv[1], float(sys.argv[2])
dev = torch.device("cuda")
if workload.startswith("matmul"):
    n = int(workload[len("matmul"):])
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    step = lambda: torch.mm(a, b)
    per_sync = max(1, 2048 // max(1, (n // 1024) ** 3))  # about the same GPU time between syncs
else:  # tiny: a small-kernel loop
    x = torch.zeros(1024, device=dev)
    step = lambda: x.add_(1.0)
    per_sync = 256
for _ in range(20):
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
