"""gat_torch: gat's fused graph-attention kernels inside PyTorch.

The kernels are PyTorch custom operators (torch.ops.gat_torch, CPU and CUDA) with autograd and
fake implementations (ops.py); GATConv and GATv2Conv (conv.py) are drop-in replacements for
PyTorch Geometric's layers of the same names. See docs/pytorch.md.
"""
import os

import torch

# The compiled operators: _C.so beside this file (a `pip install` of the repository, or a build
# with GAT_TORCH=ON, whose <build>/python folder holds the package), or the file named by
# GAT_TORCH_LIBRARY.
_library = os.environ.get("GAT_TORCH_LIBRARY") or os.path.join(os.path.dirname(__file__), "_C.so")
if not os.path.isfile(_library):
    raise ImportError(
        f"gat_torch: its compiled operators are missing ({_library}); install the package with "
        "`pip install .` from the repository, or build gat with -DGAT_TORCH=ON and put "
        "<build>/python on PYTHONPATH")
torch.ops.load_library(_library)

from . import ops  # noqa: E402  (registers autograd and fake implementations)
from .ops import Graph  # noqa: E402
from .conv import GATConv, GATv2Conv  # noqa: E402

__all__ = ["Graph", "GATConv", "GATv2Conv", "ops"]
