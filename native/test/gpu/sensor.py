"""What NVML reports for one process while it runs: polls per-process utilization (both NVML
calls where the driver has them) and the card's utilization every 50 ms for SECONDS, and prints
one line: samples, NVML's sample period, the process's mean smUtil from each call, the card's
mean utilization. The compute limiter steers by these figures (native/COMPUTE.md, "The sensor").

    python3 sensor.py PID SECONDS [SKIP_SECONDS]
"""
import statistics, sys, time
import pynvml

pid, seconds = int(sys.argv[1]), float(sys.argv[2])
skip = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
start = time.time()
last_v1 = last_info = 0
util_v1, stamps, util_info, card = [], [], [], []
info_error = None
while time.time() - start < seconds:
    counting = time.time() - start >= skip
    try:
        for s in pynvml.nvmlDeviceGetProcessUtilization(h, last_v1):
            last_v1 = max(last_v1, s.timeStamp)
            if s.pid == pid and counting:
                util_v1.append(s.smUtil)
                stamps.append(s.timeStamp)
    except pynvml.NVMLError:
        pass  # NOT_FOUND: nothing new since the cursor
    try:
        info = pynvml.nvmlDeviceGetProcessesUtilizationInfo(h, last_info)
        for s in info.procUtilArray[: info.processSamplesCount] if hasattr(info, "procUtilArray") else info:
            last_info = max(last_info, s.timeStamp)
            if s.pid == pid and counting:
                util_info.append(s.smUtil)
    except (pynvml.NVMLError, AttributeError, TypeError) as e:
        info_error = info_error or type(e).__name__ + ": " + str(e)
    if counting:
        card.append(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
    time.sleep(0.05)

def mean(xs):
    return f"{statistics.mean(xs):.1f}" if xs else "-"

gaps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
period = f"{statistics.median(gaps) / 1000:.0f} ms" if gaps else "-"
print(f"samples {len(util_v1)} period {period} smUtil(v1) {mean(util_v1)} "
      f"smUtil(info) {mean(util_info) if util_info else (info_error or '-')} card {mean(card)}")
