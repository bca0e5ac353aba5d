"""Websocket helpers for tests: what a refused socket's client sees."""
from channels.testing.websocket import WebsocketCommunicator


async def close_of(ws: WebsocketCommunicator, timeout: float = 5) -> dict:
    """The close message of a socket the server accepted and then closed: {"code", "reason"}."""
    message = await ws.receive_output(timeout=timeout)
    assert message["type"] == "websocket.close", message
    return {"code": message.get("code"), "reason": message.get("reason", "")}


async def refused_with(ws: WebsocketCommunicator) -> int:
    """Connect; the handshake is accepted (so browsers see the code) and the socket is then closed.
    Returns the close code."""
    connected, _ = await ws.connect()
    assert connected, "the handshake must be accepted before the socket is closed with a code"
    closed = await close_of(ws)
    assert closed["reason"], "a refusal says why"
    return closed["code"]
