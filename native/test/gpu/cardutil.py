"""The card's own busy share, one line per second: the mean of nvmlDeviceGetUtilizationRates().gpu
polled every 50 ms. With one process on the card this is that process's share of the card's
time, what vcuda-core limits (a throughput share reads higher: a partly idle card runs each
kernel faster, BENCHMARKS.md "Real GPU").

    python3 cardutil.py SECONDS
"""
import sys, time
import pynvml

seconds = float(sys.argv[1])
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
start = time.monotonic()
second, values = 1, []
while True:
    now = time.monotonic() - start
    if now >= second:
        print(f"{sum(values) / len(values) if values else 0:.1f}", flush=True)
        second, values = second + 1, []
        if second > seconds:
            break
    values.append(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
    time.sleep(0.05)
