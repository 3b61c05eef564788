#!/usr/bin/env python3
"""Build a tiny random-weight Qwen2 model directory that vLLM (CPU) can serve.

The directory holds a Hugging Face ``config.json``, ``model.safetensors`` and a
``PreTrainedTokenizerFast`` (byte-level BPE trained here, offline, on text that
ships with Python), about 1.8 MB in all: 4 layers, hidden 128, 4 query and 2
KV heads of 32, MLP 256, vocabulary 1024, untied ``lm_head``, bfloat16.

Everything is deterministic:

* the tokenizer and config come out byte-identical on every run, so two model
  directories made by this script differ only in their weights;
* the weights are a pure function of ``(config, seed)``: ``make_weights`` draws
  every tensor from one CPU ``torch.Generator`` seeded with ``seed``, in
  ``named_parameters()`` order. A trainer imports ``make_weights`` and
  publishes exactly the tensors a model directory made with the same seed
  holds ("weights version N" = seed N). ``make_weights``, ``param_shapes``
  and ``load_config`` need only torch; building a directory needs
  transformers, tokenizers and safetensors too (all in the vLLM venv).

Command line::

    make_tiny_model.py OUT_DIR [--seed N] [--from MODEL_DIR]

Without ``--from`` it writes a complete model directory whose weights come
from seed N (default 0). With ``--from`` it copies everything but the weights
from MODEL_DIR (config, tokenizer, generation config) and writes the seed-N
weights for that config: a checkpoint of "version N" of MODEL_DIR.

Python API: ``make_weights(config, seed)``, ``param_shapes(config)``,
``load_config(model_dir)``, ``make_model_dir(out_dir, seed)``,
``write_checkpoint(base_dir, out_dir, weights)``, ``build_tokenizer()``,
``build_config(vocab_size)``.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib
import io
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

#: The one special token; it is BOS, EOS and padding.
EOS_TOKEN = "<|endoftext|>"
#: BPE vocabulary size (256 byte symbols + merges + EOS); also the model's.
VOCAB_SIZE = 1024
#: Weight dtype of the saved model. vLLM's CPU backend serves bfloat16 natively.
DTYPE = torch.bfloat16
#: Name of the weights file inside a model directory.
WEIGHTS_FILE = "model.safetensors"


def _corpus() -> list[str]:
    """Tokenizer training text: the Zen of Python and the builtins' docstrings."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints it
        this = importlib.import_module("this")
    zen = "".join(this.d.get(c, c) for c in this.s)
    docs = [getattr(builtins, name).__doc__ or "" for name in sorted(dir(builtins))]
    return [zen, *docs]


def build_tokenizer():
    """Train a byte-level BPE ``PreTrainedTokenizerFast`` of ``VOCAB_SIZE`` tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        model_max_length=4096,
    )


def build_config(vocab_size: int, eos_token_id: int = 0):
    """The tiny ``Qwen2Config``. Embeddings are untied, so ``lm_head.weight`` exists."""
    from transformers import Qwen2Config

    return Qwen2Config(
        architectures=["Qwen2ForCausalLM"],
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=eos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id,
        dtype=DTYPE,
    )


def load_config(model_dir: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a model directory, as a dict."""
    return json.loads((Path(model_dir) / "config.json").read_text())


def _get(config: Mapping[str, Any] | Any, key: str) -> Any:
    return config[key] if isinstance(config, Mapping) else getattr(config, key)


def _dtype(config: Mapping[str, Any] | Any) -> torch.dtype:
    dtype = _get(config, "dtype") or DTYPE
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


def param_shapes(config: Mapping[str, Any] | Any) -> dict[str, tuple[int, ...]]:
    """HF parameter names and shapes of ``Qwen2ForCausalLM(config)`` (untied
    embeddings), in ``named_parameters()`` order. ``config`` is a
    ``Qwen2Config`` or the dict of its ``config.json``."""
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    head_dim = _get(config, "head_dim") or hidden // heads
    q = heads * head_dim
    kv = _get(config, "num_key_value_heads") * head_dim
    mlp = _get(config, "intermediate_size")
    vocab = _get(config, "vocab_size")
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(_get(config, "num_hidden_layers")):
        layer = f"model.layers.{i}."
        shapes.update(
            {
                layer + "self_attn.q_proj.weight": (q, hidden),
                layer + "self_attn.q_proj.bias": (q,),
                layer + "self_attn.k_proj.weight": (kv, hidden),
                layer + "self_attn.k_proj.bias": (kv,),
                layer + "self_attn.v_proj.weight": (kv, hidden),
                layer + "self_attn.v_proj.bias": (kv,),
                layer + "self_attn.o_proj.weight": (hidden, q),
                layer + "mlp.gate_proj.weight": (mlp, hidden),
                layer + "mlp.up_proj.weight": (mlp, hidden),
                layer + "mlp.down_proj.weight": (hidden, mlp),
                layer + "input_layernorm.weight": (hidden,),
                layer + "post_attention_layernorm.weight": (hidden,),
            }
        )
    shapes["model.norm.weight"] = (hidden,)
    shapes["lm_head.weight"] = (vocab, hidden)
    return shapes


def make_weights(config: Mapping[str, Any] | Any, seed: int) -> dict[str, torch.Tensor]:
    """All parameters of the model, as a pure function of ``(config, seed)``.

    Returns ``{hf_name: tensor}`` in ``named_parameters()`` order, in the
    config's dtype (bfloat16), contiguous, on CPU. Every tensor depends on the
    seed, so two seeds differ in every parameter: matrices and biases are
    N(0, 0.05^2), RMSNorm weights 1 + N(0, 0.1^2). Values are drawn in float32
    from one CPU ``torch.Generator`` seeded with ``seed``, then cast.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = _dtype(config)
    weights: dict[str, torch.Tensor] = {}
    for name, shape in param_shapes(config).items():
        noise = torch.randn(shape, generator=gen, dtype=torch.float32)
        value = 1.0 + 0.1 * noise if name.endswith("norm.weight") else 0.05 * noise
        weights[name] = value.to(dtype).contiguous()
    return weights


def _save_weights(out_dir: Path, weights: Mapping[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    save_file(
        {name: t.detach().cpu().contiguous() for name, t in weights.items()},
        str(out_dir / WEIGHTS_FILE),
        metadata={"format": "pt"},
    )


def make_model_dir(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a complete model directory (config, tokenizer, seed-``seed`` weights)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = build_config(len(tokenizer), tokenizer.convert_tokens_to_ids(EOS_TOKEN))
    config.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    _save_weights(out, make_weights(config, seed))
    return out


def write_checkpoint(
    base_dir: str | Path, out_dir: str | Path, weights: Mapping[str, torch.Tensor]
) -> Path:
    """Copy ``base_dir`` to ``out_dir`` with its weights replaced by ``weights``.

    Every file except ``*.safetensors`` (config, tokenizer, generation config)
    is copied; ``weights`` (HF names, e.g. from ``make_weights``) is written as
    ``model.safetensors``. ``weights`` must hold exactly the model's parameters
    with their shapes, else ValueError.
    """
    base, out = Path(base_dir), Path(out_dir)
    expected = param_shapes(load_config(base))
    got = {name: tuple(t.shape) for name, t in weights.items()}
    if got != expected:
        wrong = sorted(n for n in expected.keys() & got.keys() if expected[n] != got[n])
        raise ValueError(
            f"weights do not match the model: missing {sorted(expected.keys() - got.keys())}, "
            f"unknown {sorted(got.keys() - expected.keys())}, wrong shape {wrong}"
        )
    out.mkdir(parents=True, exist_ok=True)
    for path in base.iterdir():
        if path.is_file() and path.suffix != ".safetensors":
            shutil.copy2(path, out / path.name)
    _save_weights(out, weights)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write a tiny random-weight Qwen2 model directory for vLLM."
    )
    parser.add_argument("out_dir", help="directory to write")
    parser.add_argument("--seed", type=int, default=0, help="weights seed (version)")
    parser.add_argument(
        "--from",
        dest="base_dir",
        metavar="MODEL_DIR",
        help="copy config and tokenizer from MODEL_DIR; write only seed-N weights",
    )
    args = parser.parse_args(argv)
    if args.base_dir:
        weights = make_weights(load_config(args.base_dir), args.seed)
        out = write_checkpoint(args.base_dir, args.out_dir, weights)
    else:
        out = make_model_dir(args.out_dir, args.seed)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
