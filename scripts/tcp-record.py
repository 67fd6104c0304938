#!/usr/bin/env python3
"""A recording TCP relay for interop captures (the host has no tcpdump).

    tcp-record.py LISTEN_PORT TARGET_PORT OUT.jsonl
    tcp-record.py LISTEN_PORT TARGET_PORT --tag-file FILE DIR

Accepts connections on 127.0.0.1:LISTEN_PORT, connects each one to
127.0.0.1:TARGET_PORT and relays both ways, writing every chunk as one JSON
line: {"conn": N, "t": seconds, "dir": "c2s"|"s2c", "hex": "..."} plus
{"conn": N, "t": ..., "event": "open"|"eof-c2s"|"eof-s2c"|"close"|"reset-..."}.
"c2s" is what the connecting side (the client) sent. Runs until killed.

With --tag-file, each connection goes to DIR/<tag>.jsonl, the tag being the
contents of FILE when the connection arrives (connections numbered from 1 in
each file): one recorder can stay up across runs, so that a peer that
connects between two runs always finds a listener (and is refused cleanly by
the missing target) instead of a closed port.
"""
import asyncio
import json
import sys
import time

T0 = time.monotonic()


class Log:
    def __init__(self, path, mode="w"):
        self.f = open(path, mode, buffering=1)

    def write(self, **rec):
        rec["t"] = round(time.monotonic() - T0, 6)
        self.f.write(json.dumps(rec) + "\n")


class Tagged:
    """Logs of several runs: the file and connection numbers of each tag."""

    def __init__(self, tag_file, directory):
        self.tag_file, self.directory = tag_file, directory
        self.logs, self.counts = {}, {}

    def open(self):
        try:
            with open(self.tag_file) as f:
                tag = f.read().strip() or "untagged"
        except OSError:
            tag = "untagged"
        if tag not in self.logs:
            self.logs[tag] = Log(f"{self.directory}/{tag}.jsonl", "a")
            self.counts[tag] = 0
        self.counts[tag] += 1
        return self.logs[tag], self.counts[tag]


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
    listen, target = int(sys.argv[1]), int(sys.argv[2])
    if sys.argv[3] == "--tag-file":
        tagged = Tagged(sys.argv[4], sys.argv[5])
    else:
        single = Log(sys.argv[3])
        count = [0]

        class One:
            def open(self):
                count[0] += 1
                return single, count[0]

        tagged = One()

    async def handle(creader, cwriter):
        log, conn = tagged.open()
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", target)
        except OSError as e:
            # Close with FIN, not RST: a forwarder in between (the rig's guestfwd relay)
            # must end quietly, or it may write its traceback into the connection.
            log.write(conn=conn, event="refused", error=str(e))
            cwriter.close()
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
