"""The compute limiter's state over time, read from containers' regions while their tenants run:
every PERIOD the sample the node agent last wrote (measured share y, card busy B, its period),
the limiter's cost estimate, refill rate, target and trim, the time its launches were held, and
the in-process sensor's share over the period (busy-ns growth / wall time). Offsets:
contract/region-layout.ts and native/src/limiter.h (device block 0).

    python3 trace.py SECONDS PERIOD_S NAME=REGION...
"""
import struct, sys, time

seconds, period = float(sys.argv[1]), float(sys.argv[2])
regions = [a.split("=", 1) for a in sys.argv[3:]]
BLOCK = 4096


def read(path):
    try:
        with open(path, "rb") as f:
            d = f.read(BLOCK + 256)
    except OSError:
        return None
    if len(d) < BLOCK + 256:
        return None
    busy, busy_n = struct.unpack_from("<QQ", d, BLOCK + 32)
    seq, t_ms, y, b, p = struct.unpack_from("<QQIII", d, BLOCK + 64)
    ls = BLOCK + 96
    cost_q8 = struct.unpack_from("<Q", d, ls + 24)[0]
    waited = struct.unpack_from("<Q", d, ls + 56)[0]
    rate, target, trim, samples = struct.unpack_from("<IIiI", d, ls + 72)
    return dict(busy=busy, seq=seq, y=y, B=b, p=p, cost=cost_q8 >> 8, waited=waited, rate=rate, target=target, trim=trim)


prev = {}
start = time.monotonic()
print("t_s  " + "  ".join(f"{n}: y/B(P) cost_us rate/target trim held% inproc%" for n, _ in regions))
while time.monotonic() - start < seconds:
    time.sleep(period)
    now = time.monotonic()
    cols = []
    for name, path in regions:
        r = read(path)
        if r is None:
            cols.append(f"{name}: -")
            continue
        last = prev.get(name)
        held = inproc = 0.0
        if last is not None:
            dt = (now - last[0]) * 1e9
            held = 100 * (r["waited"] - last[1]["waited"]) / dt
            inproc = 100 * (r["busy"] - last[1]["busy"]) / dt
        prev[name] = (now, r)
        cols.append(f"{name}: {r['y']/100:5.1f}/{r['B']/100:5.1f}({r['p']:3d}) {r['cost']/1000:7.1f} "
                    f"{r['rate']/100:5.1f}/{r['target']/100:5.1f} {r['trim']/100:+5.1f} {held:5.1f} {inproc:5.1f}")
    print(f"{now - start:4.1f} " + "  ".join(cols), flush=True)
