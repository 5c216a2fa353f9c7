"""From a physical dataflow to an execution graph: parallelism, operator chains, stable uids.

Operators joined by a forward edge at equal parallelism are chained into one
subtask (no queue between them), as Flink chains operators.  Each chain and
node gets a uid derived from the plan alone, so restarting the same SQL maps
checkpointed state back to the same operators.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from sqlstream.core.physical import Dataflow, PhysicalNode, parallelisms


@dataclass
class ChainInput:
    upstream: str  # chain uid
    mode: str  # forward | rebalance | hash | global
    keys: tuple[int, ...]
    input_index: int  # which logical input of the head operator

    def channels(self, upstream_parallelism: int) -> int:
        """How many channels this input has at each consumer subtask: one per upstream subtask, but
        one in all on a forward edge, which connects upstream subtask i to consumer subtask i only."""
        return 1 if self.mode == "forward" else upstream_parallelism

    def channel(self, upstream_index: int) -> int:
        """Which of this input's channels upstream subtask ``upstream_index`` sends on."""
        return 0 if self.mode == "forward" else upstream_index


@dataclass
class Chain:
    uid: str
    nodes: list[PhysicalNode]
    node_uids: list[str]
    parallelism: int
    inputs: list[ChainInput] = field(default_factory=list)
    consumers: list[tuple[str, int]] = field(default_factory=list)  # (chain uid, position in its inputs)

    @property
    def head(self) -> PhysicalNode:
        return self.nodes[0]

    @property
    def is_source(self) -> bool:
        return self.head.source is not None

    @property
    def name(self) -> str:
        return " -> ".join(n.name for n in self.nodes)


def node_uids(flow: Dataflow) -> dict[int, str]:
    uids: dict[int, str] = {}
    for node in flow.nodes:  # nodes are in topological order (inputs first)
        parts = [node.name, node.detail] + [uids[e.upstream] for e in node.inputs]
        uids[node.id] = hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]
    # identical subplans (the same query twice in a statement set) get distinct uids
    seen: dict[str, int] = {}
    for node in flow.nodes:
        u = uids[node.id]
        if u in seen:
            uids[node.id] = hashlib.sha1(f"{u}#{node.id}".encode()).hexdigest()[:16]
        seen[uids[node.id]] = node.id
    return uids


def build_chains(flow: Dataflow, default_parallelism: int) -> list[Chain]:
    uids = node_uids(flow)
    par = parallelisms(flow.nodes, default_parallelism)
    consumers: dict[int, list[int]] = {n.id: [] for n in flow.nodes}
    for n in flow.nodes:
        for e in n.inputs:
            consumers[e.upstream].append(n.id)
    chain_of: dict[int, Chain] = {}
    chains: list[Chain] = []
    for n in flow.nodes:
        chainable = (
            len(n.inputs) == 1
            and n.inputs[0].mode == "forward"
            and par[n.inputs[0].upstream] == par[n.id]
            and len(consumers[n.inputs[0].upstream]) == 1
        )
        if chainable:
            chain = chain_of[n.inputs[0].upstream]
            chain.nodes.append(n)
            chain.node_uids.append(uids[n.id])
        else:
            chain = Chain(uids[n.id], [n], [uids[n.id]], par[n.id])
            for i, e in enumerate(n.inputs):
                up = chain_of[e.upstream]
                mode = e.mode
                if mode == "forward" and up.parallelism != chain.parallelism:
                    mode = "rebalance"
                if mode == "hash" and not e.keys:
                    mode = "global"
                chain.inputs.append(ChainInput(up.uid, mode, e.keys, i))
            chains.append(chain)
        chain_of[n.id] = chain
    by_uid = {c.uid: c for c in chains}
    for c in chains:
        for pos, ci in enumerate(c.inputs):
            by_uid[ci.upstream].consumers.append((c.uid, pos))
    return chains
