"""The model both samples share: a small torch language-model-shaped network whose weights for
version v are a pure function of v, so an engine can check what it received."""
import hashlib

import torch


def build(version):
    """The network with version `version`'s weights (version 0: what an engine starts from)."""
    torch.manual_seed(1000 + version)
    net = torch.nn.ModuleDict({
        "embed": torch.nn.Embedding(512, 64),
        "proj": torch.nn.Linear(64, 256),
        "norm": torch.nn.LayerNorm(256),
        "head": torch.nn.Linear(256, 512, bias=False),
    })
    net["head"].to(torch.bfloat16)  # mixed dtypes in one update
    return net


def checksums(named_tensors):
    """sha256 of every tensor's bytes, by name."""
    return {name: hashlib.sha256(t.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
            for name, t in named_tensors}
