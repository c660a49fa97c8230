"""A PE that dies ends the job as in C: PE 1 leaves (`exit`: status 3 without finalizing;
`raise`: an uncaught exception, status 1, without the collective clean-up at exit) while the
others wait in a barrier; shmoerun names it and stops the others (tests/python/CMakeLists.txt
checks the line).   shmoerun -n 3 python3 dead_pe.py exit|raise"""

import os
import sys

import shmoe

shmoe.init()
if shmoe.my_pe() == 1:
    if sys.argv[1] == "exit":
        os._exit(3)
    raise RuntimeError("PE 1 fails on purpose")
shmoe.barrier_all()
raise SystemExit("the barrier returned although PE 1 is gone")
