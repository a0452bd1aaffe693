"""The error ampc's exporter raises for what it cannot export faithfully: ampc.Error, or
RuntimeError where the exporter is loaded from the source tree without the extension module
(tests/oracle)."""


def export_error(message):
    try:
        from ._ampc import Error
    except ImportError:
        Error = RuntimeError
    return Error(message)
