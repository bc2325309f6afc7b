"""Hypothesis strategies for affuzz cases: a public API you may import into your own tests.

    from hypothesis import given
    from strategies import cases

    @given(cases(max_depth=2))
    def test_my_property(case): ...

Every strategy is torch-free, takes keyword-only arguments (validated; bad ones raise), and orders its
choices simplest first, so Hypothesis shrinks toward scalar inputs, one output and one transform.
"""

from .cases import SHAPES, case_groups, cases, group_entry
from .compiled import checkpoint_configs, compile_configs
from .functions import functions, views
from .inputs import VALUES, tensor_values
from .transforms import transform_stacks

#: The custom ``autograd.Function`` definitions alone (the same strategy as :func:`functions`).
autograd_functions = functions

__all__ = [
    "SHAPES",
    "VALUES",
    "autograd_functions",
    "case_groups",
    "checkpoint_configs",
    "cases",
    "compile_configs",
    "functions",
    "group_entry",
    "tensor_values",
    "transform_stacks",
    "views",
]
