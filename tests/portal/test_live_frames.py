"""The live websocket's frames are declared once (apps/portal/frames.py): the docs' examples are
as declared, the OpenAPI schema (and so the dashboard's generated types) carries them, and the
socket refuses to send a frame that is not as declared while the tests run (every test of
tests/portal/test_live.py thereby checks the frames it receives)."""
import json
import re
from pathlib import Path

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from drf_spectacular.generators import SchemaGenerator

from apps.portal.consumers import ProjectLiveConsumer
from apps.portal.frames import FRAMES, component_name, frame_errors

ROOT = Path(__file__).resolve().parents[2]


def _doc_frames() -> list[dict]:
    """Every JSON object with a topic and a type in docs/live.md's json blocks."""
    frames, decoder = [], json.JSONDecoder()
    for block in re.findall(r"```json\n(.*?)```", (ROOT / "docs/live.md").read_text(), re.S):
        text, at = block.strip(), 0
        while at < len(text):
            obj, end = decoder.raw_decode(text, at)
            if isinstance(obj, dict) and "type" in obj and "topic" in obj:
                frames.append(obj)
            at = end
            while at < len(text) and text[at].isspace():
                at += 1
    return frames


def test_every_frame_the_docs_show_is_as_declared_and_every_declared_frame_is_shown():
    frames = _doc_frames()
    for frame in frames:
        assert frame_errors(frame) == [], frame
    assert {frame["type"] for frame in frames} == set(FRAMES)


def test_a_frame_that_drifts_from_its_declaration_is_caught():
    good = {"topic": "workloads", "type": "workload.status", "workload": 4, "status": "running", "reason": "Started"}
    assert frame_errors(good) == []
    assert frame_errors({**good, "status": "sleeping"})  # not a status
    assert frame_errors({k: v for k, v in good.items() if k != "reason"})  # a field missing
    assert frame_errors({**good, "extra": 1}) == ["extra: not declared"]
    assert frame_errors({"topic": "workloads", "type": "workload.renamed"}) == ["Unknown frame type 'workload.renamed'."]


def test_the_schema_has_a_component_per_frame_and_their_union():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    union = components["LiveFrame"]
    assert union["discriminator"]["propertyName"] == "type"
    assert set(union["discriminator"]["mapping"]) == set(FRAMES)
    for name, cls in FRAMES.items():
        component = components[component_name(cls)]
        assert component["properties"]["type"]["enum"] == [name]
        assert {"topic", "type"} <= set(component["required"])
    # the dashboard's types are generated from the committed schema: it must carry the same frames
    committed = json.loads((ROOT / "frontend/openapi.json").read_text())["components"]["schemas"]
    for name in [*map(component_name, FRAMES.values()), "LiveFrame"]:
        assert committed.get(name) == components[name], f"{name}: regenerate frontend/openapi.json"


@pytest.mark.asyncio
async def test_the_socket_refuses_to_send_an_undeclared_frame(monkeypatch, settings):
    sent = []

    async def send(self, content, close=False):
        sent.append(content)

    monkeypatch.setattr(AsyncJsonWebsocketConsumer, "send_json", send)
    consumer = ProjectLiveConsumer()
    await consumer.send_json({"topic": "workloads", "type": "subscribed"})
    with pytest.raises(ValueError, match="workload.status"):
        await consumer.send_json({"topic": "workloads", "type": "workload.status", "workload": 1})
    settings.CAIRN_VALIDATE_LIVE_FRAMES = False  # in production a frame is sent as it is
    await consumer.send_json({"topic": "workloads", "type": "workload.status", "workload": 1})
    assert [frame["type"] for frame in sent] == ["subscribed", "workload.status"]
