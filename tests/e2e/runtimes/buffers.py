"""A job that builds a 64 MiB buffer per step and drops it: CPython takes it from malloc, glibc
maps it (above its mmap threshold) and free unmaps it, so every step faults 64 MiB in again."""


def step(n):
    buf = bytearray(64 << 20)
    buf[n] = 1
    return buf[n]


def main():
    total = 0
    for n in range(40):
        total += step(n)
    print(total)


main()
