"""A PE that dies ends the job as in C: PE 1 exits (status 3) while the others wait in a
barrier; shmoerun names it and stops the others (tests/python/CMakeLists.txt checks the line)."""

import os

import shmoe

shmoe.init()
if shmoe.my_pe() == 1:
    os._exit(3)
shmoe.barrier_all()
raise SystemExit("the barrier returned although PE 1 is gone")
