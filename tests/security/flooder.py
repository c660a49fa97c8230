"""A stranger's flood of a config store (tests/security/store_flood.sh): opens connections to
HOST:PORT and never says hello, as many as this process's descriptors allow, reopening each one
the store closes, for SECONDS, then stops by itself. Prints how many it opened in all and the
most it held at once. Loopback only.

    python3 flooder.py HOST PORT SECONDS"""

import errno
import selectors
import socket
import sys
import time


def main():
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    assert host.startswith("127."), "the flood goes to loopback only"
    sel = selectors.DefaultSelector()
    held, opened, most = set(), 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        # Open until this process has no descriptor left (or a bound, for the selector's sake).
        while len(held) < 4000:
            try:
                s = socket.create_connection((host, port), timeout=1)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    break
                time.sleep(0.01)
                break
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            held.add(s)
            opened += 1
        most = max(most, len(held))
        # Drop (and so reopen) what the store closed; read and ignore its challenges.
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                held.discard(s)
                s.close()
    print(f"flooder: opened {opened} connections, held at most {most} at once", flush=True)


if __name__ == "__main__":
    main()
