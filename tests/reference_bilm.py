"""
A deliberately naive NumPy re-implementation of the bilm-tf forward pass, for tests.

It shares no code with `elmo_plugin`: it works on the raw weight-file datasets (a dict of HDF5
name -> array) and the raw ``options.json`` dictionary, runs one sentence at a time, one token
and one time step at a time, in float64, and follows the math of the TensorFlow code (bilm-tf's
model.py):

* token -> UTF-8 bytes framed by begin/end-of-word ids, cut to ``max_chars - 2`` bytes, padded,
  shifted by +1; the byte embedding is ``char_embed`` with a zero row prepended;
* each convolution (``W_cnn`` of shape (1, width, char_dim, n_filters)) is a VALID correlation
  over the character positions, then a max over positions, then the activation;
* highway: ``g * relu(x W_transform + b_transform) + (1 - g) * x``, ``g = sigmoid(x W_carry + b_carry)``;
* a projection ``x W_proj + b_proj`` only if the total number of filters != projection_dim;
* TensorFlow's ``LSTMCell``: gates ``i, j, f, o = split(concat([x, h_prev]) W_0 + B)``,
  ``c = clip(sigmoid(i) tanh(j) + sigmoid(f + 1) c_prev, cell_clip)``,
  ``h = clip((sigmoid(o) tanh(c)) W_P_0, proj_clip)``;
* skip connections (``ResidualWrapper``) add each layer's input to its output for layers > 0;
* the backward LM runs over the reversed sentence and its outputs are reversed back;
* the sentence is wrapped in ``<S>`` ... ``</S>``; layer 0 of the output is ``[x; x]``.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260

# state[direction][layer] = (h, c)
State = List[List[Tuple[np.ndarray, np.ndarray]]]


def token_char_ids(token: str, max_chars: int) -> List[int]:
    """+1-shifted ids of one token, ``<S>`` and ``</S>`` being the sentence markers."""
    if token == "<S>":
        middle = [BOS_CHAR]
    elif token == "</S>":
        middle = [EOS_CHAR]
    else:
        middle = list(token.encode("utf-8"))[: max_chars - 2]
    ids = [BOW_CHAR] + middle + [EOW_CHAR]
    ids = ids + [PAD_CHAR] * (max_chars - len(ids))
    return [i + 1 for i in ids]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _clip(x: np.ndarray, value: Optional[float]) -> np.ndarray:
    if value is None:
        return x
    return np.clip(x, -value, value)


def lstm_scope(direction: int, layer: int, arrays: Dict[str, np.ndarray]) -> str:
    multi = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
    if multi + "/W_0" in arrays:
        return multi
    single = f"RNN_{direction}/RNN/LSTMCell"  # TensorFlow's names for a single-layer biLM
    assert layer == 0 and single + "/W_0" in arrays, f"no weights for layer {layer}"
    return single


class ReferenceBilm:
    """The bilm-tf forward pass on raw arrays; ``embed_sentence`` is the entry point."""

    def __init__(self, arrays: Dict[str, np.ndarray], options: Dict[str, Any]) -> None:
        self.w = {name: np.asarray(value, dtype=np.float64) for name, value in arrays.items()}
        char_cnn = options["char_cnn"]
        lstm = options["lstm"]
        self.max_chars = char_cnn["max_characters_per_token"]
        self.filters = [(int(width), int(count)) for width, count in char_cnn["filters"]]
        self.n_filters = sum(count for _, count in self.filters)
        self.n_highway = char_cnn.get("n_highway") or 0
        self.activation = char_cnn.get("activation", "relu")
        self.n_layers = lstm.get("n_layers", 1)
        self.cell_dim = lstm["dim"]
        self.projection_dim = lstm["projection_dim"]
        self.cell_clip = lstm.get("cell_clip")
        self.proj_clip = lstm.get("proj_clip")
        self.skip = bool(lstm.get("use_skip_connections", False))
        # Prediction-time embedding: row 0 (the mask id) is zero, then the 261 trained rows.
        char_embed = self.w["char_embed"]
        self.char_embedding = np.concatenate([np.zeros((1, char_embed.shape[1])), char_embed])

    # -- token encoder -------------------------------------------------------------------------
    def encode_token(self, token: str) -> np.ndarray:
        ids = token_char_ids(token, self.max_chars)
        chars = np.stack([self.char_embedding[i] for i in ids])  # (max_chars, char_dim)
        pooled = []
        for index, (width, count) in enumerate(self.filters):
            kernel = self.w[f"CNN/W_cnn_{index}"][0]  # (width, char_dim, count)
            bias = self.w[f"CNN/b_cnn_{index}"]
            outputs = []
            for start in range(self.max_chars - width + 1):
                window = chars[start : start + width]  # (width, char_dim)
                value = bias.copy()
                for offset in range(width):
                    value = value + window[offset] @ kernel[offset]
                outputs.append(value)
            best = np.max(np.stack(outputs), axis=0)  # max over positions, then activation
            pooled.append(np.maximum(best, 0.0) if self.activation == "relu" else np.tanh(best))
        x = np.concatenate(pooled)
        for k in range(self.n_highway):
            scope = f"CNN_high_{k}"
            carry = _sigmoid(x @ self.w[f"{scope}/W_carry"] + self.w[f"{scope}/b_carry"])
            transform = np.maximum(x @ self.w[f"{scope}/W_transform"] + self.w[f"{scope}/b_transform"], 0.0)
            x = carry * transform + (1.0 - carry) * x
        if self.n_filters != self.projection_dim:
            x = x @ self.w["CNN_proj/W_proj"] + self.w["CNN_proj/b_proj"]
        return x

    # -- LSTM ----------------------------------------------------------------------------------
    def lstm_step(
        self, direction: int, layer: int, x: np.ndarray, h: np.ndarray, c: np.ndarray
    ) -> Tuple[np.ndarray, np.ndarray]:
        scope = lstm_scope(direction, layer, self.w)
        gates = np.concatenate([x, h]) @ self.w[f"{scope}/W_0"] + self.w[f"{scope}/B"]
        d = self.cell_dim
        i, j, f, o = gates[:d], gates[d : 2 * d], gates[2 * d : 3 * d], gates[3 * d :]
        c = _sigmoid(i) * np.tanh(j) + _sigmoid(f + 1.0) * c  # forget bias 1.0
        c = _clip(c, self.cell_clip)
        h = (_sigmoid(o) * np.tanh(c)) @ self.w[f"{scope}/W_P_0"]
        h = _clip(h, self.proj_clip)
        return h, c

    def zero_state(self) -> State:
        return [
            [(np.zeros(self.projection_dim), np.zeros(self.cell_dim)) for _ in range(self.n_layers)]
            for _ in range(2)
        ]

    def run_direction(
        self, direction: int, tokens: List[np.ndarray], state: List[Tuple[np.ndarray, np.ndarray]]
    ) -> Tuple[List[List[np.ndarray]], List[Tuple[np.ndarray, np.ndarray]]]:
        """Runs all layers of one direction over ``tokens`` (already in reading order)."""
        layer_outputs: List[List[np.ndarray]] = []
        inputs = tokens
        final_state = []
        for layer in range(self.n_layers):
            h, c = state[layer]
            outputs = []
            for x in inputs:
                h, c = self.lstm_step(direction, layer, x, h, c)
                outputs.append(h + x if (self.skip and layer > 0) else h)
            final_state.append((h, c))
            layer_outputs.append(outputs)
            inputs = outputs
        return layer_outputs, final_state

    def embed_sentence(
        self, tokens: Sequence[str], state: Optional[State] = None
    ) -> Tuple[np.ndarray, State]:
        """
        Returns ``(n_layers + 1, len(tokens) + 2, 2 * projection_dim)`` (boundaries included)
        and the final state (pass it back in to run statefully, as bilm-tf does).
        """
        state = state if state is not None else self.zero_state()
        sentence = ["<S>"] + list(tokens) + ["</S>"]
        embedded = [self.encode_token(token) for token in sentence]
        forward, forward_state = self.run_direction(0, embedded, state[0])
        backward_reversed, backward_state = self.run_direction(1, embedded[::-1], state[1])
        layers = [np.stack([np.concatenate([x, x]) for x in embedded])]
        for fw, bw in zip(forward, backward_reversed):
            bw = bw[::-1]
            layers.append(np.stack([np.concatenate([a, b]) for a, b in zip(fw, bw)]))
        return np.stack(layers), [forward_state, backward_state]
