#!/usr/bin/env python3
"""A scripted agent bot for the loop guard's end-to-end tests.

  bot: join ROOM as NICK (a real XMPP client, slixmpp) and, for every
       groupchat message, ask the guard (`xmpp-session-bridge admit`) whether
       to answer; answer whenever it says so, naming the agents in --name
       (a bot that always answers, the worst case). Live and replayed
       (delayed, XEP-0203) messages both go to the guard, one at a time in
       arrival order. Prints one JSON line per decision:
       {"event":"decision","agent","nick","jid","body","delayed",
        "human_origin","reply","reason","hops"}; {"event":"READY"} once
       joined. With --clock-file and --clock-step S it moves the test clock
       (SESSION_SWITCH_TEST_CLOCK_FILE) S seconds on before each reply, so
       replies are S seconds apart for the guard.
  say: join ROOM as NICK, post one message (with the human-origin marker
       when --marker; an XEP-0461 reply with --reply-to/--reply-id, its
       --quote before the body as the XEP-0428 fallback), wait for its
       reflection, leave. A person, or a forger.

The real JID of a sender is read from the room's presence (a
non-anonymous room shows it to every occupant) when the message arrives.
"""

import argparse
import asyncio
import fcntl
import json
import os
import subprocess
import sys

import slixmpp
from slixmpp.xmlstream import ET

MARKER_NS = "urn:agentsmeeting:session-switch:0"


def out(**kw):
    print(json.dumps(kw, ensure_ascii=False), flush=True)


class Client(slixmpp.ClientXMPP):
    def __init__(self, a):
        super().__init__(a.jid, a.password, plugin_config={
            "feature_mechanisms": {"unencrypted_scram": True}})
        self.a = a
        self.enable_plaintext = True
        self.enable_starttls = False
        self.enable_direct_tls = False
        self.use_ipv6 = False
        for p in ("xep_0030", "xep_0045", "xep_0199"):
            self.register_plugin(p)
        self.queue = asyncio.Queue()
        self.replies = 0
        self.add_event_handler("session_start", self.on_start)
        self.add_event_handler("groupchat_message", self.on_gc)

    async def on_start(self, _):
        self.send_presence()
        await self.plugin["xep_0045"].join_muc_wait(
            self.a.room, self.a.nick, maxstanzas=self.a.history, timeout=20)
        out(event="READY")
        if self.a.mode == "say":
            msg = self.make_message(mto=self.a.room, mbody=self.said_body(),
                                    mtype="groupchat")
            if self.a.marker:
                msg.append(ET.Element("{%s}human-origin" % MARKER_NS))
            if self.a.reply_to or self.a.reply_id:
                # XEP-0461, with the quote as an XEP-0428 fallback.
                reply = ET.Element("{urn:xmpp:reply:0}reply")
                if self.a.reply_to:
                    reply.set("to", self.a.reply_to)
                if self.a.reply_id:
                    reply.set("id", self.a.reply_id)
                msg.append(reply)
                if self.a.quote is not None:
                    fallback = ET.Element("{urn:xmpp:fallback:0}fallback",
                                          {"for": "urn:xmpp:reply:0"})
                    end = len(self.said_body()) - len(self.a.body)
                    ET.SubElement(fallback, "{urn:xmpp:fallback:0}body",
                                  {"start": "0", "end": str(end)})
                    msg.append(fallback)
            msg.send()
            return
        asyncio.ensure_future(self.worker())

    def said_body(self):
        """The body as posted: a reply's quote first, where there is one."""
        if self.a.quote is None:
            return self.a.body
        return "> %s\n%s" % (self.a.quote, self.a.body)

    def on_gc(self, msg):
        if msg["type"] != "groupchat" or not msg["body"]:
            return
        nick = msg["mucnick"]
        if self.a.mode == "say":
            if nick == self.a.nick and msg["body"] == self.said_body():
                out(event="said")
                self.disconnect()
            return
        real = self.plugin["xep_0045"].get_jid_property(self.a.room, nick, "jid")
        self.queue.put_nowait({
            "nick": nick,
            "jid": str(real.bare) if real else None,
            "body": msg["body"],
            "delayed": msg.xml.find("{urn:xmpp:delay}delay") is not None,
            "human_origin": msg.xml.find("{%s}human-origin" % MARKER_NS) is not None,
        })

    async def worker(self):
        while True:
            m = await self.queue.get()
            d = await asyncio.get_running_loop().run_in_executor(None, self.admit, m)
            out(event="decision", agent=self.a.agent, **m, **d)
            if d.get("reply"):
                self.replies += 1
                self.step_clock()
                body = "%s: reply %d from %s" % (
                    " and ".join(self.a.name), self.replies, self.a.nick)
                self.send_message(mto=self.a.room, mbody=body, mtype="groupchat")

    def admit(self, m):
        cmd = [self.a.bridge, "--config", self.a.config, "--db", self.a.db]
        cmd += ["--json", "admit",
               "--agent", self.a.agent, "--from", "%s/%s" % (self.a.room, m["nick"])]
        if m["jid"]:
            cmd += ["--jid", m["jid"]]
        if m["delayed"]:
            cmd.append("--delayed")
        if m["human_origin"]:
            cmd.append("--human-origin")
        cmd += ["--", m["body"]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return {"reply": False, "reason": "error", "hops": None,
                    "error": p.stderr.strip()}
        return json.loads(p.stdout)

    def step_clock(self):
        if not self.a.clock_file or not self.a.clock_step:
            return
        # Bots step the one clock of the test; the CLI reads the file at
        # any moment, so it is replaced whole (rename), never rewritten in
        # place, and the read-modify-write is serialised by a lock file.
        with open(self.a.clock_file + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(self.a.clock_file) as f:
                now = float(f.read().strip()) + self.a.clock_step
            tmp = "%s.%d" % (self.a.clock_file, os.getpid())
            with open(tmp, "w") as f:
                f.write(repr(now))
            os.replace(tmp, self.a.clock_file)


async def amain(a):
    c = Client(a)
    c.connect(a.host, a.port)
    await asyncio.wait([c.disconnected], timeout=a.timeout)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["bot", "say"])
    ap.add_argument("--jid", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--room", required=True)
    ap.add_argument("--nick", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--history", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600)
    # bot
    ap.add_argument("--agent")
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--bridge")
    ap.add_argument("--config")
    ap.add_argument("--db")
    ap.add_argument("--clock-file")
    ap.add_argument("--clock-step", type=float, default=0)
    # say
    ap.add_argument("--body")
    ap.add_argument("--marker", action="store_true")
    ap.add_argument("--reply-to", help="XEP-0461: the replied message's occupant JID")
    ap.add_argument("--reply-id", help="XEP-0461: the replied message's id")
    ap.add_argument("--quote", help="the replied text, put before the body as its fallback")
    a = ap.parse_args()
    sys.exit(asyncio.run(amain(a)))


if __name__ == "__main__":
    main()
