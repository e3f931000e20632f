"""About SECONDS of work: a 32 MiB bytearray per step, touched and dropped."""
import sys
import time


def step(n):
    b = bytearray(32 << 20)
    b[n] = 1
    return b[n]


end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
total = n = 0
while time.monotonic() < end:
    total += step(n % 1000)
    n += 1
print(total)
