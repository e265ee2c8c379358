"""Every Prometheus metric of a harness process, in one registry per process (``Metrics``).

The agents' gauges (running, queued, questions waiting) are read from the orchestrator at
scrape time; the rest are counted where things happen: a finished agent's duration and cost
from its "finished" event, and the bot's requests, Slack API errors and posts it still owes
(the bot increments these; harness/ knows nothing of Slack).

The agents are read through the protocols at the end, which say what is read of them: this
module imports no other part of the harness, so the worker (which has no orchestrator) and
the health endpoints load none of the agents' side.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_DURATIONS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
_LATENCIES = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _AgentsNow(Collector):
    """Agents running and queued by role, and questions waiting by kind, when scraped. Each
    known role has its samples from the start, at 0: a dashboard or an alert on them sees
    the series before the first agent runs, not a gap."""

    def __init__(self) -> None:
        # (role, queued) of each live agent.
        self.agents: Callable[[], Iterable[tuple[str, bool]]] | None = None
        self.roles: Callable[[], Iterable[str]] = tuple
        self.questions: Callable[[], list[str]] | None = None

    def collect(self) -> Iterator[Metric]:
        running = GaugeMetricFamily(
            "harness_agents_running", "Agents running now (waiting ones included)", labels=["role"]
        )
        queued = GaugeMetricFamily("harness_agents_queued", "Agents queued now", labels=["role"])
        if self.agents is not None:
            counts = Tally(self.agents())
            for role in sorted({role for role, _ in counts} | set(self.roles())):
                running.add_metric([role], counts[(role, False)])
                queued.add_metric([role], counts[(role, True)])
        yield running
        yield queued
        if self.questions is not None:
            waiting = GaugeMetricFamily(
                "harness_questions_waiting",
                "Approvals and questions waiting for a human",
                labels=["kind"],
            )
            kinds = Tally(self.questions())
            for kind in ("approval", "question", *sorted(set(kinds) - {"approval", "question"})):
                waiting.add_metric([kind], kinds[kind])
            yield waiting


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._now = _AgentsNow()
        self.registry.register(self._now)
        r = self.registry
        self.agent_duration = Histogram(
            "harness_agent_duration_seconds",
            "Run time of agents that ended, by role and status",
            ["role", "status"],
            buckets=_DURATIONS,
            registry=r,
        )
        self.agent_cost = Counter(
            "harness_agent_cost_usd",
            "Model cost of agents that ended (simulated costs excluded)",
            ["role", "status"],
            registry=r,
        )
        # The usage view's groupings (``harness usage``), counted as agents end in this process.
        self.spend = Counter(
            "harness_spend_usd",
            "Model cost of agents that ended (simulated costs excluded), by who pays: the "
            "person who asked, the channel (direct messages as `direct`), the role, the "
            "routine and the repository (`` when none)",
            ["person", "channel", "role", "routine", "repository"],
            registry=r,
        )
        # The bot's, incremented from bot/.
        self.slack_events = Counter(
            "harness_slack_requests",
            "Slack requests handled, by kind and decision",
            ["kind", "decision"],
            registry=r,
        )
        self.slack_ack_latency = Histogram(
            "harness_slack_ack_latency_seconds",
            "Time from a Slack request's arrival to the bot's decision",
            buckets=_LATENCIES,
            registry=r,
        )
        self.slack_api_errors = Counter(
            "harness_slack_api_errors", "Failed Slack Web API calls, by method", ["method"],
            registry=r,
        )  # fmt: skip
        self.undelivered_posts = Gauge(
            "harness_undelivered_posts",
            "Posts the bot owes Slack threads and has not delivered yet",
            registry=r,
        )
        # Routines (harness/routines/service.py): what fired, what did not and why, what failed.
        self.routine_firings = Counter(
            "harness_routine_firings", "Routine firings that started a task, by routine and "
            "trigger", ["routine", "trigger"], registry=r,
        )  # fmt: skip
        self.routine_skips = Counter(
            "harness_routine_skips", "Routine firings that started nothing, by routine and "
            "reason", ["routine", "reason"], registry=r,
        )  # fmt: skip
        self.routine_failures = Counter(
            "harness_routine_failures", "Routine runs that failed, by routine", ["routine"],
            registry=r,
        )  # fmt: skip

    def watch(
        self, orchestrator: _Watched, questions: Callable[[], Sequence[_Asked]] | None = None
    ) -> None:
        """Reads the agents of ``orchestrator`` (and the ``questions`` waiting) at scrape
        time and records the agents that finish."""
        self.watch_agents(
            lambda: [(a.role, a.status == "queued") for a in orchestrator.agents()],
            roles=lambda: orchestrator.roles,
        )
        if questions is not None:
            self._now.questions = lambda: [q.kind for q in questions()]
        orchestrator.subscribe(self.on_agent_event)

    def watch_agents(
        self,
        agents: Callable[[], Iterable[tuple[str, bool]]],
        roles: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        """Reads (role, queued) of each live agent at scrape time (a worker has no
        orchestrator), and the ``roles`` whose gauges show 0 with no agent of theirs."""
        self._now.agents = agents
        self._now.roles = roles

    def on_agent_event(self, event: AgentEventView) -> None:
        """Records an agent that finished (the orchestrator's ``AgentEvent``)."""
        if event.kind != "finished":
            return
        record = event.record
        cost = None if record.cost_simulated else record.cost_usd
        self.agent_ended(record.role, record.status, record.duration_ms, cost)
        if cost is not None:
            task = event.task
            channel = task.thread.channel if task.thread is not None else ""
            person = record.requested_by or task.requester or ""
            routine = task.trigger.routine if task.trigger is not None else ""
            labels = (person, "direct" if channel.startswith("D") else channel, record.role,
                      routine, task.repository or "")  # fmt: skip
            self.spend.labels(*labels).inc(cost)

    def agent_ended(
        self, role: str, status: str, duration_ms: int | None, cost: float | None
    ) -> None:
        if duration_ms is not None:
            self.agent_duration.labels(role, status).observe(duration_ms / 1000)
        if cost is not None:
            self.agent_cost.labels(role, status).inc(cost)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)


class LiveAgent(Protocol):
    """What the gauges read of a live agent (the orchestrator's ``AgentInfo``)."""

    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...


class EndedRecord(Protocol):
    """What is counted of a finished agent's record (a ``DispatchRecord``)."""

    @property
    def role(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def duration_ms(self) -> int | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def cost_simulated(self) -> bool: ...
    @property
    def requested_by(self) -> str | None: ...


class _Channel(Protocol):
    @property
    def channel(self) -> str: ...


class _Routine(Protocol):
    @property
    def routine(self) -> str: ...


class TaskView(Protocol):
    """Who pays for a finished agent's task (a ``Task``)."""

    @property
    def requester(self) -> str | None: ...
    @property
    def repository(self) -> str | None: ...
    @property
    def thread(self) -> _Channel | None: ...
    @property
    def trigger(self) -> _Routine | None: ...


class AgentEventView(Protocol):
    """What is read of an agent event (the orchestrator's ``AgentEvent``)."""

    @property
    def kind(self) -> str: ...
    @property
    def record(self) -> EndedRecord: ...
    @property
    def task(self) -> TaskView: ...


class _Watched(Protocol):
    """What ``Metrics.watch`` reads: the orchestrator's facade."""

    def agents(self) -> Sequence[LiveAgent]: ...
    @property
    def roles(self) -> Iterable[str]: ...
    def subscribe(self, listener: Callable[[AgentEventView], None]) -> None: ...


class _Asked(Protocol):
    @property
    def kind(self) -> str: ...
