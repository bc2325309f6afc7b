"""The normalized key of an error message, torch-free: what makes two errors one (NOTE [error buckets] in
:mod:`fuzzer.judge.compare`).

:func:`message_key` is copied into every rendered script, where ``error_key(e)`` applies it to an
exception (:mod:`fuzzer.codegen.repro_lib`), and it is imported by verification, which applies it to the
last line of a repro's traceback (:func:`fuzzer.publish.verify.traceback_key`): the same function on
both ends, so a repro is accepted only when its traceback ends on the error its bucket is named after.
"""

from __future__ import annotations

import re


def message_key(type_name, message):
    """An error's fingerprint key: its type and the first clause of its message, with numbers, bracketed
    details and the Function's (or functorch's generated) class name ignored."""
    text = re.sub(r"\[[^\]]*\]+", "[...]", (message.strip().splitlines() or [""])[0])
    parts = re.split(r"(?<=[:;,.])\s", text)
    head = parts[0]
    for part in parts[1:]:  # whole clauses, at least 40 characters ("vmap: ..." keeps its second clause)
        if len(head) >= 40:
            break
        head += " " + part
    head = re.sub(r"[:;,.]$", "", head)
    return f"{type_name}: {re.sub(r'[0-9]+', 'N', re.sub(r'Fn[A-Za-z]*', 'Fn', head))[:160]}"


# NOTE [errors Dynamo wraps]
# Where the traced program itself raises while Dynamo runs it on fake tensors, Dynamo raises
# TorchRuntimeError("RuntimeError when making fake tensor call ... got RuntimeError('<message>') ... Hint:
# Your code may result in an error when running in eager"): the program's own error, the one eager raises.
# The judge explains and compares such an error as the inner one (a hand check of a 10-minute run read a
# compiled side "disagreeing" with eager by raising eager's very error, wrapped), while its fingerprint stays
# the raised error's, the line a repro's traceback ends on (verification reads that line). The same for
# BackendCompilerFailed("backend='aot_eager' raised:\nRuntimeError: <message>\n\nSet TORCHDYNAMO_VERBOSE...")
# where AOTAutograd, tracing the backward ahead of time, meets the program's own error (a saved tensor
# modified in place: eager raises it when backward runs, the compiled side when it is compiled).
def dynamo_inner_error(type_name, message):
    """NOTE [errors Dynamo wraps]: the (type, message) inside Dynamo's fake-tensor wrapper or a backend's
    failure, or None for any other error."""
    if type_name == "BackendCompilerFailed":
        m = re.match(r"backend=(['\"])\w+\1 raised:\n(\w+): (.*?)\n\n(?:Set TORCHDYNAMO_VERBOSE|$)", message, re.S)
        return None if m is None else (m.group(2), m.group(3))
    if type_name != "TorchRuntimeError":
        return None
    m = re.search(r"when making fake tensor call\b.*?: got (\w+)\((['\"])(.*?)\2\)\s*\n\s*Hint:", message, re.S)
    if m is None:
        return None
    return m.group(1), m.group(3).replace("\\'", "'").replace("\\n", "\n")
