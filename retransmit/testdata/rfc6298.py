#!/usr/bin/env python3
"""Golden values for the retransmit package, derived from RFC 6298.

This script is an independent model of RFC 6298 written from the RFC text,
not from the Go code. It writes golden.json next to itself; the Go tests in
golden_test.go replay every case and compare. Regenerate with:

    python3 retransmit/testdata/rfc6298.py

All times are integer nanoseconds. Divisions round down (Python's // on
non-negative integers), matching the rounding the package documents:

    first sample R: SRTT = R, RTTVAR = R // 2
    later sample R: RTTVAR = (3*RTTVAR + |SRTT - R|) // 4 (old SRTT),
                    SRTT = (7*SRTT + R) // 8
    rfc6298: RTO = min(max, max(min, SRTT + max(G, 4*RTTVAR)))
    linux:   RTO = min(max, SRTT + max(G, 4*RTTVAR, min))
    timeout: RTO = min(max, 2*RTO) (RFC 6298 5.5); a valid sample recomputes.

The tracker model follows RFC 6298 section 5 with one timer: started by a
send when nothing was outstanding (5.1), stopped when nothing is left (5.2),
restarted when the oldest outstanding message is acknowledged (5.3), and on
expiry (5.4-5.6) it retransmits the oldest outstanding message, doubles the
RTO and restarts. Karn's rule: no sample from a retransmitted message unless
the ack names its latest transmission. Give up when the oldest message has
been outstanding give_up ns (the timer is armed for that instant if sooner),
or when it times out after max_retx retransmissions. A wheel timer armed at
a tick boundary t for d fires at the first tick boundary >= t + d, and at
least one tick after t.
"""

import json
import os
import random

MS = 1_000_000
S = 1000 * MS


class Est:
    def __init__(self, initial=S, rto_min=200 * MS, rto_max=60 * S, g=MS, variant="rfc6298"):
        self.min, self.max, self.g, self.variant = rto_min, rto_max, g, variant
        self.srtt = self.rttvar = self.latest = 0
        self.samples = 0
        self.backoffs = 0
        self.rto = min(max(initial, rto_min), rto_max)

    def sample(self, r):
        if r < 0:
            return False
        if self.samples == 0:
            self.srtt, self.rttvar = r, r // 2
        else:
            self.rttvar = (3 * self.rttvar + abs(self.srtt - r)) // 4
            self.srtt = (7 * self.srtt + r) // 8
        self.samples += 1
        self.latest = r
        self.backoffs = 0
        if self.variant == "linux":
            self.rto = min(self.max, self.srtt + max(self.g, 4 * self.rttvar, self.min))
        else:
            self.rto = min(self.max, max(self.min, self.srtt + max(self.g, 4 * self.rttvar)))
        return True

    def timeout(self):
        self.backoffs += 1
        self.rto = min(self.max, 2 * self.rto)

    def state(self):
        return {"srtt": self.srtt, "rttvar": self.rttvar, "rto": self.rto,
                "latest": self.latest, "backoffs": self.backoffs}


def est_case(name, ops, **cfg):
    e = Est(**cfg)
    steps = []
    for op in ops:
        if op[0] == "sample":
            ok = e.sample(op[1])
            steps.append({"op": "sample", "rtt": op[1], "ok": ok, "want": e.state()})
        else:
            e.timeout()
            steps.append({"op": "timeout", "want": e.state()})
    out = {"name": name, "config": {k: v for k, v in cfg.items()}, "steps": steps}
    return out


def estimator_cases():
    cases = [
        est_case("first_sample", [("sample", 100 * MS)]),
        est_case("initial_then_timeouts", [("timeout",)] * 3),
        est_case("clamp_min", [("sample", 10 * MS), ("sample", 12 * MS), ("sample", 9 * MS)]),
        est_case("clamp_max", [("sample", 50 * S), ("sample", 70 * S)]),
        est_case("granularity_dominates", [("sample", 500 * MS)] * 12, g=100 * MS, rto_min=MS),
        est_case("backoff_ladder",
                 [("timeout",)] * 8 + [("sample", 250 * MS), ("timeout",), ("timeout",)]),
        est_case("backoff_ladder_after_sample",
                 [("sample", 80 * MS)] + [("timeout",)] * 10 + [("sample", 90 * MS)]),
        est_case("rfc_stable_path", [("sample", 300 * MS)] * 20),
        est_case("linux_stable_path", [("sample", 300 * MS)] * 20, variant="linux"),
        est_case("linux_clamp_max", [("sample", 59 * S), ("timeout",)], variant="linux"),
        est_case("odd_nanoseconds",
                 [("sample", r) for r in (1, 3, 7, 2, 0, 1_000_000_007, 5, 999)],
                 rto_min=1, g=1, initial=5),
        est_case("negative_ignored", [("sample", 40 * MS), ("timeout",), ("sample", -1)]),
        est_case("initial_clamped_to_min", [("timeout",)], initial=100 * MS),
        est_case("initial_clamped_to_max", [("timeout",)], initial=10 * S, rto_max=3 * S),
    ]
    rnd = random.Random(6298)
    for i, variant in enumerate(["rfc6298", "linux", "rfc6298"]):
        ops = []
        for _ in range(60):
            if rnd.random() < 0.3:
                ops.append(("timeout",))
            else:
                ops.append(("sample", rnd.randrange(0, 3 * S)))
        cases.append(est_case("random_%d_%s" % (i, variant), ops, variant=variant,
                              g=rnd.choice([1, MS, 10 * MS]), rto_min=rnd.choice([1, 200 * MS]),
                              rto_max=rnd.choice([5 * S, 60 * S])))
    return cases


class Tracker:
    def __init__(self, tick=MS, max_retx=10, give_up=30 * S, window=1024, **est):
        self.tick = tick
        self.est = Est(g=est.pop("g", tick), **est)
        self.max_retx, self.give_up, self.window = max_retx, give_up, window
        self.msgs = {}  # seq -> dict(first, last, retx, acked)
        self.head = self.next = None
        self.closed = False
        self.fire = None  # tick the timer fires at, or None
        self.actions = []

    def outstanding(self):
        return sum(1 for m in self.msgs.values() if not m["acked"])

    def arm(self, now):
        assert now % self.tick == 0
        d = min(self.est.rto, self.msgs[self.head]["first"] + self.give_up - now)
        at = -(-(now + d) // self.tick) * self.tick  # ceil to the tick
        self.fire = max(at, now + self.tick)

    def expire(self, now):
        self.fire = None
        m = self.msgs[self.head]
        if now - m["first"] >= self.give_up:
            limit = "unacked_timeout"
        elif m["retx"] >= self.max_retx:
            limit = "max_retransmits"
        else:
            limit = None
        if limit:
            self.closed = True
            self.actions.append({"at": now, "kind": "giveup", "seq": self.head, "limit": limit,
                                 "retx": m["retx"], "unacked": now - m["first"]})
            return
        m["retx"] += 1
        m["last"] = now
        self.est.timeout()
        self.arm(now)
        self.actions.append({"at": now, "kind": "retransmit", "seq": self.head,
                             "attempt": m["retx"]})

    def advance(self, to):
        while self.fire is not None and self.fire <= to:
            self.expire(self.fire)

    def drop_acked_head(self):
        while self.head != self.next and self.msgs[self.head]["acked"]:
            del self.msgs[self.head]
            self.head += 1

    def sent(self, seq, now):
        if self.closed:
            return "closed"
        if self.next is None:
            self.head = self.next = seq
        elif seq != self.next:
            return "sequence"
        if self.next - self.head >= self.window:
            return "window_full"
        self.msgs[seq] = {"first": now, "last": now, "retx": 0, "acked": False}
        self.next += 1
        if self.outstanding() == 1:
            self.arm(now)
        return "ok"

    def after_ack(self, restart, now):
        if self.outstanding() == 0:
            self.fire = None
        elif restart:
            self.arm(now)

    def ack(self, seq, now, attempt=None):
        if self.closed or self.head is None or not (self.head <= seq < self.next):
            return False
        m = self.msgs[seq]
        if m["acked"]:
            return False
        m["acked"] = True
        if (attempt is None and m["retx"] == 0) or (attempt is not None and attempt == m["retx"]):
            self.est.sample(now - m["last"])
        head_moved = seq == self.head
        self.drop_acked_head()
        self.after_ack(head_moved, now)
        return True

    def ack_through(self, seq, now):
        if self.closed or self.head is None or not (self.head <= seq < self.next):
            return 0
        n, rtt = 0, None
        for s in range(self.head, seq + 1):
            m = self.msgs[s]
            if not m["acked"]:
                m["acked"] = True
                n += 1
                if m["retx"] == 0:
                    rtt = now - m["last"]
        if rtt is not None:
            self.est.sample(rtt)
        self.drop_acked_head()
        self.after_ack(n > 0, now)
        return n

    def stats(self):
        return {"srtt": self.est.srtt, "rto": self.est.rto, "backoffs": self.est.backoffs,
                "outstanding": self.outstanding(), "closed": self.closed}


def tracker_case(name, events, end, **cfg):
    """events: (at_ms, kind, seq[, attempt]); end: time to advance to at the end."""
    t = Tracker(**cfg)
    steps = []
    for ev in events + [(end, "advance", 0)]:
        at = ev[0] * MS
        t.actions = []
        t.advance(at)
        kind, seq = ev[1], ev[2]
        if kind == "sent":
            result = t.sent(seq, at)
        elif kind == "ack":
            result = t.ack(seq, at)
        elif kind == "ack_attempt":
            result = t.ack(seq, at, attempt=ev[3])
        elif kind == "ack_through":
            result = t.ack_through(seq, at)
        else:
            result = None
        step = {"at": at, "event": kind, "seq": seq, "result": result,
                "actions": t.actions, "stats": t.stats()}
        if kind == "ack_attempt":
            step["attempt"] = ev[3]
        steps.append(step)
    cfg = dict(cfg)
    return {"name": name, "config": cfg, "steps": steps}


def tracker_cases():
    return [
        tracker_case("one_message_acked",
                     [(0, "sent", 0), (100, "ack", 0)], 5000),
        # No ack at all: 1 s, 2 s, 4 s, 8 s backoff, then the 30 s limit cuts
        # the 16 s interval short.
        tracker_case("ladder_then_giveup_by_time", [(0, "sent", 7)], 40000),
        tracker_case("giveup_by_count",
                     [(0, "sent", 0), (100, "ack", 0), (200, "sent", 1)], 10000,
                     max_retx=3),
        tracker_case("giveup_by_time_short",
                     [(0, "sent", 0), (100, "ack", 0), (200, "sent", 1)], 10000,
                     give_up=2 * S),
        tracker_case("karn_no_sample_from_retransmitted",
                     [(0, "sent", 0), (1050, "ack", 0), (1100, "sent", 1), (1200, "ack", 1)],
                     9000),
        tracker_case("karn_ack_names_transmission",
                     [(0, "sent", 0), (1050, "ack_attempt", 0, 1), (1100, "sent", 1)], 3000),
        tracker_case("karn_ack_names_old_transmission",
                     [(0, "sent", 0), (1050, "ack_attempt", 0, 0), (1100, "sent", 1)], 6000),
        tracker_case("cumulative_acks",
                     [(0, "sent", 0), (10, "sent", 1), (20, "sent", 2), (30, "sent", 3),
                      (40, "sent", 4), (130, "ack_through", 2), (145, "ack_through", 4),
                      (150, "ack_through", 4)], 3000),
        tracker_case("selective_acks_do_not_postpone_head",
                     [(0, "sent", 0), (100, "ack", 0), (200, "sent", 1), (210, "sent", 2),
                      (220, "sent", 3), (350, "ack", 2), (400, "ack", 3)], 2000),
        tracker_case("ack_of_head_restarts_timer",
                     [(0, "sent", 0), (100, "ack", 0), (200, "sent", 1), (300, "sent", 2),
                      (450, "ack", 1)], 3000),
        tracker_case("window_full",
                     [(0, "sent", 0), (1, "sent", 1), (2, "sent", 2), (3, "sent", 3),
                      (4, "sent", 4), (5, "ack", 1), (6, "sent", 4), (7, "ack", 0),
                      (8, "sent", 4), (9, "sent", 5), (10, "sent", 6), (11, "ack_through", 5),
                      (12, "sent", 6), (13, "sent", 7)], 1000, window=4),
        tracker_case("sequence_errors",
                     [(0, "sent", 3), (1, "sent", 5), (2, "sent", 3), (3, "sent", 4),
                      (4, "ack", 9), (5, "ack_through", 2), (6, "ack_through", 4)], 1000),
        tracker_case("closed_after_giveup",
                     [(0, "sent", 0), (5000, "sent", 1), (5001, "ack", 0)], 6000,
                     give_up=3 * S),
        tracker_case("coarse_tick_rounds_up",
                     [(0, "sent", 0), (30, "ack", 0), (40, "sent", 1), (90, "ack", 1),
                      (100, "sent", 2)], 3000,
                     tick=10 * MS, rto_min=MS),
        tracker_case("linux_variant",
                     [(0, "sent", 0), (300, "ack", 0), (300, "sent", 1), (600, "ack", 1),
                      (600, "sent", 2)], 2000, variant="linux"),
    ]


def main():
    out = {"estimator": estimator_cases(), "tracker": tracker_cases()}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
