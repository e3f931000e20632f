# A parent builds a large table of Python objects, then a pool of forked workers scans it: reading
# an object writes its reference count, so every page a worker reads is copied (copy-on-write).
import multiprocessing as mp
import sys

TABLE = None


def scan(k):
    total = 0
    for row in TABLE:          # touching each object increments and decrements its refcount
        total += row[1]
    return total + k


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    TABLE = [(str(i), i, float(i)) for i in range(n)]
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        print(sum(pool.map(scan, range(8), chunksize=1)))
