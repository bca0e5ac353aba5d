"""YAML loading with limits on aliases, for the files the CLI reads (job.yaml, sweep.yaml).

yaml.safe_load builds an alias as a shared reference, so a "billion laughs" file (nine levels of
ten aliases each) loads small and then explodes when the spec is turned into JSON to send: the
CLI hung filling memory. This loader refuses a file with more than MAX_ALIASES aliases, one whose
document would hold more than MAX_NODES values once aliases are expanded, and a recursive alias,
with a YAML error that says so (where it is, and why)."""
from __future__ import annotations

from typing import Any

import yaml
from yaml.error import MarkedYAMLError

MAX_ALIASES = 100
MAX_NODES = 100_000


class YAMLLimitError(MarkedYAMLError):
    pass


class LimitedSafeLoader(yaml.SafeLoader):
    max_aliases = MAX_ALIASES
    max_nodes = MAX_NODES

    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self.max_aliases:
                raise YAMLLimitError(problem=f"more than {self.max_aliases} aliases (*name): refused, as a file "
                                             "built to expand beyond memory would be",
                                     problem_mark=self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def construct_document(self, node):
        _expanded_size(node, self.max_nodes, {}, set())
        return super().construct_document(node)


def _expanded_size(node, limit: int, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """How many values `node` holds with every alias expanded (memoised per node, so a bomb is
    measured without being expanded); YAMLLimitError past `limit` or on a recursive alias."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise YAMLLimitError(problem="a recursive alias (a value that contains itself): refused",
                             problem_mark=node.start_mark)
    total = 1
    if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
        open_nodes.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        for child in children:
            total += _expanded_size(child, limit, sizes, open_nodes)
            if total > limit:
                raise YAMLLimitError(problem=f"more than {limit} values once aliases are expanded: refused, as a "
                                             "file built to expand beyond memory would be",
                                     problem_mark=node.start_mark)
        open_nodes.discard(key)
    sizes[key] = total
    return total


def safe_load(text: str) -> Any:
    """yaml.safe_load with the limits above."""
    return yaml.load(text, Loader=LimitedSafeLoader)  # noqa: S506 - a SafeLoader subclass
