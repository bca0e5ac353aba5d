// Listen to a varying list of topics on the page's one socket (useTopic takes one topic,
// hooks cannot be called in a loop, so each topic gets a tiny component).
import { useTopic } from "../../live/LiveProvider";
import type { LiveFrame } from "../../live/socket";

function Topic({ topic, onFrame }: { topic: string; onFrame: (frame: LiveFrame) => void }) {
  useTopic(topic, onFrame);
  return null;
}

export function LiveTopics({ topics, onFrame }: { topics: readonly string[]; onFrame: (frame: LiveFrame) => void }) {
  return (
    <>
      {[...new Set(topics)].map((topic) => (
        <Topic key={topic} topic={topic} onFrame={onFrame} />
      ))}
    </>
  );
}
