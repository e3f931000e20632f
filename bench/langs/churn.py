"""STEPS steps of fixed work: a 32 MiB bytearray per step, touched and dropped."""
import sys


def step(n):
    b = bytearray(32 << 20)
    b[n] = 1
    return b[n]


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
total = 0
for n in range(steps):
    total += step(n % 1000)
print(total)
