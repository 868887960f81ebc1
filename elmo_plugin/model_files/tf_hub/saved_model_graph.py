"""
The operations of a SavedModel's graphs (``saved_model.pb``), read without TensorFlow, for what no
variable holds (the character CNN's activation and max-pool span). Fields read: SavedModel.meta_graphs
2; MetaGraphDef.graph_def 2; GraphDef.node 1 and .library 2 (FunctionDefLibrary.function 1,
FunctionDef.node_def 3); NodeDef.name 1, .op 2, .attr 5 (map entries: key 1, value 2).
"""
import os
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files.tf_hub.wire_format import (
    WireFormatError,
    first,
    message_fields,
    repeated_ints,
)

SAVED_MODEL_NAME = "saved_model.pb"


@dataclass(frozen=True)
class GraphNode:
    """One operation: its name (``bilm/CNN/MaxPool_3``), type (``MaxPool``) and its attributes
    as serialized ``AttrValue`` messages, by attribute name."""

    name: str
    op: str
    attributes: Dict[str, bytes] = field(default_factory=dict)

    def int_list(self, attribute: str) -> Optional[List[int]]:
        """An attribute holding a list of integers (``AttrValue.list`` 1, ``ListValue.i`` 3),
        such as a max-pool's ``ksize``; None where the node has no such attribute."""
        listed = first(message_fields(self.attributes.get(attribute, b"")), 1, None)
        if not isinstance(listed, bytes):
            return None
        return repeated_ints(message_fields(listed), 3)


def _nodes_of(node_defs: List[bytes]) -> Iterator[GraphNode]:
    for serialized in node_defs:
        node = message_fields(serialized)
        entries = [message_fields(entry) for entry in node.get(5, [])]  # type: ignore[arg-type]
        yield GraphNode(
            name=first(node, 1, b"").decode("utf-8"),  # type: ignore[union-attr]
            op=first(node, 2, b"").decode("utf-8"),  # type: ignore[union-attr]
            attributes={first(entry, 1, b"").decode("utf-8"): first(entry, 2, b"") for entry in entries},  # type: ignore
        )


def saved_model_nodes(directory: str) -> List[GraphNode]:
    """Every operation of every graph of the SavedModel in ``directory`` (those of its functions
    included). `ConfigurationError` naming the file if it is missing or not a SavedModel."""
    path = os.path.join(directory, SAVED_MODEL_NAME)
    if not os.path.isfile(path):
        raise ConfigurationError(f"no {SAVED_MODEL_NAME} in {directory}")
    with open(path, "rb") as handle:
        data = handle.read()
    nodes: List[GraphNode] = []
    try:
        for meta_graph in message_fields(data).get(2, []):
            graph = message_fields(first(message_fields(meta_graph), 2, b""))  # type: ignore[arg-type]
            nodes.extend(_nodes_of(graph.get(1, [])))  # type: ignore[arg-type]
            for library in graph.get(2, []):
                for function in message_fields(library).get(1, []):  # type: ignore[arg-type]
                    nodes.extend(_nodes_of(message_fields(function).get(3, [])))  # type: ignore
    except (WireFormatError, UnicodeDecodeError, AttributeError) as error:
        raise ConfigurationError(f"{path}: not a SavedModel ({error}); is it complete?") from None
    return nodes
