# Type stubs of the ampc package (python/ampc): the public interface, see docs/python.md.
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

# StepResult's fields are declared once, with their meaning, where the class is defined.
from ._trainer import StepResult as StepResult

_Path = Union[str, os.PathLike]
_Array = Any  # a numpy array, a torch tensor, or anything numpy.asarray takes

class Error(RuntimeError):
    """An error the user can act on, with the message `ampc` prints after `ampc: error:`."""

class Trainer:
    last_step_copies: List[str]
    @property
    def inputs(self) -> Dict[str, Tuple[str, Tuple[int, ...]]]: ...
    @property
    def accum_steps(self) -> int: ...
    @property
    def batch_size(self) -> Optional[int]: ...
    @property
    def losses(self) -> List[str]: ...
    @property
    def steps_done(self) -> int: ...
    def step(self, inputs: Optional[Mapping[str, _Array]] = None, /, **kwargs: _Array) -> StepResult: ...
    def eval(self, inputs: Optional[Mapping[str, _Array]] = None, /, **kwargs: _Array) -> Dict[str, Any]: ...
    def state_dict(self) -> Dict[str, np.ndarray]: ...
    def optimizer_state_dict(self) -> Dict[str, np.ndarray]: ...
    def load_state_dict(self, state_dict: Mapping[str, _Array], strict: bool = True) -> None: ...
    def copy_to(self, module: Any) -> List[str]: ...
    def save(self, path: _Path, data_position: Optional[int] = None) -> None: ...
    def save_plan(self, path: _Path) -> None: ...

def compile(
    model: Union[_Path, Any],
    example_inputs: Optional[Union[Mapping[str, _Array], Sequence[_Array]]] = None,
    *,
    precision: Optional[str] = None,
    optimizer: Optional[str] = None,
    lr: Optional[float] = None,
    momentum: Optional[float] = None,
    nesterov: bool = False,
    weight_decay: Optional[float] = None,
    betas: Optional[Tuple[float, float]] = None,
    eps: Optional[float] = None,
    lr_schedule: Optional[str] = None,
    warmup_steps: Optional[int] = None,
    warmup_start_factor: Optional[float] = None,
    total_steps: Optional[int] = None,
    step_size: Optional[int] = None,
    gamma: Optional[float] = None,
    min_lr_factor: Optional[float] = None,
    no_decay: Optional[Union[str, Sequence[str]]] = None,
    lr_mult: Optional[Union[Mapping[str, float], Sequence[Tuple[str, float]]]] = None,
    loss_scale: Optional[Union[str, float]] = None,
    init_scale: Optional[float] = None,
    growth_factor: Optional[float] = None,
    backoff_factor: Optional[float] = None,
    growth_interval: Optional[int] = None,
    min_scale: Optional[float] = None,
    max_scale: Optional[float] = None,
    skip_nonfinite: bool = False,
    clip_grad_norm: Optional[float] = None,
    accum_steps: Optional[int] = None,
    freeze: Optional[Union[str, Sequence[str]]] = None,
    loss: Optional[Union[str, Sequence[str]]] = None,
    input_shapes: Optional[Union[str, Sequence[str]]] = None,
    grad_norm: Optional[bool] = None,
    allow: Optional[Union[str, Sequence[str]]] = None,
    deny: Optional[Union[str, Sequence[str]]] = None,
    follow: Optional[Union[str, Sequence[str]]] = None,
    keep_fp32: Optional[Union[str, Sequence[str]]] = None,
    policy: Optional[_Path] = None,
    recast_weights: bool = False,
    fusion: bool = True,
    target: str = "cpu",
    device: str = "cpu",
    seed: int = 0,
    export_path: Optional[_Path] = None,
) -> Trainer: ...
def export(model: Any, example_inputs: Any, path: _Path) -> None: ...
def load(
    checkpoint: _Path,
    model: Optional[Union[_Path, Any]] = None,
    example_inputs: Optional[Union[Mapping[str, _Array], Sequence[_Array]]] = None,
    *,
    seed: int = 0,
    **options: Any,
) -> Trainer: ...
def inspect(
    model: Union[_Path, Any],
    example_inputs: Optional[Union[Mapping[str, _Array], Sequence[_Array]]] = None,
    *,
    precision: str = "fp32",
    input_shapes: Optional[Union[str, Sequence[str]]] = None,
) -> Dict[str, Any]: ...
def precision_report(
    model: Union[_Path, Any],
    example_inputs: Optional[Union[Mapping[str, _Array], Sequence[_Array]]] = None,
    *,
    precision: str = "fp32",
    input_shapes: Optional[Union[str, Sequence[str]]] = None,
) -> Dict[str, Any]: ...
def report(stats: _Path) -> Dict[str, Any]: ...
