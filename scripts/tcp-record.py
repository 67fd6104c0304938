#!/usr/bin/env python3
"""A recording TCP relay for interop captures (the host has no tcpdump).

    tcp-record.py LISTEN_PORT TARGET_PORT OUT.jsonl

Accepts connections on 127.0.0.1:LISTEN_PORT, connects each one to
127.0.0.1:TARGET_PORT and relays both ways, writing every chunk as one JSON
line: {"conn": N, "t": seconds, "dir": "c2s"|"s2c", "hex": "..."} plus
{"conn": N, "t": ..., "event": "open"|"eof-c2s"|"eof-s2c"|"close"|"reset-..."}.
"c2s" is what the connecting side (the client) sent. Runs until killed.
"""
import asyncio
import json
import sys
import time

T0 = time.monotonic()


class Log:
    def __init__(self, path):
        self.f = open(path, "w", buffering=1)

    def write(self, **rec):
        rec["t"] = round(time.monotonic() - T0, 6)
        self.f.write(json.dumps(rec) + "\n")


async def pump(conn, direction, reader, writer, log):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                log.write(conn=conn, event="eof-" + direction)
                try:
                    writer.write_eof()
                except OSError:
                    pass
                return
            log.write(conn=conn, dir=direction, hex=data.hex())
            writer.write(data)
            await writer.drain()
    except (ConnectionResetError, BrokenPipeError) as e:
        log.write(conn=conn, event="reset-" + direction, error=str(e))
        writer.transport.abort()


async def main():
    listen, target, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    log = Log(out)
    count = 0

    async def handle(creader, cwriter):
        nonlocal count
        count += 1
        conn = count
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", target)
        except OSError as e:
            log.write(conn=conn, event="refused", error=str(e))
            cwriter.transport.abort()
            return
        log.write(conn=conn, event="open")
        await asyncio.gather(
            pump(conn, "c2s", creader, swriter, log),
            pump(conn, "s2c", sreader, cwriter, log),
        )
        log.write(conn=conn, event="close")
        cwriter.close()
        swriter.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
