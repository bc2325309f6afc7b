"""Versioned JSON of a case (schema ``SCHEMA_VERSION``); loading always validates."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from .case import (
    READABLE_SCHEMA_VERSIONS,
    SCALAR_OPS,
    SCHEMA_VERSION,
    Case,
    CaseError,
    Checkpoint,
    Compile,
    FDef,
    FunctionDef,
    Inputs,
    Node,
    Output,
    Transform,
    View,
)
from .validate import require, validate
from .validity import shifts_an_input


def case_to_json(case: Case) -> dict[str, Any]:
    fn = case.function

    def view(v: View) -> dict[str, Any]:
        d: dict[str, Any] = {"op": v.op}
        if v.op in ("unsqueeze", "select", "narrow", "transpose", "squeeze"):
            d["dim"] = v.dim
        if v.op in ("select", "narrow"):
            d["index"] = v.index
        if v.op == "narrow":
            d["length"] = v.length
        if v.op == "reshape":
            d["shape"] = list(v.shape)
        if v.op == "transpose":
            d["dim1"] = v.dim1
        return d

    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "function": {
            "n_inputs": fn.n_inputs,
            "nodes": [
                {
                    "op": n.op,
                    "args": list(n.args),
                    **({"exponent": n.exponent} if n.op == "pow" else {}),
                    **({"scalar": n.scalar} if n.op in SCALAR_OPS else {}),
                    **({"inplace": True} if n.inplace else {}),
                }
                for n in fn.nodes
            ],
            "outputs": [
                {
                    "kind": o.kind,
                    "ref": o.ref,
                    **({"view": view(o.view)} if o.view else {}),
                }
                for o in fn.outputs
            ],
            "saved": list(fn.saved),
            "unused_grads": list(fn.unused_grads),
            "none_grads": list(fn.none_grads),
            "style": fn.style,
            "vmap_rule": fn.vmap_rule,
            "jvp_rule": fn.jvp_rule,
            "once_differentiable": fn.once_differentiable,
            "materialize_grads": fn.materialize_grads,
            "non_differentiable": list(fn.non_differentiable),
            "on_ctx": list(fn.on_ctx),
            "detached": list(fn.detached),
            "non_tensor_output": fn.non_tensor_output,
            "scalars": list(fn.scalars),
            "dirty": list(fn.dirty),
            **({"jvp_not_view": True} if fn.jvp_not_view else {}),  # written only when set: older readers
            **({"jvp_alias": True} if fn.jvp_alias else {}),
            **({"grad_rule": fn.grad_rule} if fn.grad_rule != "exact" else {}),
        },
        "f": {
            "uses": list(case.f.uses),
            "combine": case.f.combine,
            "inplace": list(case.f.inplace),
            "inplace_no_grad": case.f.inplace_no_grad,
            **({"apply_args": list(case.f.apply_args)} if case.f.apply_args else {}),
        },
        "inputs": {
            "shape": list(case.inputs.shape),
            "dtype": case.inputs.dtype,
            "values": [list(v) for v in case.inputs.values],
        },
        "transforms": [
            {
                "name": t.name,
                **(
                    {"batch_size": t.batch_size, "in_dims": list(t.in_dims), "out_dims": t.out_dims}
                    if t.name == "vmap"
                    else {"argnums": list(t.argnums) if isinstance(t.argnums, tuple) else t.argnums}
                ),
            }
            for t in case.transforms
        ],
    }
    if case.compile is not None:  # NOTE [compiled mode]: written only when set
        c = case.compile
        out["compile"] = {"backend": c.backend, "fullgraph": c.fullgraph, "placement": c.placement}
        if c.autograd:
            out["compile"]["autograd"] = True
    if case.checkpoint is not None:  # NOTE [checkpoint mode]: written only when set
        out["checkpoint"] = {"kind": case.checkpoint.kind, "placement": case.checkpoint.placement}
    if case.meta:
        out["meta"] = dict(case.meta)
    return out


def dumps(case: Case) -> str:
    return json.dumps(case_to_json(case), indent=2, sort_keys=False) + "\n"


def _obj(d: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    require(isinstance(d, dict), where, f"expected an object, got {type(d).__name__}")
    required, optional = tuple(required), tuple(optional)
    unknown = sorted(set(d) - set(required) - set(optional))
    require(
        not unknown,
        where,
        f"unknown field(s) {', '.join(map(repr, unknown))} (known: {', '.join(required + optional)})",
    )
    missing = [k for k in required if k not in d]
    require(not missing, where, f"missing field(s) {', '.join(map(repr, missing))}")
    return d


def _argnums(d: Any, where: str) -> int | tuple[int, ...]:
    if isinstance(d, list):
        return tuple(_int(v, where) for v in d)
    return _int(d, where)


def _list(d: Any, where: str) -> list[Any]:
    require(isinstance(d, list), where, f"expected a list, got {type(d).__name__}")
    return d


def _int(d: Any, where: str) -> int:
    require(
        isinstance(d, int) and not isinstance(d, bool),
        where,
        f"expected an integer, got {d!r}",
    )
    return d


def case_from_json(data: Any) -> Case:
    """Build and :func:`validate` a case from parsed JSON. Raises :class:`CaseError` naming the bad field."""
    d = _obj(
        data,
        "case",
        ("schema_version", "function", "f", "inputs", "transforms"),
        ("meta", "compile", "checkpoint"),
    )
    version = d["schema_version"]
    require(
        version in READABLE_SCHEMA_VERSIONS and not isinstance(version, bool),
        "schema_version",
        f"unsupported version {version!r} (this affuzz reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})",
    )
    v2 = version >= 2
    v4 = version >= 4
    v2_function = (
        "jvp_rule",
        "once_differentiable",
        "materialize_grads",
        "non_differentiable",
        "on_ctx",
        "detached",
        "non_tensor_output",
        "scalars",
        "dirty",
        "jvp_not_view",
        *(("jvp_alias",) if version >= 3 else ()),
        *(("grad_rule",) if version >= 4 else ()),
    )
    fd = _obj(
        d["function"],
        "function",
        ("n_inputs", "nodes", "outputs"),
        ("saved", "unused_grads", "none_grads", "style", "vmap_rule", *(v2_function if v2 else ())),
    )
    nodes = []
    for k, nd in enumerate(_list(fd["nodes"], "function.nodes")):
        w = f"function.nodes[{k}]"
        nd = _obj(nd, w, ("op", "args"), ("exponent", *(("scalar",) if v2 else ()), *(("inplace",) if v4 else ())))
        nodes.append(
            Node(
                op=nd["op"],
                args=tuple(_list(nd["args"], f"{w}.args")),
                exponent=_int(nd.get("exponent", 2), f"{w}.exponent"),
                scalar=_int(nd.get("scalar", 0), f"{w}.scalar"),
                inplace=nd.get("inplace", False),
            )
        )
    outputs = []
    for j, od in enumerate(_list(fd["outputs"], "function.outputs")):
        w = f"function.outputs[{j}]"
        od = _obj(od, w, ("kind", "ref"), ("view",))
        view = None
        if "view" in od:
            vd = _obj(
                od["view"],
                f"{w}.view",
                ("op",),
                ("dim", "index", "length", "shape", "dim1"),
            )
            view = View(
                op=vd["op"],
                dim=_int(vd.get("dim", 0), f"{w}.view.dim"),
                index=_int(vd.get("index", 0), f"{w}.view.index"),
                length=_int(vd.get("length", 1), f"{w}.view.length"),
                shape=tuple(_int(s, f"{w}.view.shape") for s in _list(vd.get("shape", []), f"{w}.view.shape")),
                dim1=_int(vd.get("dim1", 1), f"{w}.view.dim1"),
            )
        outputs.append(Output(kind=od["kind"], ref=od["ref"], view=view))
    fn = FunctionDef(
        n_inputs=_int(fd["n_inputs"], "function.n_inputs"),
        nodes=tuple(nodes),
        outputs=tuple(outputs),
        saved=tuple(_list(fd.get("saved", []), "function.saved")),
        unused_grads=tuple(
            _int(j, "function.unused_grads") for j in _list(fd.get("unused_grads", []), "function.unused_grads")
        ),
        none_grads=tuple(
            _int(i, "function.none_grads") for i in _list(fd.get("none_grads", []), "function.none_grads")
        ),
        style=fd.get("style", "setup_context"),
        vmap_rule=fd.get("vmap_rule", "none"),
        jvp_rule=fd.get("jvp_rule", False),
        once_differentiable=fd.get("once_differentiable", False),
        materialize_grads=fd.get("materialize_grads", True),
        non_differentiable=tuple(
            _int(j, "function.non_differentiable")
            for j in _list(fd.get("non_differentiable", []), "function.non_differentiable")
        ),
        on_ctx=tuple(_list(fd.get("on_ctx", []), "function.on_ctx")),
        detached=tuple(_list(fd.get("detached", []), "function.detached")),
        non_tensor_output=fd.get("non_tensor_output", False),
        scalars=tuple(_list(fd.get("scalars", []), "function.scalars")),
        dirty=tuple(_int(i, "function.dirty") for i in _list(fd.get("dirty", []), "function.dirty")),
        jvp_not_view=fd.get("jvp_not_view", False),
        jvp_alias=fd.get("jvp_alias", False),
        grad_rule=fd.get("grad_rule", "exact"),
    )
    if version <= 2 and fn.jvp_rule and shifts_an_input(fn):
        fn = replace(fn, jvp_alias=True)  # rendered so before version 3 (READABLE_SCHEMA_VERSIONS)
    require(
        fn.style != "custom_op" or version >= 6,
        "function.style",
        f"custom_op needs schema_version 6 or later (this case says {version})",
    )
    f = _obj(
        d["f"],
        "f",
        ("uses",),
        ("combine", *(("inplace", "inplace_no_grad") if v2 else ()), *(("apply_args",) if v4 else ())),
    )
    idata = _obj(d["inputs"], "inputs", ("shape", "values"), ("dtype",))
    inputs = Inputs(
        shape=tuple(_int(s, "inputs.shape") for s in _list(idata["shape"], "inputs.shape")),
        values=tuple(
            tuple(_list(v, f"inputs.values[{i}]")) for i, v in enumerate(_list(idata["values"], "inputs.values"))
        ),
        dtype=idata.get("dtype", "float64"),
    )
    transforms = []
    for i, td in enumerate(_list(d["transforms"], "transforms")):
        w = f"transforms[{i}]"
        td = _obj(td, w, ("name",), ("argnums", "batch_size", *(("in_dims", "out_dims") if v2 else ())))
        in_dims = tuple(
            None if v is None else _int(v, f"{w}.in_dims") for v in _list(td.get("in_dims", []), f"{w}.in_dims")
        )
        transforms.append(
            Transform(
                name=td["name"],
                argnums=_argnums(td.get("argnums", 0), f"{w}.argnums"),
                batch_size=_int(td.get("batch_size", 0), f"{w}.batch_size"),
                in_dims=in_dims,
                out_dims=_int(td.get("out_dims", 0), f"{w}.out_dims"),
            )
        )
    meta = d.get("meta", {})
    require(isinstance(meta, dict), "meta", "expected an object")
    compiled = None
    if "compile" in d:  # NOTE [compiled mode]
        require(version >= 4, "compile", f"needs schema_version 4 or later (this case says {version})")
        cd = _obj(d["compile"], "compile", ("backend", "fullgraph", "placement"), ("autograd",))
        if "autograd" in cd:
            require(version >= 5, "compile.autograd", f"needs schema_version 5 or later (this case says {version})")
        compiled = Compile(
            backend=cd["backend"],
            fullgraph=cd["fullgraph"],
            placement=cd["placement"],
            autograd=cd.get("autograd", False),
        )
    checkpointed = None
    if "checkpoint" in d:  # NOTE [checkpoint mode]
        require(version >= 5, "checkpoint", f"needs schema_version 5 or later (this case says {version})")
        kd = _obj(d["checkpoint"], "checkpoint", ("kind", "placement"))
        checkpointed = Checkpoint(kind=kd["kind"], placement=kd["placement"])
    case = Case(
        function=fn,
        f=FDef(
            uses=tuple(_int(j, "f.uses") for j in _list(f["uses"], "f.uses")),
            combine=f.get("combine", "add"),
            inplace=tuple(_int(j, "f.inplace") for j in _list(f.get("inplace", []), "f.inplace")),
            inplace_no_grad=f.get("inplace_no_grad", False),
            apply_args=tuple(_int(i, "f.apply_args") for i in _list(f.get("apply_args", []), "f.apply_args")),
        ),
        inputs=inputs,
        transforms=tuple(transforms),
        meta=meta,
        compile=compiled,
        checkpoint=checkpointed,
    )
    return validate(case)


def loads(text: str, *, source: str = "<string>") -> Case:
    """Parse JSON text into a validated case; errors are prefixed with ``source``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"{source}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    try:
        return case_from_json(data)
    except CaseError as e:
        raise CaseError(f"{source}: {e}") from None


def load(path: str) -> Case:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CaseError(f"{path}: cannot read ({e.strerror})") from None
    return loads(text, source=str(path))
