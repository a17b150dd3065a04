"""Stand-ins for purged places count only from nodes admitted where the log holds them."""

from __future__ import annotations

from collections import Counter

import pytest
from ulid import ULID

from bzzz.errors import NetworkError
from bzzz.network import admission, restate
from bzzz.network.admission import Admission
from bzzz.network.base import BusMessage
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.network.restate import KIND, TYPE, StandIns


def _stand_in(identity: NodeIdentity, agent_id: str) -> dict[str, object]:
    subject = f"bzzz.main.agent.{agent_id}"
    payload = {"agent_id": agent_id, "role": "dev", "session_id": "s"}
    return seal(identity, "main", "agent.announced", subject, payload).model_dump(mode="json")


def _admitted(identity: NodeIdentity) -> Envelope:
    subject = f"bzzz.main.{admission.KIND}.{identity.node_id}"
    payload = {"public_key": identity.public_key_b64}
    return seal(identity, "main", admission.ADMITTED, subject, payload)


async def _put(bus: InMemoryBus, env: Envelope) -> int:
    return await bus.publish(env.subject, env.to_bytes(), str(ULID()))


async def test_a_holder_from_an_unadmitted_key_fills_no_gap() -> None:
    bus = InMemoryBus()
    purger, forger = NodeIdentity.generate(), NodeIdentity.generate()
    admitted = _admitted(purger)
    await _put(bus, admitted)  # seq 1
    # Seqs 2 and 3 were purged: the real holder and a forged one both claim them.
    await bus.publish("bzzz.main.msg.gone", b"{}", "gone-2")
    await bus.publish("bzzz.main.msg.gone", b"{}", "gone-3")
    for seq, (who, agent) in enumerate([(forger, "evil"), (purger, "real")], start=2):
        entries = [{"seq": seq, "envelope": _stand_in(purger, agent)}]
        holder = seal(who, "main", TYPE, f"bzzz.main.{KIND}.{who.node_id}", {"entries": entries})
        await _put(bus, holder)
    last = await _put(bus, admitted.model_copy(update={"id": str(ULID())}))
    await bus.purge("msg", None, before_seq=4)

    stand_ins = StandIns(bus, "main", None, admitted=Admission(enforce=True))
    tail = [BusMessage(subject="bzzz.main.x", data=b"{}", seq=last)]
    filled = await stand_ins.fill(1, tail)

    assert [(seq, env.payload["agent_id"]) for env, seq in filled] == [(3, "real")]


class _ReadFailsOnce(InMemoryBus):
    """The first read of the holders goes unanswered, after where the log ends was read."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def read_kind(
        self,
        kind: str,
        key: str | None = None,
        *,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[BusMessage]:
        if not self.failed:
            self.failed = True
            raise NetworkError("the network did not return its envelopes (TimeoutError())")
        return await super().read_kind(kind, key, before_seq=before_seq, after_seq=after_seq)


async def test_holders_half_read_when_the_network_failed_are_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(restate, "RETRY", 0.01)
    bus = _ReadFailsOnce()
    purger = NodeIdentity.generate()
    admitted = _admitted(purger)
    await _put(bus, admitted)  # seq 1
    await bus.publish("bzzz.main.msg.gone", b"{}", "gone-2")
    entries = [{"seq": 2, "envelope": _stand_in(purger, "real")}]
    holder = seal(purger, "main", TYPE, f"bzzz.main.{KIND}.{purger.node_id}", {"entries": entries})
    last = await _put(bus, holder)
    await bus.purge("msg", None, before_seq=3)
    counters: Counter[str] = Counter()

    stand_ins = StandIns(
        bus, "main", None, admitted=Admission(enforce=True), filtered=True, counters=counters
    )
    filled = await stand_ins.fill(1, [BusMessage(subject="bzzz.main.x", data=b"{}", seq=last)])

    assert [(seq, env.payload["agent_id"]) for env, seq in filled] == [(2, "real")]
    assert counters["stand_ins_retried"] == 1
