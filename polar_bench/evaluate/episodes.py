"""The episode loop: lanes of harnesses stepped together, actions from the agents, one record per episode.

This is trusted code: it runs in the evaluation worker (a process or a Ray actor) that holds the
environments. The agents live elsewhere (`polar_bench.evaluate.agents`): each tick, the loop sends
the observations of every lane still playing to the agents in one request, and steps each lane's
harness with the action that came back. ``harness.step`` checks every action against the task's
action space. Each record carries its trajectory's digest (`polar_bench.evaluate.trajectory`).

The module stays over 500 lines on purpose: `EpisodeRunner`'s lanes, agent slots, pipelined
requests and failure handling share one state, which a split would pass around between modules.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AgentLoadError, HarnessError, InvalidActionError
from ..llm.proxy import EpisodeCalls, LLMBudget, LLMProxy
from ..results.model import Episode, Status
from ..task_info import TaskInfo
from .agents import (
    DEFAULT_AGENT_THREADS,
    AgentBackend,
    AgentGone,
    AgentPool,
    InProcessAgents,
    IsolatedAgents,
    Slot,
    small_json,
)
from .trajectory import TrajectoryDigest, write_trajectory

if TYPE_CHECKING:
    from ..agent import Agent
    from ..harness import Harness

__all__ = ["TrajectoryDigest", "EpisodeRunner", "run_episode"]

class _Lane:
    """One environment slot of a worker: its harness (per task) and the agent slot it plays with."""

    def __init__(self) -> None:
        self.harness: Harness | None = None
        self.harness_task: str | None = None
        self.slot: Slot | None = None
        self.slot_key: tuple | None = None
        self.member = 0  # the agent process of the worker's `AgentPool` that serves this lane
        # the episode in progress
        self.unit: tuple | None = None
        self.seed = 0  # the episode seed of ``unit``
        self.obs: Any = None
        self.info: dict = {}
        self.ret = 0.0
        self.length = 0
        self.own = 0.0
        self.agent_s = 0.0
        self.digest: TrajectoryDigest | None = None

    def drop_harness(self) -> None:
        if self.harness is not None:
            try:
                self.harness.close()
            except Exception:  # noqa: BLE001 - a harness that fails to close loses nothing
                pass
        self.harness, self.harness_task = None, None


_NO_NETWORK = ("Network is unreachable", "Temporary failure in name resolution", "Name or service not known",
               "No address associated with hostname")
NO_NETWORK_HINT = ("\n(the agent process has no network but the LLM proxy at OPENAI_BASE_URL: send LLM calls there "
                   "and name the model behind it with --llm-upstream URL, or pass --agent-network to give the "
                   "agent the host's network; see docs/evaluate.md)")


# what an agent's episode_info() may add to its record: JSON values, this much of them per episode
EPISODE_INFO_BYTES = 64 << 10
# keys of a record that the loop and the harness measure: an agent's episode_info() cannot set them
MEASURED_KEYS = ("task", "run", "index", "seed", "return", "length", "status", "error", "digest", "wall_seconds",
                 "agent_seconds", "harness", "clipped_actions")


def episode_extras(extra: Any) -> tuple[dict, str | None]:
    """What an agent's ``episode_info()`` adds to its episode's record: its keys but the measured ones,
    as plain JSON data of at most `EPISODE_INFO_BYTES`; or an error (the episode's agent_error) saying
    what to return instead. An agent must not be able to stop the evaluation or bloat its results."""
    fix = (f"; return a dict of JSON values (numbers, strings, lists, dicts), at most "
           f"{EPISODE_INFO_BYTES >> 10} KiB of them")
    if not isinstance(extra, dict):
        return {}, f"episode_info() must return a dict, got {type(extra).__name__}" + fix
    try:
        return small_json({k: v for k, v in extra.items() if k not in MEASURED_KEYS}, "episode_info()",
                          EPISODE_INFO_BYTES), None
    except ValueError as exc:
        return {}, str(exc) + fix


def _record(lane: _Lane, status: str = "ok", error: str | None = None) -> dict:
    task, run, index, seed = lane.unit  # type: ignore[misc]  # set while an episode is in progress
    if status == "agent_error" and error and any(s in error for s in _NO_NETWORK):
        error += NO_NETWORK_HINT
    ok = status == "ok"
    return Episode(
        task=task, run=run, index=index, seed=seed, ret=lane.ret, length=lane.length, status=Status(status),
        error=error, wall_seconds=round(lane.own, 6), agent_seconds=round(lane.agent_s, 6),
        clipped_actions=int(lane.info["clipped_actions"]) if "clipped_actions" in lane.info else None,
        # what the harness reports about the episode
        harness=dict(lane.info["episode_record"]) if ok and "episode_record" in lane.info else None,
        digest=lane.digest.hexdigest() if ok and lane.digest is not None else None).to_json()


@dataclass(frozen=True)
class _Request:
    """A group's act request in flight: the backend's ticket, when it was sent, its time limit, the
    episode time its lanes had left, and the lanes it asked for."""

    ticket: Any
    sent: float
    limit: float | None
    left: float | None
    lanes: list[int]


class EpisodeRunner:
    """Plays batches of episodes for one worker. Each lane keeps its harness per task; agents live in
    ``agents`` (isolated or in-process) in slots kept per lane and (task, run), or shared by the lanes
    of a (task, run) when the agent has ``act_batch``. A batch plays one episode per lane, all lanes
    stepped together, one agent request per tick."""

    def __init__(self, agent_path: str, options: dict, step_timeout: float | None,
                 episode_timeout: float | None, lanes: int = 1, *, in_process: bool = False,
                 agent_memory_mb: int | None = None, agent_disk_mb: int | None = None, network: bool = False,
                 llm_endpoint: tuple[str, int] | None = None, pipeline: bool = True,
                 llm_proxy: dict | None = None, agent_threads: int = DEFAULT_AGENT_THREADS,
                 agent_processes: int = 1, agents: AgentBackend | None = None):
        """``llm_proxy``: ``{"upstream": URL, "budget": {...} | None, "trajectories": DIR | None}`` puts
        an `LLMProxy` in front of the agents (see `polar_bench.llm.proxy`). ``agent_processes``: agent
        processes of this worker (an `AgentPool` when over 1; lane ``i`` is served by process
        ``i % agent_processes``). ``agents``: a backend of one's own instead (`run_episode`)."""
        self.options = options
        self.proxy: LLMProxy | None = None
        self.trajectories: str | None = None
        if llm_proxy is not None:
            self.trajectories = llm_proxy.get("trajectories")
            self.proxy = LLMProxy(llm_proxy["upstream"], budget=LLMBudget(**(llm_proxy.get("budget") or {})),
                                  trace=self.trajectories is not None)
        self.step_timeout = step_timeout
        self.episode_timeout = episode_timeout
        self.lanes = [_Lane() for _ in range(max(1, lanes))]
        self.agents: AgentBackend
        if agents is not None:
            self.agents = agents
        elif in_process:
            self.agents = InProcessAgents(agent_path, self.proxy)
        else:
            kwargs: dict[str, Any] = {"network": network, "proxy": self.proxy, "threads": agent_threads,
                                      "llm_endpoint": tuple(llm_endpoint) if llm_endpoint else None}
            if agent_memory_mb is not None:
                kwargs["memory_mb"] = agent_memory_mb
            if agent_disk_mb is not None:
                kwargs["disk_mb"] = agent_disk_mb
            members = min(max(1, int(agent_processes)), len(self.lanes))
            if members > 1:
                self.agents = AgentPool([IsolatedAgents(agent_path, **kwargs) for _ in range(members)])
                for i, lane in enumerate(self.lanes):
                    lane.member = i % members
            else:
                self.agents = IsolatedAgents(agent_path, **kwargs)
        self.pipeline = pipeline  # two lane groups in flight (a core for the agent process beside the worker's)
        self.shared: dict[tuple, Slot] = {}  # (member, task, run) -> the slot of an act_batch agent
        self._on_record: Callable[[dict], list | None] | None = None
        self._todo: deque[tuple] = deque()  # units waiting for a lane (run_batch's, then the parent's top-ups)
        self._order: dict[tuple, int] = {}  # (task, run, index) -> its place in the order units came in

    @property
    def layers(self) -> dict[str, str]:
        return dict(self.agents.layers)

    def run(self, task: str, run: int, index: int, seed: int) -> dict:
        """The episode's record, or ``{"fatal": message}`` when the agent cannot be built."""
        return self.run_batch([(task, run, index, seed)])[0]

    def run_batch(self, units: list, on_record: Callable[[dict], list | None] | None = None) -> list[dict]:
        """Records of the episodes ``(task, run, index, seed)`` (at most one per lane to begin with), in
        the order the units came in, or ``[{"fatal": message}]``. ``on_record`` is called with each
        record as soon as its episode ends (so that the parent journals it before the slowest lane is
        done); the units it returns, if any, are played too, each in the next lane to come free, so a
        worker's lanes stay full while its parent has episodes to hand out (one request to the agent
        process per tick carries all of them). Episodes lost with an agent process that died or hung
        while acting for several lanes are played again alone, so that one episode's agent failure is
        recorded on that episode only."""
        if len(units) > len(self.lanes):
            raise ValueError(f"{len(units)} episodes for {len(self.lanes)} lanes")
        self._on_record = on_record
        self._todo = deque(tuple(u) for u in units)
        self._order = {u[:3]: k for k, u in enumerate(self._todo)}
        records: list[dict] = []
        try:
            while self._todo:
                done, lost = self._play(self._todo, refill=True)
                records += done
                for unit in lost:
                    again, _ = self._play(deque([unit]), refill=False)
                    records += again
        except AgentLoadError as exc:
            return [{"fatal": str(exc)}]
        finally:
            self._on_record = None
            self._todo = deque()
        order = self._order
        return sorted(records, key=lambda r: order.get((r["task"], r["run"], r["index"]), len(order)))

    def _emit(self, rec: dict) -> None:
        """Hand a finished record to ``on_record``; queue the units it answers with."""
        if self._on_record is None:
            return
        for unit in self._on_record(rec) or ():
            unit = tuple(unit)
            self._order.setdefault(unit[:3], len(self._order))
            self._todo.append(unit)

    # ------------------------------------------------------------------ playing lanes
    def _slot_for(self, lane: _Lane, task_info: TaskInfo, run: int) -> Slot:
        key = (task_info.id, run)
        shared = self.shared.get((lane.member, *key))
        if shared is not None and self.agents.current(shared):
            return shared
        if lane.slot is not None and lane.slot_key == key and self.agents.current(lane.slot):
            return lane.slot
        self._drop_slot(lane)
        slot = self.agents.make(task_info, run, lane.member)
        if slot.batch:
            self.shared[(lane.member, *key)] = slot
        else:
            lane.slot, lane.slot_key = slot, key
        return slot

    def _drop_slot(self, lane: _Lane) -> None:
        if lane.slot is not None:
            self.agents.close_slot(lane.slot)
        lane.slot, lane.slot_key = None, None

    def _play(self, todo: deque, refill: bool) -> tuple[list[dict], list[tuple]]:
        """Play the units of ``todo`` in this worker's lanes (all free now); with ``refill``, a lane
        whose episode ends takes the next unit of ``todo``, which `_emit` extends with the parent's
        top-ups. The records, and the units lost with a dead agent process (to be played alone)."""
        done: list[dict] = []
        slots: dict[int, Slot] = {}
        active, gone = self._start(todo, list(range(len(self.lanes))), slots, done)
        if gone is not None:
            return self._gone(done, active, gone)
        if not active:
            return done, []
        return self._tick_loop(done, active, slots, todo if refill else None)

    def _start(self, todo: deque, free: list[int], slots: dict[int, Slot],
               done: list[dict]) -> tuple[list[int], AgentGone | None]:
        """Start the next units of ``todo`` in the lanes ``free``: each lane's harness and agent slot,
        then ``reset`` of their agents (one request) and of their environments. The lanes now playing,
        and the `AgentGone` when the agent process died meanwhile (their units are lost then)."""
        from .. import make

        free = list(free)
        starting: list[int] = []
        while free and todo:
            i = free.pop(0)
            task, run, index, seed = unit = todo.popleft()
            lane = self.lanes[i]
            lane.unit, lane.seed = unit, int(seed)
            lane.ret, lane.length, lane.own, lane.agent_s, lane.info = 0.0, 0, 0.0, 0.0, {}
            lane.digest = None
            try:
                if lane.harness_task != task:
                    lane.drop_harness()
                    lane.harness = make(task, **self.options.get(task, {}))
                    lane.harness_task = task
            except HarnessError as exc:
                lane.drop_harness()
                rec = {**_record(lane, "env_error", str(exc)), "return": None}
                done.append(rec)
                self._emit(rec)
                free.insert(0, i)
                continue
            assert lane.harness is not None  # made above, or kept from the lane's last unit of this task
            slot = self._slot_for(lane, lane.harness.task_info, run)
            if self.proxy is not None and slot.llm_token is not None:
                self.proxy.open(slot.llm_token, lane, task, run, index, seed)
            lane.harness.request_text(slot.wants_text and lane.harness.task_info.has_text)
            slots[i] = slot
            starting.append(i)
        if not starting:
            return [], None
        t0 = time.perf_counter()
        try:
            errors = self.agents.reset([slots[i] for i in starting], [self.lanes[i].seed for i in starting])
        except AgentGone as gone:
            return starting, gone
        dt = time.perf_counter() - t0
        active = []
        for i, err in zip(starting, errors, strict=True):
            lane = self.lanes[i]
            lane.own += dt
            if err is not None:
                done.append(self._finish(lane, "agent_error", err))
                continue
            assert lane.harness is not None  # every starting lane got one above
            t = time.perf_counter()
            try:
                lane.obs, lane.info = lane.harness.reset(seed=lane.seed)
            except HarnessError as exc:
                done.append(self._finish(lane, "env_error", f"{exc}\n{exc.native_traceback[-4000:]}"))
                continue
            lane.own += time.perf_counter() - t
            lane.digest = TrajectoryDigest(lane.seed)
            lane.digest.start(lane.obs)
            active.append(i)
        return active, None

    def _tick_loop(self, done: list[dict], active: list[int], slots: dict[int, Slot],
                   todo: deque | None) -> tuple[list[dict], list[tuple]]:
        """Step the lanes in ``active`` until their episodes end, lanes that come free taking the next
        units of ``todo`` (None: no refill). With an agent process and two or more lanes, the lanes are
        split in two groups with a request each in flight: the worker steps one group's environments
        while the agent process computes the other group's actions (two cores at work instead of one
        waiting for the other), when ``pipeline`` says a core is free for that. With an `AgentPool`, each
        agent process has a group of its own (its lanes), all requests in flight at once. Each lane sees
        the same observations and actions as when played alone."""
        pool = self.agents.members > 1
        if pool:  # a group per agent process, each lane in its process's group
            groups = [[i for i in active if self.lanes[i].member == g] for g in range(self.agents.members)]
        else:  # two groups wherever two lanes may play at once (refilled lanes join the smaller group)
            pipelined = self.pipeline and self.agents.can_pipeline and \
                (len(active) >= 2 or (todo is not None and len(self.lanes) >= 2))
            groups = [active[0::2], active[1::2]] if pipelined else [list(active)]
        inflight: dict[int, _Request] = {}
        last_answer = time.perf_counter()

        def everyone() -> list[int]:
            return [i for group in groups for i in group]

        def gone_now(gone: AgentGone, request: _Request | None) -> tuple[list[dict], list[tuple]]:
            if gone.kind == "timeout":  # which deadline passed: the episode's when it was the nearer one
                by_episode = request is not None and request.left is not None and request.limit is not None \
                    and request.left <= request.limit + 1e-9
                gone = AgentGone("timeout", gone.message, "episode" if by_episode else "step")
            return self._gone(done, everyone(), gone)

        for g in range(len(groups)):
            try:
                if groups[g]:
                    self._send(g, groups, slots, done, inflight)
            except AgentGone as gone:
                return gone_now(gone, None)
        while inflight:
            for g in range(len(groups)):
                if g not in inflight:
                    continue
                request = inflight.pop(g)
                # one agent process answers in order; each process of a pool has this request only
                started = request.sent if pool else max(request.sent, last_answer)
                deadline = time.monotonic() + (request.limit if request.limit is not None else 1e9) \
                    - (time.perf_counter() - started)
                try:
                    actions, errors = self.agents.act_receive(request.ticket, len(request.lanes), deadline)
                except AgentGone as gone:
                    return gone_now(gone, request)
                last_answer = time.perf_counter()
                # lanes refilled into this group while its request was out were appended after the
                # lanes it asked for: they wait for the next request, their first
                joined = groups[g][len(request.lanes):]
                groups[g] = self._step_lanes(done, request.lanes, actions, errors, last_answer - started) + joined
                if todo:  # lanes that came free take the next units
                    died = self._refill(done, groups, g, slots, todo, pool)
                    if died is not None:
                        return self._gone(done, everyone() + died[0], died[1])
                for h in [g, *(h for h in range(len(groups)) if h != g)]:  # g first, then one refilled
                    try:
                        if groups[h] and h not in inflight:
                            self._send(h, groups, slots, done, inflight)
                    except AgentGone as gone:
                        return gone_now(gone, None)
        return done, []

    def _send(self, g: int, groups: list[list[int]], slots: dict[int, Slot], done: list[dict],
              inflight: dict[int, _Request]) -> None:
        """Put group ``g``'s request in flight, or end its lanes' episodes when their time is up."""
        group = groups[g]
        # one act() per lane, one act_batch() per shared slot: the step timeout applies to each call
        calls = len({slots[i].id for i in group if slots[i].batch}) + sum(not slots[i].batch for i in group)
        limit = self.step_timeout * calls if self.step_timeout else None
        left = None
        if self.episode_timeout:
            left = min(self.episode_timeout - self.lanes[i].own for i in group)
            limit = left if limit is None else min(limit, left)
        if limit is not None and limit <= 0:
            for i in group:
                done.append(self._finish(self.lanes[i], "timeout", self._timeout_text(self.lanes[i], True)))
            groups[g] = []
            return
        if self.proxy is not None:
            for i in group:
                self.proxy.step(self.lanes[i], self.lanes[i].length)
        sent = time.perf_counter()  # before the send: an in-process backend computes the actions in it
        ticket = self.agents.act_send([slots[i] for i in group], [self.lanes[i].obs for i in group],
                                      [{**self.lanes[i].info, "episode_seed": self.lanes[i].seed}
                                       if slots[i].batch else self.lanes[i].info for i in group], limit)
        inflight[g] = _Request(ticket, sent, limit, left, list(group))

    def _refill(self, done: list[dict], groups: list[list[int]], g: int, slots: dict[int, Slot], todo: deque,
                pool: bool) -> tuple[list[int], AgentGone] | None:
        """Start the next units of ``todo`` on the lanes that came free, each joining a group (its agent
        process's in a pool, else the smaller group, ``g`` last); the started lanes and why the agent
        was lost, when it was."""
        busy = {i for group in groups for i in group}
        free = [i for i in range(len(self.lanes)) if i not in busy]
        if not free:
            return None
        new, died = self._start(todo, free, slots, done)
        if died is not None:
            return new, died
        for i in new:
            if pool:
                groups[self.lanes[i].member].append(i)
                continue
            sizes = [(len(group), h != g, h) for h, group in enumerate(groups)]
            groups[min(sizes)[2]].append(i)
        return None

    def _step_lanes(self, done: list[dict], group: list[int], actions: list, errors: list, dt: float) -> list[int]:
        """Step each lane of ``group`` with its action; return the lanes whose episode goes on."""
        still = []
        for i, action, err in zip(group, actions, errors, strict=True):
            lane = self.lanes[i]
            lane.own += dt
            lane.agent_s += dt
            over = self.proxy.exceeded(lane) if self.proxy is not None else None
            if err is not None or over is not None:
                done.append(self._finish(lane, "agent_error", over or err))
                continue
            assert lane.harness is not None  # a lane playing an episode has one
            t = time.perf_counter()
            try:
                obs, reward, terminated, truncated, info = lane.harness.step(action)
            except InvalidActionError as exc:
                done.append(self._finish(lane, "agent_error", f"InvalidActionError: {exc}"))
                continue
            except HarnessError as exc:
                done.append(self._finish(lane, "env_error", f"{exc}\n{exc.native_traceback[-4000:]}"))
                continue
            lane.own += time.perf_counter() - t
            lane.ret += reward
            lane.length += 1
            lane.obs, lane.info = obs, info
            lane.digest.step(action, reward, terminated, truncated, obs)  # type: ignore[union-attr]
            if terminated or truncated:
                done.append(self._finish(lane, "ok", None))
            elif self.episode_timeout and lane.own > self.episode_timeout:
                done.append(self._finish(lane, "timeout", self._timeout_text(lane, True)))
            else:
                still.append(i)
        return still

    def _timeout_text(self, lane: _Lane, episode: bool) -> str:
        if episode or not self.step_timeout:
            return f"the agent exceeded the episode timeout of {self.episode_timeout:g} s at step {lane.length}"
        return f"the agent exceeded the step timeout of {self.step_timeout:g} s at step {lane.length}"

    def _gone(self, done: list[dict], active: list[int], gone: AgentGone) -> tuple[list[dict], list[tuple]]:
        """The agent process was killed while serving ``active``: with one lane the episode failed;
        with several, which one caused it is unknown, so their units are all played again alone."""
        self.agents.restart()
        self.shared.clear()
        for lane in self.lanes:
            lane.slot, lane.slot_key = None, None
        if len(active) > 1:
            for i in active:
                self.lanes[i].drop_harness()
            return done, [self.lanes[i].unit for i in active]  # type: ignore[misc]
        lane = self.lanes[active[0]]
        if gone.kind == "timeout":
            done.append(self._finish(lane, "timeout", self._timeout_text(lane, gone.limit == "episode")))
        else:
            done.append(self._finish(lane, "agent_error", gone.message))
        return done, []

    def _finish(self, lane: _Lane, status: str, error: str | None) -> dict:
        rec = _record(lane, status, error)
        if status == "ok" and lane.unit is not None:
            slot = lane.slot or self.shared.get((lane.member, lane.unit[0], lane.unit[1]))
            if slot is not None and slot.info:  # no request for an agent without episode_info()
                try:
                    extra, err = self.agents.episode_info(slot)
                except AgentGone as gone:
                    extra, err = None, gone.message
                if err is None and extra:
                    extra, err = episode_extras(extra)
                if err is not None:
                    rec["status"], rec["error"] = "agent_error", err
                    rec.pop("digest", None)
                elif extra:
                    rec.update(extra)
        if self.proxy is not None:
            calls = self.proxy.close(lane)
            if calls is not None:
                self._llm_record(rec, calls)
        if rec["status"] != "ok":
            # The agent's or the harness's state may be inconsistent now: rebuild both.
            self._drop_slot(lane)
            lane.drop_harness()
        self._emit(rec)
        return rec

    def _llm_record(self, rec: dict, calls: EpisodeCalls) -> None:
        """Put the proxy's count of the episode's LLM calls in its record (over the agent's own, unless
        the proxy saw no call: then the agent's own report, marked so, or nothing), end an episode that went over
        its LLM budget with agent_error, and write its trajectory file."""
        if calls.calls or calls.refused:
            rec["llm"] = calls.usage()
        elif isinstance(rec.get("llm"), dict):  # the agent's own count (an LLM in its process): say so
            rec["llm"] = {**rec["llm"], "source": "agent"}
        # no call and no claim: an agent without an LLM, whose records stay as they were without the proxy
        if calls.exceeded and rec["status"] == "ok":
            rec["status"], rec["error"] = "agent_error", calls.exceeded
            rec.pop("digest", None)
        if self.trajectories is not None:
            write_trajectory(self.trajectories, rec, calls)

    def close(self) -> None:
        for lane in self.lanes:
            self._drop_slot(lane)
            lane.drop_harness()
        self.agents.close()
        if self.proxy is not None:
            self.proxy.shutdown()


def run_episode(harness: Harness, agent: Agent, seed: int, step_timeout: float | None,
                episode_timeout: float | None) -> dict:
    """Play one episode of an agent object on a harness in this process (no isolation): the loop of
    ``evaluate --in-process``, for notebooks, tests and benchmarks. Never raises for agent or
    environment failures (they become the status)."""
    class _Given:  # make() hands out the given object instead of importing a file
        @staticmethod
        def make_agent(task: TaskInfo, run: int) -> Agent:
            return agent

    runner = EpisodeRunner("<object>", {}, step_timeout, episode_timeout, 1,
                           agents=InProcessAgents("<object>", module=_Given))
    lane = runner.lanes[0]
    lane.harness, lane.harness_task = harness, harness.task_info.id
    try:
        rec = runner.run_batch([(harness.task_info.id, 0, 0, seed)])[0]
    finally:
        lane.harness = None  # the caller owns the harness
    rec.pop("fatal", None)
    return {k: v for k, v in rec.items() if k not in ("task", "run", "index", "seed")}
