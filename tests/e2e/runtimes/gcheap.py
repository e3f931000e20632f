# A job runner that keeps a large table of small containers live and builds many more per job:
# CPython's cyclic collector runs every few hundred allocations of containers and traverses the
# live ones each time it reaches the older generations, so most of the CPU time is the collector's.
live = [[i, {"k": i}] for i in range(400000)]
s = 0
for job in range(40):
    rows = [[j, (j,)] for j in range(100000)]
    s += len(rows)
print(s)
