"""Prints the conformance pass counts at the end of a pytest run."""


def pytest_terminal_summary(terminalreporter, config):
    lines = getattr(config, "kiln_conformance_summary", None)
    if lines:
        terminalreporter.section("ONNX conformance")
        for line in lines:
            terminalreporter.write_line(line)
