// React glue for the page's one websocket: <LiveProvider project=...> opens it, useTopic listens.
import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from "react";
import { LiveSocket, liveUrl, type LiveFrame, type LiveStatus } from "./socket";

const LiveContext = createContext<LiveSocket | null>(null);

export function LiveProvider({ project, children }: { project: string; children: ReactNode }) {
  const [socket, setSocket] = useState<LiveSocket | null>(null);
  useEffect(() => {
    const live = new LiveSocket(liveUrl(project));
    setSocket(live);
    return () => live.close();
  }, [project]);
  return <LiveContext.Provider value={socket}>{children}</LiveContext.Provider>;
}

/** Call `handler` for every frame of `topic` (null: listen to nothing) while mounted. */
export function useTopic(topic: string | null, handler: (frame: LiveFrame) => void): void {
  const socket = useContext(LiveContext);
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => {
    if (!socket || !topic) return undefined;
    return socket.subscribe(topic, (frame) => latest.current(frame));
  }, [socket, topic]);
}

/** Why the server closed the page's socket for good (signed out, removed, ...), if it did. */
export function useLiveCloseReason(): string | undefined {
  const socket = useContext(LiveContext);
  const [reason, setReason] = useState<string | undefined>(socket?.closeReason);
  useEffect(() => {
    if (!socket) return undefined;
    setReason(socket.closeReason);
    return socket.onStatus(() => setReason(socket.closeReason));
  }, [socket]);
  return reason;
}

export function useLiveStatus(): LiveStatus {
  const socket = useContext(LiveContext);
  const [status, setStatus] = useState<LiveStatus>(socket?.status ?? "connecting");
  useEffect(() => {
    if (!socket) return undefined;
    setStatus(socket.status);
    return socket.onStatus((s) => setStatus(s));
  }, [socket]);
  return status;
}
