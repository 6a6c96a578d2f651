#!/usr/bin/env python3
"""The room benchmark's baseline bot: slixmpp and aiohttp, the stack of the
legacy Python tools and of Hermes's XMPP adapter, doing only what a room
bot must. It joins ROOM as NICK, forwards each live groupchat message that
names NICK to Hermes's API server (`POST /v1/chat/completions` with
`X-Hermes-Session-Id`, the request the real bot makes) and posts the reply.
No policy, no writes.

  room_baseline.py --jid J --password P --room R --nick N --host H --port P
                   --api-url URL --api-key K --session S --log FILE

One log line per step (stanza in, turn request out, reply in, stanza out),
each `MONOTONIC STEP NICK`, so the bench takes its own share as it takes
the real bot's. Prints `joined` on stdout once seated; ends on SIGTERM.
"""

import argparse
import asyncio
import logging
import re
import signal
import sys
import time

import aiohttp
import slixmpp


class Baseline(slixmpp.ClientXMPP):
    def __init__(self, a, log):
        super().__init__(a.jid, a.password, plugin_config={
            "feature_mechanisms": {"unencrypted_scram": True}})
        self.a, self.log = a, log
        # The bench's ejabberd listens on loopback without TLS.
        self.enable_plaintext = True
        self.enable_starttls = False
        self.enable_direct_tls = False
        self.use_ipv6 = False
        self.register_plugin("xep_0045")
        self.mention = re.compile(rf"\b{re.escape(a.nick)}\b", re.I)
        self.http = None
        self.joined = False
        self.add_event_handler("session_start", self.on_start)
        self.add_event_handler("groupchat_message", self.on_message)

    def note(self, step, nick):
        self.log.write(f"{time.monotonic():.6f} {step} {nick}\n")

    async def on_start(self, _):
        self.http = aiohttp.ClientSession(headers={
            "Authorization": f"Bearer {self.a.api_key}",
            "X-Hermes-Session-Id": self.a.session})
        self.send_presence()
        await self.plugin["xep_0045"].join_muc_wait(self.a.room, self.a.nick, maxstanzas=0, timeout=20)
        self.joined = True
        print("joined", flush=True)

    async def on_message(self, msg):
        nick = msg["mucnick"]
        if (not self.joined or nick == self.a.nick or msg.xml.find("{urn:xmpp:delay}delay") is not None
                or not self.mention.search(msg["body"])):
            return
        self.note("in", nick)
        body = {"model": "hermes-agent", "stream": False,
                "messages": [{"role": "user", "content": f"{nick}: {msg['body']}"}]}
        self.note("out", nick)
        async with self.http.post(f"{self.a.api_url}/v1/chat/completions", json=body) as r:
            answer = await r.json()
        self.note("reply", nick)
        self.send_message(mto=self.a.room, mbody=answer["choices"][0]["message"]["content"],
                          mtype="groupchat")
        self.note("sent", nick)


async def amain(a):
    with open(a.log, "w", buffering=1) as log:
        bot = Baseline(a, log)
        bot.connect(a.host, a.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        bot.disconnect()
        await asyncio.wait([bot.disconnected], timeout=3)
        if bot.http:
            await bot.http.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("jid", "password", "room", "nick", "host", "api-url", "api-key", "session", "log"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(amain(a))


if __name__ == "__main__":
    sys.exit(main())
