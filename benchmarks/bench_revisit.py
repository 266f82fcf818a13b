"""Revisits: the adaptive policy against fixed intervals, on a site whose pages change at known rates.

Workload (the same for every policy, side by side in one run): a ``ChangingSite``
(``diskfrontier.run.changingsite``) of ``--pages`` pages on ``--hosts`` loopback hosts, 5% of
them changing every ``--fast`` seconds, 15% every ``--slow`` seconds, 80% never; every answer
has an ETag and a Last-Modified, and a conditional request for an unchanged page is answered 304.
Each policy gets a site of its own (the same pages, classes and phases; its own port and log)
and a fresh job directory (``order="fifo"``), seeded with every page, crawled by
``crawl(..., revisit=POLICY)`` with 4 workers in a child process. The
handler sends the page's stored validators (``conditional_headers``) and returns ``Fetched``;
before each fetch it takes a token from one bucket shared by the workers, so that no policy
fetches more than ``--budget`` pages a minute (one fetch every 60/budget seconds, no burst).

With N pages and B fetches a second, R = N/B is how long the budget takes to fetch every page
once. The policies:

    adaptive      Revisit(initial=R, min=fast/5, max=4 x slow), inc 0.4 and dec 0.2 (the defaults):
                  it starts where a fixed policy at the budget is and must learn the rest
    fixed T       Revisit(initial=T, min=T, max=T) for T = R/2, 3R/4, R, 3R/2, 2R
    adaptive, killed   the adaptive policy once more, SIGKILLed at a random moment of its
                  measured window and resumed at once (the kill row)

The default budget is N x 60 / (5 x fast) a minute: a fifth of what fetching every page at the
fastest rate would take. Every policy first fetches every page once (the warm-up, left out of the
measurement); its measured window then runs ``--window`` seconds of wall time. Per policy, from
the site's log in that window: fetches; changes captured (page versions fetched with a 200 for
the first time); the mean staleness of the fast pages and of the slow ones (``ChangingSite.report``:
how long the crawl's copy had been out of date, sampled over the window); the share of revisits of
unchanged pages answered 304. "The best fixed interval" is the fixed T that captured the most
changes (of equals, the one whose fast pages were the least stale). The kill row reads every pending
request's revisit state (``pending_requests``) after the kill and again after the resumed run, and
counts the pages whose learned state came through: none lost, none older than before, none back to
``initial``.

The measured window is 1.5 x slow = 15 x fast by default: the adaptive policy's learning is part of
it (a fast page's interval shrinks from R = 5 x fast by 20% a visit), so the figures of its second
half are shown too; ``--window`` measures longer.

    python benchmarks/bench_revisit.py              # 1,000 pages, 30 s and 5 min, 7.5 min measured (about 11 minutes)
    python benchmarks/bench_revisit.py --quick      # 400 pages, 3 s and 30 s, 45 s measured (about 1.5 minutes)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import benchresults

HERE = os.path.dirname(os.path.abspath(__file__))
SHARES = (0.05, 0.15, 0.80)  # fast, slow, never
FAST, SLOW, NEVER = 0, 1, 2
FIXED = (0.5, 0.75, 1.0, 1.5, 2.0)  # the fixed intervals, as multiples of R = pages / budget a second
WORKERS = 4
ADAPTIVE, KILLED = "adaptive", "adaptive, SIGKILLed and resumed"


# ------------------------------------------------------------------ the child: one policy's crawl
class Budget:
    """One token bucket for all the workers of a crawl: a fetch every ``60 / per_minute`` seconds at
    most, no burst (a bucket of one token)."""

    def __init__(self, per_minute: float) -> None:
        self.gap = 60.0 / per_minute
        self.next = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> None:
        with self.lock:
            slot = max(self.next, time.monotonic())
            self.next = slot + self.gap
        wait = slot - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def child(job: str, seeds: str, policy: str, per_minute: float) -> None:
    from diskfrontier import Fetched, Frontier, Request, Revisit, crawl
    from diskfrontier.run.revisit import conditional_headers

    budget = Budget(per_minute)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy

    def fetch(request: Request, frontier: Frontier) -> Fetched:
        budget.take()
        ask = urllib.request.Request(request.url, headers=conditional_headers(request))  # noqa: S310 - loopback http
        try:
            with opener.open(ask, timeout=30) as answer:
                body = answer.read()
                return Fetched(answer.status, body=body, etag=answer.headers.get("ETag"),
                               last_modified=answer.headers.get("Last-Modified"))
        except urllib.error.HTTPError as error:
            if error.code == 304:
                return Fetched(304)
            raise

    with Frontier(job, order="fifo") as frontier:
        if seeds:
            with open(seeds) as f:
                frontier.push_many(Request(line.strip()) for line in f if line.strip())
        print("crawling", flush=True)
        stats = crawl(frontier, fetch, workers=WORKERS, revisit=Revisit(**json.loads(policy)), progress=False,
                      grace=5.0)
    print(json.dumps({"handled": stats.handled, "retried": stats.retried, "failed": stats.failed,
                      "revisits": stats.revisits, "changes": stats.changes, "not_modified": stats.not_modified}),
          flush=True)


# ------------------------------------------------------------------ one policy's crawl, seen from here
class Run:
    """One policy: its site, its job directory, its child process, its measured window (site times)."""

    def __init__(self, name: str, policy: dict[str, float], site: Any, work: str) -> None:
        self.name, self.policy, self.site = name, policy, site
        self.job = os.path.join(work, name.replace(", ", "-").replace(" ", "-"))
        self.seeds = os.path.join(work, f"{os.path.basename(self.job)}.seeds")
        with open(self.seeds, "w") as f:
            f.writelines(f"{site.url(n)}\n" for n in range(site.pages))
        self.errors = f"{self.job}.stderr"
        self.process: subprocess.Popen[str] | None = None
        self.stopping = self.finished = False
        self.fetched: set[int] = set()
        self.read = 0  # entries of the site's log looked at for the warm-up
        self.since: float | None = None
        self.until: float | None = None
        self.kill_at: float | None = None
        self.killed: dict[str, Any] | None = None
        self.stats: dict[str, Any] = {}

    def start(self, per_minute: float, seed: bool) -> None:
        with open(self.errors, "a") as errors:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--child", self.job, self.seeds if seed else "", json.dumps(self.policy),
                 str(per_minute)], stdout=subprocess.PIPE, stderr=errors, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "crawling":
            self.process.wait()
            raise SystemExit(f"the {self.name} crawl did not start: {self.stderr()}")

    def stderr(self) -> str:
        with open(self.errors) as f:
            return f.read()[-3000:]

    def watch_warmup(self, window: float) -> None:
        """Once every page has been fetched, the measured window starts."""
        if self.since is not None:
            return
        log = self.site.log()
        for served in log[self.read:]:
            self.fetched.add(served.page)
            if len(self.fetched) == self.site.pages:
                self.since = served.at
                self.until = self.since + window
                break
        self.read = len(log)

    def stop(self) -> None:
        """End the crawl as Ctrl-C would: its handlers finish, the frontier closes (``ended`` collects it)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.stopping = True

    def ended(self) -> bool:
        """True once a stopped crawl has ended, its stats read."""
        assert self.process is not None
        if self.process.poll() is None:
            return False
        out, _ = self.process.communicate()
        if self.process.returncode != 0:
            raise SystemExit(f"the {self.name} crawl ended with {self.process.returncode}: {self.stderr()}")
        self.stats = json.loads(out.strip().splitlines()[-1])
        return True


def states(job: str) -> dict[str, Any]:
    """Every pending request's revisit state, by URL (read from the job directory, not open)."""
    from diskfrontier.jobdir.reader import pending_requests

    return {r.url: r.revisit for r in pending_requests(job) if r.revisit is not None}


def compare_states(before: dict[str, Any], after: dict[str, Any], initial: float) -> dict[str, int]:
    """What became of each page's state from just after the kill to the end of the resumed run."""
    out = {"pages": len(before), "kept": 0, "revisited": 0, "lost": 0, "older": 0, "reset": 0}
    for url, was in before.items():
        now = after.get(url)
        if now is None:
            out["lost"] += 1
        elif was.visits > 1 and (now.visits == 1 or now.interval == initial != was.interval):
            out["reset"] += 1
        elif now.visits > was.visits or now == was or (now.visits == was.visits and now.failures > was.failures):
            out["kept"] += 1
            out["revisited"] += now.visits > was.visits
        else:  # fewer visits than it had, or the same ones told otherwise: not the state the kill left
            out["older"] += 1
    return out


# ------------------------------------------------------------------ the figures of a measured window
def captured(site: Any, since: float, until: float) -> dict[int, int]:
    """Page versions whose first 200 was in [since, until], by page class."""
    first: dict[tuple[int, int], float] = {}
    for served in site.log():
        if served.status == 200:
            key = (served.page, served.version)
            if key not in first or served.at < first[key]:
                first[key] = served.at
    out = {FAST: 0, SLOW: 0, NEVER: 0}
    for (page, _version), at in first.items():
        if since <= at <= until:
            out[site.class_of(page)] += 1
    return out


def busiest_minute(site: Any, since: float, until: float) -> int:
    """The most fetches in any 60 s of [since, until] (all of them, for a shorter window)."""
    times = sorted(s.at for s in site.log() if since <= s.at <= until)
    most = start = 0
    for end, at in enumerate(times):
        while at - times[start] > 60.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def window(site: Any, since: float, until: float) -> dict[str, Any]:
    """The figures of the site's log between site times ``since`` and ``until``."""
    report = site.report(since, until)
    got = captured(site, since, until)
    existed = {FAST: 0, SLOW: 0, NEVER: 0}
    for n in range(site.pages):
        existed[site.class_of(n)] += site.version(n, until) - site.version(n, since)
    return {"fetches": report["fetches"], "captured": sum(got.values()), "captured_fast": got[FAST],
            "captured_slow": got[SLOW], "changes_fast": existed[FAST], "changes_slow": existed[SLOW],
            "staleness_fast": report[f"staleness_{FAST}"], "staleness_slow": report[f"staleness_{SLOW}"],
            "not_modified_share": report["not_modified_share"]}


def measure(run: Run) -> dict[str, Any]:
    """A policy's figures: over its measured window, over the window's second half (``late_``), what it
    learned (the median interval of each class of pages at the end)."""
    site, since, until = run.site, run.since, run.until
    assert since is not None and until is not None
    out = window(site, since, until)
    out.update({f"late_{k}": v for k, v in window(site, (since + until) / 2, until).items()})
    intervals: dict[int, list[float]] = {FAST: [], SLOW: [], NEVER: []}
    for url, state in states(run.job).items():
        intervals[site.class_of(int(url.rsplit("/", 1)[1]))].append(state.interval)
    for name, kind in (("fast", FAST), ("slow", SLOW), ("never", NEVER)):
        out[f"interval_{name}"] = statistics.median(intervals[kind]) if intervals[kind] else None
    out.update({"busiest_minute": busiest_minute(site, since, until), "warmup": since, "crawl": run.stats})
    return out


# ------------------------------------------------------------------ one side-by-side run
def policies(args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    rounds = args.pages * 60.0 / args.budget
    adaptive = {"initial": args.initial or rounds, "min": args.min or args.fast / 5, "max": args.max or 4 * args.slow,
                "inc": 0.4, "dec": 0.2}
    out = [(ADAPTIVE, adaptive)]
    for share in FIXED:
        t = round(rounds * share, 2)
        out.append((f"fixed {t:g} s", {"initial": t, "min": t, "max": t}))
    out.append((KILLED, adaptive))
    return out


def one_run(args: argparse.Namespace, work: str, rng: random.Random) -> dict[str, dict[str, Any]]:
    from diskfrontier.run.changingsite import ChangingSite, PageClass

    classes = [PageClass(SHARES[FAST], args.fast), PageClass(SHARES[SLOW], args.slow), PageClass(SHARES[NEVER], None)]
    runs: list[Run] = []
    with contextlib.ExitStack() as stack:
        try:
            for name, policy in policies(args):
                site = stack.enter_context(ChangingSite(args.pages, classes, hosts=args.hosts))
                runs.append(Run(name, policy, site, work))
            for run in runs:
                run.start(args.budget, seed=True)
            print(f"  {len(runs)} crawls started, warming up (every page once)...", file=sys.stderr, flush=True)
            deadline = time.monotonic() + 3 * args.pages * 60.0 / args.budget + 120
            while not all(run.finished for run in runs):
                for run in runs:
                    tick(run, args, rng, deadline)
                time.sleep(0.2)
        finally:
            for run in runs:
                if run.process is not None and run.process.poll() is None:
                    run.process.kill()
                    run.process.wait()
        return {run.name: {**measure(run), "killed": run.killed} for run in runs}


def tick(run: Run, args: argparse.Namespace, rng: random.Random, deadline: float) -> None:
    """Look at one crawl: its warm-up, its kill and resume (the kill row), its end."""
    process = run.process
    assert process is not None
    if run.finished:
        return
    if run.stopping:
        if run.ended():
            run.finished = True
            if run.killed is not None:
                from diskfrontier import RevisitState

                before = {url: RevisitState.from_json(s) for url, s in run.killed.pop("before").items()}
                run.killed["states"] = compare_states(before, states(run.job), run.policy["initial"])
        return
    if process.poll() is not None:
        raise SystemExit(f"the {run.name} crawl ended by itself ({process.returncode}): {run.stderr()}")
    if run.since is None:
        run.watch_warmup(args.window)
        if run.since is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"the {run.name} crawl fetched {len(run.fetched)} of {args.pages} pages: "
                                 f"its warm-up never ended")
            return
        print(f"  {run.name}: warmed up at {run.since:.0f} s", file=sys.stderr, flush=True)
        if run.name == KILLED:
            run.kill_at = run.since + rng.uniform(0.25, 0.75) * args.window
    now = run.site.clock()
    if run.kill_at is not None and run.killed is None and now >= run.kill_at:
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed_at = run.site.clock()
        before = states(run.job)
        run.start(args.budget, seed=False)
        run.killed = {"at": killed_at - run.since, "resumed_after": run.site.clock() - killed_at,
                      "learned": sum(state.interval != run.policy["initial"] for state in before.values()),
                      "before": {url: state.to_json() for url, state in before.items()}}
        print(f"  {run.name}: SIGKILLed {run.killed['at']:.0f} s into its window and resumed", file=sys.stderr,
              flush=True)
    elif run.until is not None and now >= run.until:
        run.stop()


# ------------------------------------------------------------------ the report
def median(results: list[dict[str, dict[str, Any]]], name: str, figure: str) -> Any:
    values = [r[name][figure] for r in results if r[name][figure] is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def cell_text(cell: Any, fmt: str | None) -> str:
    if cell is None:
        return "-"
    return fmt.format(cell) if fmt and isinstance(cell, (int, float)) else str(cell)


def shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def verdict(value: float | None, limit: float, lower: bool = True) -> str:
    if value is None:
        return "not measured"
    if (value <= limit) if lower else (value >= limit):
        return "MET"
    return f"MISSED by {value / limit:.2f}x" if lower else f"MISSED ({value / limit:.0%} of the goal)"


def labelled(name: str, best: str) -> str:
    return f"{name} (best fixed)" if name == best else name


def policy_table(figures: dict[str, dict[str, Any]], best: str, args: argparse.Namespace, repeats: str) -> dict:
    rounds = args.pages * 60.0 / args.budget
    adaptive = dict(policies(args))[ADAPTIVE]
    first = figures[ADAPTIVE]
    span = min(60.0, args.window)
    allowed = args.budget * span / 60.0 + 1
    rows = [[labelled(name, best), f["fetches"], f["captured"], f["captured_fast"], f["captured_slow"],
             f["staleness_fast"], f["staleness_slow"], f["not_modified_share"]] for name, f in figures.items()]
    return benchresults.table(
        f"{args.pages:,} pages on {args.hosts} hosts, {args.budget:,.0f} fetches a minute for every policy, "
        f"{args.window:g} s measured after the warm-up; {repeats}",
        [("policy", None), ("fetches", "{:,.0f}"), ("changes captured", "{:,.0f}"), ("of them fast", "{:,.0f}"),
         ("of them slow", "{:,.0f}"), ("staleness, fast (s)", "{:,.1f}"), ("staleness, slow (s)", "{:,.1f}"),
         ("unchanged revisits answered 304", "{:.1%}")], rows,
        notes=[f"pages: 5% change every {args.fast:g} s (fast), 15% every {args.slow:g} s (slow), 80% never; "
               f"{first['changes_fast']:,} fast and {first['changes_slow']:,} slow versions appeared in each window",
               f"R = pages / budget = {rounds:g} s (every page once per R at the budget: a fixed T below R is held "
               f"to R by the budget); adaptive: "
               f"Revisit(initial={adaptive['initial']:g}, min={adaptive['min']:g}, max={adaptive['max']:g}, "
               f"inc=0.4, dec=0.2)",
               f"the most fetches in any {span:g} s of a window: "
               f"{max(f['busiest_minute'] for f in figures.values()):,} (the budget allows {allowed:,.0f})"])


def goals_table(figures: dict[str, dict[str, Any]], best: str, kills: list[dict[str, Any]]) -> dict:
    a, b = figures[ADAPTIVE], figures[best]
    captured, stale = ratio(a["captured"], b["captured"]), ratio(a["staleness_fast"], b["staleness_fast"])
    lowest = min(f["not_modified_share"] for f in figures.values())
    pages = sum(k["states"]["pages"] for k in kills)
    kept = sum(k["states"]["kept"] for k in kills)
    worse = sum(k["states"][what] for k in kills for what in ("lost", "older"))
    resets = sum(k["states"]["reset"] for k in kills)
    goals: list[list[Any]] = [
        [f"changes captured, adaptive / best fixed ({best})", captured, ">= 1.5x",
         verdict(captured, 1.5, lower=False)],
        ["staleness of the fast pages, adaptive / best fixed", stale, "<= 0.5", verdict(stale, 0.5)],
        ["revisits of unchanged pages answered 304, adaptive", f"{a['not_modified_share']:.1%}", ">= 90%",
         verdict(a["not_modified_share"], 0.9, lower=False)],
        ["revisits of unchanged pages answered 304, the lowest of all policies", f"{lowest:.1%}", ">= 90%",
         verdict(lowest, 0.9, lower=False)],
        ["SIGKILL mid-run and resumed: pages whose learned interval was kept", f"{kept:,} of {pages:,}", "all",
         "MET" if worse + resets == 0 and pages > 0 else f"MISSED: {worse:,} lost or older, {resets:,} reset"],
    ]
    return benchresults.table(
        "goals", [("figure", None), ("measured", "{:.2f}"), ("goal", None), ("status", None)], goals,
        notes=[f"kill row: SIGKILLed {k['at']:.0f} s into its measured window, resumed {k['resumed_after']:.1f} s "
               f"later; of the {k['states']['pages']:,} pages with a revisit state after the kill "
               f"({k['learned']:,} of them at an interval other than initial), "
               f"{k['states']['revisited']:,} were revisited after the resume, {k['states']['lost']:,} lost, "
               f"{k['states']['older']:,} older, {k['states']['reset']:,} back to initial" for k in kills])


def late_table(figures: dict[str, dict[str, Any]], best: str) -> dict:
    a, b = figures[ADAPTIVE], figures[best]
    rows = [[labelled(name, best), f["late_fetches"], f["late_captured"], f["late_captured_fast"],
             f["late_staleness_fast"], f["late_staleness_slow"]] for name, f in figures.items()]
    return benchresults.table(
        "the same, over the second half of the window only (once the adaptive policy has had time to learn)",
        [("policy", None), ("fetches", "{:,.0f}"), ("changes captured", "{:,.0f}"), ("of them fast", "{:,.0f}"),
         ("staleness, fast (s)", "{:,.1f}"), ("staleness, slow (s)", "{:,.1f}")], rows,
        notes=[f"adaptive / best fixed: changes captured {shown(ratio(a['late_captured'], b['late_captured']))}x, "
               f"staleness of the fast pages {shown(ratio(a['late_staleness_fast'], b['late_staleness_fast']))} "
               f"(shown, not a goal: the goals are for the whole window)"])


def learned_table(figures: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict:
    initial = dict(policies(args))[ADAPTIVE]["initial"]
    rows = [[name, f["warmup"], f["interval_fast"], f["interval_slow"], f["interval_never"]]
            for name, f in figures.items()]
    return benchresults.table(
        "what each policy learned: the median interval of each class of pages at the end; the warm-up",
        [("policy", None), ("warm-up (s)", "{:,.0f}"), ("fast pages (s)", "{:,.1f}"), ("slow pages (s)", "{:,.1f}"),
         ("pages that never change (s)", "{:,.1f}")], rows,
        notes=[f"periods: fast {args.fast:g} s, slow {args.slow:g} s; the adaptive rule settles a page that changes "
               f"every P at about 0.6 P (where changed and unchanged visits balance: 0.8^x 1.4^(1-x) = 1); from "
               f"initial = {initial:g} s a fast page takes about (initial - 0.6 x {args.fast:g}) / dec = "
               f"{(initial - 0.6 * args.fast) / 0.2:,.0f} s of revisits to get there"])


def print_table(t: dict[str, Any]) -> None:
    print(f"\n{t['title']}")
    widths = [max(len(str(c)), 10) for c in t["columns"]]
    widths[0] = max(widths[0], *(len(str(row[0])) for row in t["rows"]))
    print("  ".join(f"{c:>{w}}" for c, w in zip(t["columns"], widths, strict=True)))
    for row in t["rows"]:
        print("  ".join(f"{cell_text(c, fmt):>{w}}" for c, fmt, w in zip(row, t["formats"], widths, strict=True)))
    for note in t["notes"]:
        print(f"  {note}")


def report(results: list[dict[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    names = list(results[0])
    figures = {name: {f: median(results, name, f) for f in results[0][name] if f not in ("crawl", "killed")}
               for name in names}
    best = max((name for name in names if name.startswith("fixed")),
               key=lambda name: (figures[name]["captured"], -figures[name]["staleness_fast"]))
    repeats = f"medians of {len(results)}" if len(results) > 1 else "one run"
    tables = [policy_table(figures, best, args, repeats),
              goals_table(figures, best, [r[KILLED]["killed"] for r in results]),
              late_table(figures, best), learned_table(figures, args)]
    for t in tables:
        print_table(t)
    benchresults.write(args.results, "bench_revisit", vars(args), tables, {"best_fixed": best, "runs": results})


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        job, seeds, policy, per_minute = sys.argv[2:6]
        child(job, seeds, policy, float(per_minute))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="400 pages, periods 3 s and 30 s, 45 s measured")
    parser.add_argument("--pages", type=int, help="pages of the site (default 1,000; --quick 400)")
    parser.add_argument("--hosts", type=int, default=4, help="hosts of the site (127.0.0.2 on)")
    parser.add_argument("--fast", type=float, help="seconds between changes of the fast pages (30; --quick 3)")
    parser.add_argument("--slow", type=float, help="seconds between changes of the slow pages (300; --quick 30)")
    parser.add_argument("--budget", type=float,
                        help="fetches a minute for every policy (default pages x 60 / (5 x fast))")
    parser.add_argument("--initial", type=float, help="the adaptive policy's initial interval (default R)")
    parser.add_argument("--min", type=float, help="the adaptive policy's shortest interval (default fast / 5)")
    parser.add_argument("--max", type=float, help="the adaptive policy's longest interval (default 4 x slow)")
    parser.add_argument("--window", type=float, help="seconds measured after the warm-up (default 1.5 x slow)")
    parser.add_argument("--repeat", type=int, default=1, help="side-by-side runs (medians)")
    parser.add_argument("--seed", type=int, default=33, help="seed of the kill's moment")
    parser.add_argument("--workdir", metavar="DIR", help="where to put the job directories (default: a temporary one)")
    benchresults.add_argument(parser, "bench_revisit")
    args = parser.parse_args()
    args.pages = args.pages or (400 if args.quick else 1000)
    args.fast = args.fast or (3.0 if args.quick else 30.0)
    args.slow = args.slow or (30.0 if args.quick else 300.0)
    args.budget = args.budget or args.pages * 60.0 / (5 * args.fast)
    args.window = args.window or 1.5 * args.slow
    rng = random.Random(args.seed)
    work = args.workdir or tempfile.mkdtemp(prefix="bench-revisit-")
    results = []
    try:
        for i in range(args.repeat):
            print(f"run {i + 1} of {args.repeat}", file=sys.stderr, flush=True)
            place = os.path.join(work, f"run-{i}")
            os.makedirs(place)
            results.append(one_run(args, place, rng))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    report(results, args)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
