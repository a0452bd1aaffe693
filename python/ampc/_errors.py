"""The error ampc's exporter raises for what it cannot export faithfully: ampc.Error, or
RuntimeError where the exporter is loaded from the source tree without the extension module
(tests/oracle)."""


def export_error(message):
    try:
        from ._ampc import Error
    except ImportError:
        Error = RuntimeError
    error = Error(message)
    error.ampc_export = True  # raised by ampc's exporter itself: passed on as it is
    return error


def from_torch_export(error):
    """An error torch.onnx.export raised, as ampc's exporter's: one line that says torch's
    exporter failed, with its message and, where torch's symbolic functions raised it, the
    operator being exported (torch's own messages for an exporter crash, such as "list index
    out of range", name neither)."""
    import traceback

    where = ""
    for frame in traceback.extract_tb(error.__traceback__):  # the outermost: the op's own
        if "torch/onnx/symbolic_opset" in frame.filename.replace("\\", "/"):
            where = f" (in its symbolic function `{frame.name}`, {frame.filename.rsplit('/', 1)[-1]})"
            break
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return export_error(f"torch.onnx.export could not export the module{where}: "
                        f"{type(error).__name__}: {message}")
