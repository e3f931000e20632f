"""Numerical code whose 64 MiB temporaries are allocated and freed every step: numpy takes each
from malloc, glibc maps it (above its mmap threshold) and free unmaps it."""
import numpy as np

a = np.ones(8 << 20)            # 64 MiB of float64
total = 0.0
for step in range(40):
    b = a * 2.0                 # a fresh 64 MiB temporary, freed when b is rebound
    total += float(b[step])
print(total)
