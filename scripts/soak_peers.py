#!/usr/bin/env python3
"""Misbehaving soak clients for scripts/soak.sh, on plain TCP sockets.

  soak_peers.py reset-mid-fpdu HOST PORT     valid MPA startup, half an FPDU, then a reset
  soak_peers.py never-start HOST PORT        connects, sends half a Request, never finishes;
                                             prints how long the server took to close it
  soak_peers.py flood HOST PORT N SECONDS    N half-open connections held for SECONDS

Each prints one line and exits 0 when the server behaved as expected, 1 otherwise.
"""
import socket
import struct
import sys
import time

# The soak client's private data (crates/iwarp-cli/src/soak/wire.rs, Hello).
HELLO = b"SOAK" + struct.pack(">QIIHH", 1, 999, 4096, 1, 0)


def request(private_data: bytes) -> bytes:
    # RFC 5044 §7.1.3: key, flags (C: CRC), revision 1, PD_Length.
    return b"MPA ID Req Frame" + bytes([0x40, 1]) + struct.pack(">H", len(private_data)) + private_data


def connect(host: str, port: int) -> socket.socket:
    s = socket.create_connection((host, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset_mid_fpdu(host: str, port: int) -> int:
    s = connect(host, port)
    s.sendall(request(HELLO))
    reply = s.recv(20)
    if not reply.startswith(b"MPA ID Rep Frame") or reply[16] & 0x20:
        print(f"reset-mid-fpdu: no accepting Reply: {reply!r}")
        return 1
    # A Send FPDU announcing 1000 octets of ULPDU, cut after 300, then RST.
    s.sendall(struct.pack(">H", 1000) + bytes([0x41, 0x43]) + bytes(296))
    time.sleep(0.2)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print("reset-mid-fpdu: startup done, 300 of 1002 FPDU octets sent, connection reset")
    return 0


def never_start(host: str, port: int) -> int:
    s = connect(host, port)
    s.sendall(request(HELLO)[:10])
    start = time.monotonic()
    s.settimeout(60)
    try:
        data = s.recv(100)
    except ConnectionResetError:
        data = b""
    except socket.timeout:
        print("never-start: still open after 60 s")
        return 1
    waited = time.monotonic() - start
    if data:
        print(f"never-start: the server answered a half Request: {data!r}")
        return 1
    print(f"never-start: closed by the server after {waited:.1f} s, nothing sent back")
    return 0


def flood(host: str, port: int, n: int, seconds: float) -> int:
    socks = []
    for _ in range(n):
        socks.append(connect(host, port))
    print(f"flood: {n} half-open connections open", flush=True)
    time.sleep(seconds)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    print(f"flood: held {seconds:.0f} s; {closed} of {n} closed by the server meanwhile")
    return 0


def main() -> int:
    cmd, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if cmd == "reset-mid-fpdu":
        return reset_mid_fpdu(host, port)
    if cmd == "never-start":
        return never_start(host, port)
    if cmd == "flood":
        return flood(host, port, int(sys.argv[4]), float(sys.argv[5]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
